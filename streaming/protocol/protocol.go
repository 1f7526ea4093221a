// Package protocol is the wire format of the streaming API: the JSON frames a
// client sends (commands) and receives (server frames) over one WebSocket,
// the subscription filter and the starting point. Both the server (package
// streaming) and the Go client (streaming/client) use it; docs/streaming.md
// describes the protocol with examples.
package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history/record"
)

// Command types: frames from the client.
const (
	TypeSubscribe   = "subscribe"
	TypeAck         = "ack"
	TypeNack        = "nack"
	TypeUnsubscribe = "unsubscribe"
	TypePing        = "ping"
)

// Server frame types.
const (
	TypeSubscribed   = "subscribed"
	TypeUnsubscribed = "unsubscribed"
	TypeBatch        = "batch"
	TypeError        = "error"
	TypeHeartbeat    = "heartbeat"
	TypePong         = "pong"
)

// Mode is how a stream's batches are delivered.
type Mode string

// Delivery modes.
const (
	// ModeAck: one batch in flight per stream; the next one only after the
	// client acknowledged it; unacknowledged batches are delivered again
	// (at least once).
	ModeAck Mode = "ack"
	// ModeBroadcast: no acknowledgements; every attached connection gets
	// every batch once (at most once).
	ModeBroadcast Mode = "broadcast"
)

// Error codes of error frames.
const (
	CodeBadJSON              = "bad_json"               // the frame is not a JSON command
	CodeBadFrame             = "bad_frame"              // a binary frame
	CodeUnknownType          = "unknown_type"           // a command type the server does not know
	CodeBadRequest           = "bad_request"            // a missing or invalid field
	CodeBadFilter            = "bad_filter"             // the filter does not parse
	CodeBadCursor            = "bad_cursor"             // from is not origin, tip or a cursor
	CodeStreamExists         = "stream_exists"          // the name is already subscribed on this connection
	CodeTooManySubscriptions = "too_many_subscriptions" // the connection's limit is reached
	CodeUnknownStream        = "unknown_stream"         // ack, nack or unsubscribe of a stream not subscribed
	CodeStreamMismatch       = "stream_mismatch"        // a durable stream exists with another filter or mode
	CodeDurableUnavailable   = "durable_unavailable"    // the server keeps no durable streams
	CodeStreamDeleted        = "stream_deleted"         // the durable stream was deleted
	CodeForbidden            = "forbidden"              // the credential may not do this (another owner's stream, a missing scope)
	CodeAckTimeout           = "ack_timeout"            // a batch was not acknowledged in time
	CodeShuttingDown         = "shutting_down"          // the server is stopping
	CodeInternal             = "internal"               // a server-side failure; try again
	CodeStoreUnavailable     = "store_unavailable"      // (HTTP, 503) the stream store could not answer; retry after Retry-After
	// CodeLeaseLost: another process took the durable stream (this one's
	// round-trip lease lapsed) and goes on from the stored cursor, before
	// records this connection got: the connection is closed, and those
	// records come again, marked redelivered, on the next one.
	CodeLeaseLost = "lease_lost"
)

// Close reasons: the WebSocket close frame's text when the server ends a
// connection.
const (
	CloseSlowConsumer  = "slow consumer"
	CloseTooManyErrors = "too many bad frames"
	CloseShuttingDown  = "server shutting down"
	ClosePingTimeout   = "ping timeout"
	// CloseMemoryBudget: the frames queued for all connections together
	// reached the server's budget, and this connection had the most of
	// them (it does not read).
	CloseMemoryBudget = "memory budget"
	// CloseLeaseLost: status 1013 (try again later) after a lease_lost
	// error frame.
	CloseLeaseLost = "lease lost"
)

// Limits of names.
const (
	MaxStreamName = 100
	MaxReason     = 1000
)

