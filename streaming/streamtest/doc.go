// Package streamtest is what the streaming tests say to a streaming
// server and check of its answers: a bare WebSocket speaking the protocol
// frame by frame (Raw), a proxy that drops connections, collectors of
// delivered records, sample filters of a history's contracts, and the
// records a subscription must deliver, computed straight from the
// backend (Expected). It starts nothing: the history store and the server
// a test talks to are actors/pipeline/streamingtest's.
package streamtest
