// Package wire is the floor the streaming server's actors share: the
// messages the server, connection and stream actors exchange (msg.go), the
// encoding of frames (batch frames, whole or in parts around the records'
// shared JSON, and control frames; encode.go), the tip as frames carry it
// (tip.go), and Tell, the send that drops what a stopped actor would get.
//
// It holds no actor: streaming/stream (the stream actor), the connection
// actors and the root package (the server actor) import it, and it
// imports none of them.
package wire