// Command is a frame from the client. Which fields apply depends on Type:
//
//	subscribe:   Stream, Filter, From, BatchSize, BatchTimeout, Mode, Durable
//	             (Filter may be left out to resume an existing durable stream)
//	ack:         Stream, Batch, UpToSeq (optional: acknowledges only the
//	             batch's records up to that seq; the rest come again)
//	nack:        Stream, Batch, Reason
//	unsubscribe: Stream
//	ping:        (none)
type Command struct {
	Type         string   `json:"type"`
	Stream       string   `json:"stream,omitempty"`
	Filter       *Filter  `json:"filter,omitempty"`
	From         string   `json:"from,omitempty"`
	BatchSize    int      `json:"batchSize,omitempty"`
	BatchTimeout Duration `json:"batchTimeout,omitempty"`
	Mode         Mode     `json:"mode,omitempty"`
	Durable      bool     `json:"durable,omitempty"`
	Batch        int64    `json:"batch,omitempty"`
	// UpToSeq, in an ack, acknowledges only the batch's records with a seq
	// up to it (0: the whole batch): the others go out again, at once, in
	// a new batch. A client that used part of a batch acks that part.
	UpToSeq int64  `json:"upToSeq,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// ErrBadCommand is wrapped by DecodeCommand's errors; Code says which error
// frame answers it.
type ErrBadCommand struct {
	Code string
	Err  error
	// Stream is the stream the command names, when it names one: the
	// error frame carries it, so that a client with several subscriptions
	// knows which one was refused (read even when the rest of the command
	// could not be).
	Stream string
}

// Error implements error.
func (e *ErrBadCommand) Error() string { return e.Code + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *ErrBadCommand) Unwrap() error { return e.Err }

func badCommand(code string, format string, args ...any) error {
	return &ErrBadCommand{Code: code, Err: fmt.Errorf(format, args...)}
}

// DecodeCommand reads and checks one command frame. Unknown fields of a
// subscribe are refused, so that a misspelt option is not silently
// ignored.
func DecodeCommand(data []byte) (*Command, error) {
	// Acks, the bulk of the traffic, take the cheap paths (scanAck, else a
	// lenient decode); a subscribe is decoded again strictly.
	c, plain := scanAck(data)
	if !plain {
		c = Command{}
		if err := json.Unmarshal(data, &c); err != nil {
			return nil, decodeError(err, data)
		}
	}
	if c.Type == TypeSubscribe {
		c = Command{}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return nil, decodeError(err, data)
		}
	}
	switch c.Type {
	case TypeSubscribe:
		if err := checkStreamName(c.Stream); err != nil {
			return nil, err
		}
		if c.Filter == nil && !c.Durable {
			return nil, badCommand(CodeBadFilter, `subscribe needs a filter (use {"all": true} for every record)`)
		}
		switch c.Mode {
		case "", ModeAck, ModeBroadcast:
		default:
			return nil, badCommand(CodeBadRequest, "mode %q is neither ack nor broadcast", c.Mode)
		}
		if c.BatchSize < 0 {
			return nil, badCommand(CodeBadRequest, "batchSize %d is negative", c.BatchSize)
		}
		if c.BatchTimeout < 0 {
			return nil, badCommand(CodeBadRequest, "batchTimeout is negative")
		}
	case TypeAck, TypeNack:
		if err := checkStreamName(c.Stream); err != nil {
			return nil, err
		}
		if c.Batch <= 0 {
			return nil, badCommand(CodeBadRequest, "%s needs the batch number", c.Type)
		}
		if c.UpToSeq < 0 || c.UpToSeq > 0 && c.Type != TypeAck {
			return nil, badCommand(CodeBadRequest, "upToSeq is a positive seq, in an ack only")
		}
		if len(c.Reason) > MaxReason {
			c.Reason = c.Reason[:MaxReason]
		}
	case TypeUnsubscribe:
		if err := checkStreamName(c.Stream); err != nil {
			return nil, err
		}
	case TypePing:
	case "":
		return nil, badCommand(CodeBadRequest, "the frame has no type")
	default:
		return nil, badCommand(CodeUnknownType, "unknown command type %q", c.Type)
	}
	return &c, nil
}

// decodeError classifies a JSON error: a filter that does not parse is
// bad_filter, anything else bad_json.
// decodeError is the error of a command that could not be decoded, with
// the stream it names if that much can be read.
func decodeError(err error, data []byte) error {
	var named struct {
		Stream string `json:"stream"`
	}
	if json.Unmarshal(data, &named) != nil || len(named.Stream) > MaxStreamName {
		named.Stream = ""
	}
	var fe *FilterError
	if errors.As(err, &fe) {
		return &ErrBadCommand{Code: CodeBadFilter, Err: fe, Stream: named.Stream}
	}
	return &ErrBadCommand{Code: CodeBadJSON, Err: err, Stream: named.Stream}
}

func checkStreamName(s string) error {
	if s == "" {
		return badCommand(CodeBadRequest, "the stream name is missing")
	}
	if len(s) > MaxStreamName {
		return badCommand(CodeBadRequest, "the stream name is longer than %d bytes", MaxStreamName)
	}
	return nil
}

// ValidDurableName reports whether s can name a durable stream: 1 to 100 of
// the characters A-Z a-z 0-9 . _ - (it appears in URLs and metrics).
func ValidDurableName(s string) bool {
	if s == "" || len(s) > MaxStreamName {
		return false
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			return false
		}
	}
	return true
}

// Frame is a frame from the server. Which fields are set depends on Type:
//
//	subscribed:   Stream, Durable, Mode, Cursor, BatchSize, BatchTimeout, Filter, Tip
//	unsubscribed: Stream
//	batch:        Stream, Batch, Records, Cursor, Tip, Redelivered
//	error:        Code, Message, Stream (when it concerns one)
//	heartbeat:    Tip
//	pong:         Tip
type Frame struct {
	Type   string `json:"type"`
	Stream string `json:"stream,omitempty"`
	// Batch is the batch number: increasing per stream, never reused for
	// another delivery (a redelivery gets a new number).
	Batch   int64           `json:"batch,omitempty"`
	Records []record.Record `json:"records,omitempty"`
	// Cursor is, in a batch, the position after its records: subscribing
	// from it continues right after them. In subscribed, the position the
	// stream starts from.
	Cursor string `json:"cursor,omitempty"`
	Tip    *Tip   `json:"tip,omitempty"`
	// Redelivered marks a batch whose records were delivered before without
	// an acknowledgement.
	Redelivered  bool     `json:"redelivered,omitempty"`
	Durable      bool     `json:"durable,omitempty"`
	Mode         Mode     `json:"mode,omitempty"`
	BatchSize    int      `json:"batchSize,omitempty"`
	BatchTimeout Duration `json:"batchTimeout,omitempty"`
	Filter       *Filter  `json:"filter,omitempty"`
	Code         string   `json:"code,omitempty"`
	Message      string   `json:"message,omitempty"`
}

// Tip says where the server stands: the node's chain tip and the newest
// committed seq of the history log.
type Tip struct {
	Slot    uint64       `json:"slot"`
	BlockNo uint64       `json:"blockNo"`
	Hash    chain.Hash32 `json:"hash,omitzero"`
	// Seq is the history log's newest committed seq.
	Seq int64 `json:"seq"`
}

// MakeTip combines the node's tip and the log's head.
func MakeTip(t chain.Tip, head int64) Tip {
	return Tip{Slot: t.Point.Slot, BlockNo: t.BlockNo, Hash: t.Point.Hash, Seq: head}
}

// Duration is a length of time on the wire: a JSON number of milliseconds,
// or a string in Go's duration syntax ("250ms", "2s") when read.
type Duration time.Duration

// MarshalJSON writes whole milliseconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return strconv.AppendInt(nil, time.Duration(d).Milliseconds(), 10), nil
}

// UnmarshalJSON reads milliseconds or a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var ms int64
	if err := json.Unmarshal(b, &ms); err != nil {
		return fmt.Errorf("duration: want milliseconds or a string like \"250ms\": %w", err)
	}
	if ms > int64(time.Duration(1<<62)/time.Millisecond) || ms < -int64(time.Duration(1<<62)/time.Millisecond) {
		return errors.New("duration out of range")
	}
	*d = Duration(time.Duration(ms) * time.Millisecond)
	return nil
}

// ParseFrom reads a starting point: "origin" (or empty), "tip", or a cursor
// ("SEQ", or "SNAPSHOT:SEQ" as given in batch frames).
func ParseFrom(s string) (record.From, error) { return ParseFromIn("from", s) }

// ParseFromIn is ParseFrom for a start point given in another place than
// a from (the Last-Event-ID header), which its error names.
func ParseFromIn(name, s string) (record.From, error) {
	switch strings.TrimSpace(s) {
	case "", "origin":
		return record.From{Kind: record.FromOrigin}, nil
	case "tip":
		return record.From{Kind: record.FromTip}, nil
	}
	c, err := record.ParseCursor(strings.TrimSpace(s))
	if err != nil {
		return record.From{}, fmt.Errorf("%s %q: want origin, tip or a cursor (SEQ or SNAPSHOT:SEQ): %w", name, clip(s), err)
	}
	return record.From{Kind: record.FromCursor, Cursor: c}, nil
}
