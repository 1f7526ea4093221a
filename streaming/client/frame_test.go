package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/marlowe-follower/follower/streaming/protocol"
)

const (
	hashA = "9c1e0f6a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6"
	hashB = "77aa0f6a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6"
)

// frames are server frames as the server writes them and in shapes it
// does not (whitespace, escapes, nulls, unknown fields, another order).
var frames = []string{
	`{"type":"subscribed","stream":"all","cursor":"1207:0","mode":"ack","batchSize":2,"filter":{"all":true},"tip":{"slot":412345,"blockNo":20611,"hash":"` + hashA + `","seq":1207}}`,
	`{"type":"batch","stream":"all","batch":1,"records":[{"seq":1,"kind":"contract_created","block":{"slot":412301,"blockNo":20609,"hash":"` + hashA + `"},"txId":"` + hashB + `","txIndex":3,"contractId":"` + hashB + `#1","payload":{"contract":"close","roles":null,"tags":{"a":1.5e3},"s":"\u00e9\"\\"}}],"cursor":"1207:2","tip":{"slot":412345,"blockNo":20611,"hash":"` + hashA + `","seq":1207}}`,
	`{"type":"batch","stream":"s","batch":9,"redelivered":true,"records":[{"seq":5,"kind":"rolled_back","block":{"slot":1,"blockNo":2,"hash":"` + hashA + `"},"payload":{"to":{"slot":1,"hash":"` + hashA + `"}}},{"seq":6,"kind":"inputs_applied","block":{"slot":3,"blockNo":4,"hash":"` + hashA + `"},"txId":"` + hashB + `","txIndex":0,"contractId":"` + hashB + `#0","payload":[],"rolledBackBy":5}],"cursor":"6","tip":{"slot":3,"blockNo":4,"seq":6}}`,
	` { "records" : [ { "payload" : null , "seq" : 7 , "kind" : "payout_withdrawn" , "extra" : [ 1 , { } , "x" ] } ] , "type" : "batch" , "batch" : 2 , "stream" : "a\nb\u0000" , "new" : {"deep":[[[]]]} } `,
	`{"type":"error","code":"bad_filter","message":"the filter \"x\" is unknown: caf\u00e9","stream":"a"}`,
	`{"type":"heartbeat","tip":{"slot":0,"blockNo":0,"seq":0}}`,
	`{"type":"pong","tip":null,"stream":null,"records":null,"batch":null}`,
	`{"type":"batch","stream":"é","batch":3,"records":[],"cursor":"3:2","tip":{"seq":9,"extra":true}}`,
	`{"type":"batch","stream":"x","batch":4,"records":[{"seq":1,"kind":"apply_inputs_rejected","block":{"slot":1,"blockNo":1,"hash":"` + hashA + `","other":1},"contractId":null,"rolledBackBy":null,"payload":"\ud83d\ude00"}],"tip":{"seq":1}}`,
	`{"type":"unsubscribed","stream":"x"}`,
	`{}`,
}

// TestDecodeFrameMatchesEncodingJSON: the fields the client reads come out
// as encoding/json decodes protocol.Frame, and each record's raw bytes are
// the record as it is in the frame.
func TestDecodeFrameMatchesEncodingJSON(t *testing.T) {
	for _, text := range frames {
		compareWithEncodingJSON(t, []byte(text))
	}
}

// compareWithEncodingJSON checks decodeFrame against encoding/json on a
// frame encoding/json decodes.
func compareWithEncodingJSON(t *testing.T, data []byte) {
	t.Helper()
	var want protocol.Frame
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("encoding/json: %v\n%s", err, data)
	}
	got, err := decodeFrame(data, 0)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	var wantTip protocol.Tip
	if want.Tip != nil {
		wantTip = *want.Tip
	}
	if got.typ != want.Type || string(got.stream) != want.Stream || got.batch != want.Batch || got.cursor != want.Cursor ||
		got.redelivered != want.Redelivered || got.code != want.Code || got.message != want.Message ||
		got.hasTip != (want.Tip != nil) || got.tip != wantTip {
		t.Fatalf("header fields differ from encoding/json's\n got %+v\nwant %+v\n%s", got, want, data)
	}
	if len(got.records) != len(want.Records) || len(got.raw) != len(got.records) {
		t.Fatalf("%d records (%d raw), encoding/json %d\n%s", len(got.records), len(got.raw), len(want.Records), data)
	}
	if len(got.records) > 0 && !reflect.DeepEqual(got.records, want.Records) {
		t.Fatalf("records differ\n got %+v\nwant %+v\n%s", got.records, want.Records, data)
	}
	for i, raw := range got.raw {
		if !json.Valid(raw) || !bytes.Contains(data, raw) || raw[0] != '{' || raw[len(raw)-1] != '}' {
			t.Fatalf("raw record %d is not the record's bytes: %q", i, raw)
		}
		// An append to a record or its payload cannot write over the
		// frame's next bytes (the next record's).
		if p := got.records[i].Payload; cap(raw) != len(raw) || cap(p) != len(p) {
			t.Fatalf("raw record %d: capacity %d for %d bytes, its payload %d for %d", i, cap(raw), len(raw), cap(p), len(p))
		}
	}
}

// TestDecodeFrameErrors: a frame that is not JSON, or whose fields have
// the wrong type, gets an error that says what and where; none panics.
func TestDecodeFrameErrors(t *testing.T) {
	deep := strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)
	for _, c := range []struct{ frame, want string }{
		{``, "want an object, got the end of the frame at byte 0"},
		{`[]`, "want an object, got an array at byte 0"},
		{`{"type":"batch"`, "want ',' or '}' in an object, got the end of the frame at byte 15"},
		{`{"type":"batch"} x`, "data after the frame at byte 17"},
		{`{"type":batch}`, `type: want a string, got 'b' at byte 8`},
		{`{"batch":"1"}`, "batch: want an integer, got a string at byte 9"},
		{`{"batch":1.5}`, "batch: want an integer of 64 bits, got 1.5 at byte 9"},
		{`{"batch":99999999999999999999}`, "batch: want an integer of 64 bits, got 99999999999999999999"},
		{`{"batch":01}`, "want ',' or '}' in an object, got a number at byte 10"},
		{`{"batch":-}`, "batch: invalid number at byte 10"},
		{`{"type":"a` + "\x01" + `"}`, "type: control character 0x1 in a string at byte 10"},
		{`{"type":"\x"}`, `type: invalid escape \x at byte 9`},
		{`{"type":"\u12"}`, `type: invalid \u escape at byte 9`},
		{`{"type":"abc`, "type: unterminated string at byte 12"},
		{`{"tip":{"seq":"x"}}`, "tip: seq: want an integer, got a string at byte 14"},
		{`{"tip":{"slot":-1}}`, "tip: slot: want an unsigned integer, got a number at byte 15"},
		{`{"tip":{"hash":"abc"}}`, `tip: hash: hash "abc": want 64 hex digits, got 3`},
		{`{"records":{}}`, "records: want an array, got an object at byte 11"},
		{`{"records":[1]}`, "records: [0]: want an object, got a number at byte 12"},
		{`{"records":[{"seq":1},{"seq":true}]}`, "records: [1]: seq: want an integer, got a boolean at byte 29"},
		{`{"records":[{"payload":{"a":tru}}]}`, "records: [0]: payload: invalid literal at byte 28"},
		{`{"records":[{"payload":{"a" 1}}]}`, "records: [0]: payload: want ':' after a key at byte 28"},
		{`{"records":[{"payload":[1,]}]}`, "records: [0]: payload: invalid character ']' looking for a value at byte 26"},
		{`{"records":[{"contractId":"` + hashA + `#x"}]}`, `records: [0]: contractId: output reference`},
		{`{"records":[{"block":{"blockNo":"1"}}]}`, "records: [0]: block: blockNo: want an unsigned integer, got a string"},
		{`{"records":[{"payload":` + deep + `}]}`, "records: [0]: payload: nested deeper than 10000"},
		{`{"x":nul}`, "invalid literal at byte 5"},
	} {
		_, err := decodeFrame([]byte(c.frame), 0)
		var fe *FrameError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.60q: got %v, want an error with %q", c.frame, err, c.want)
		}
	}
}

// errorFrames are frames the decoder refuses (hostile or broken ones).
var errorFrames = []string{
	``, `{`, `{"type":"batch","records":[{"seq":1,"payload":{"a":[1,2`, // truncated
	`{"records":[{"payload":` + strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1) + `}]}`,
	`{"batch":99999999999999999999}`, `{"records":[{"seq":1e400}]}`, `{"tip":{"slot":18446744073709551616}}`,
	`{"records":"x"}`, `{"records":[{"block":[]}]}`, `{"type":1}`, `{"redelivered":"yes"}`,
}

// TestDecoderReuse: a connection's decoder reads each frame as a fresh one
// does, whatever came before it (a refused frame, a deep payload, a batch
// of another size): nothing of a frame stays in the decoder but the size
// hint.
func TestDecoderReuse(t *testing.T) {
	var d decoder
	var f frame
	all := append(append([]string{}, errorFrames...), frames...)
	for round := range 2 {
		for i, text := range all {
			if round == 1 {
				text = all[len(all)-1-i]
			}
			want, wantErr := decodeFrame([]byte(text), d.hint)
			if wantErr == nil && slices.Contains(errorFrames, text) {
				t.Fatalf("%.60q: decoded, want an error", text)
			}
			err := d.decode([]byte(text), &f)
			if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
				t.Fatalf("%.60q: reused decoder %v, fresh %v", text, err, wantErr)
			}
			if err == nil && !reflect.DeepEqual(f, *want) {
				t.Fatalf("%.60q: reused decoder\n got %+v\nwant %+v", text, f, *want)
			}
			if err != nil {
				var fe *FrameError
				if !errors.As(err, &fe) {
					t.Fatalf("%.60q: %v is not a FrameError", text, err)
				}
			}
		}
	}
}

// FuzzDecodeFrame: the decoder never panics; it accepts only JSON; on
// JSON it fails only for a field of the wrong type, never for a syntax it
// should take; and what encoding/json decodes of a frame, once written
// back as encoding/json writes it, the decoder reads the same.
func FuzzDecodeFrame(f *testing.F) {
	for _, text := range frames {
		f.Add([]byte(text))
	}
	for _, text := range errorFrames {
		f.Add([]byte(text))
	}
	// A decoder that read a frame before, as a connection's has.
	var d decoder
	if err := d.decode([]byte(frames[2]), &frame{}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeFrame(data, 0)
		var again frame
		if err2 := d.decode(data, &again); (err2 == nil) != (err == nil) || err == nil && !reflect.DeepEqual(again, *got) {
			t.Fatalf("a decoder that read frames before: %v (fresh: %v): %q", err2, err, data)
		}
		valid := json.Valid(data)
		if err == nil && !valid {
			t.Fatalf("decoded a frame that is not JSON: %q", data)
		}
		var se *syntaxError
		if err != nil && valid && errors.As(err, &se) && !se.mismatch {
			t.Fatalf("a syntax error on JSON: %v: %q", err, data)
		}
		if err == nil {
			for _, raw := range got.raw {
				if !json.Valid(raw) {
					t.Fatalf("raw record not JSON: %q", raw)
				}
			}
		}
		var fr protocol.Frame
		if json.Unmarshal(data, &fr) != nil {
			return
		}
		canonical, err := json.Marshal(&fr)
		if err != nil {
			return // a record kind or payload encoding/json takes in but does not write out
		}
		compareWithEncodingJSON(t, canonical)
	})
}

// TestSkipWellFormed: the one-loop skip takes exactly the values the
// checking loop takes (but those nested deeper than it keeps count of),
// and ends them at the same byte. The values: the corpus's records, and
// each of them and of some short ones with every byte in turn replaced by
// each of the bytes that matter to the grammar (so a quote, a backslash or
// a control character falls at every place of the eight-byte words).
func TestSkipWellFormed(t *testing.T) {
	values := []string{`"abc"`, `"a\"b\\c\/\b\f\n\r\t\u00e9"`, `"0123456789abcdef0123456789"`, `-0.5e+10`, `[1,-2,3.25,4E5]`,
		`{"a":{"b":[true,false,null]},"c":""}`, ` { "k" : [ ] , "l" : { } } `, `"` + "\xe9\xff" + `"`,
		strings.Repeat("[", 64) + "1" + strings.Repeat("]", 64), strings.Repeat(`{"a":`, 63) + "1" + strings.Repeat("}", 63)}
	for _, r := range corpusRecords(t) {
		values = append(values, string(r))
	}
	check := func(v []byte) {
		t.Helper()
		var s scanner
		s.b = v
		s.ws()
		start := s.i
		errChecked := s.skipValue()
		end, ok := skipWellFormed(v, start)
		switch {
		case ok && (errChecked != nil || end != s.i):
			t.Fatalf("%q: skipWellFormed took it to %d, skipValue: %d, %v", v, end, s.i, errChecked)
		case !ok && errChecked == nil:
			t.Fatalf("%q: skipValue took it to %d, skipWellFormed did not", v, s.i)
		}
	}
	for _, v := range values {
		check([]byte(v))
		b := []byte(v)
		for i := range b {
			was := b[i]
			for _, c := range []byte{'"', '\\', 0x01, 0x1f, ' ', 0x7f, 0x80, 0xff, 'u', '{', '}', '[', ']', ',', ':', '0', '-', '.', 'e', 'n'} {
				b[i] = c
				check(b)
			}
			b[i] = was
			check(b[:i]) // cut short
		}
	}
	// Deeper than 64: the checking loop's, for the one-loop skip.
	deep := []byte(strings.Repeat("[", 65) + "1" + strings.Repeat("]", 65))
	if _, ok := skipWellFormed(deep, 0); ok {
		t.Fatal("skipWellFormed took a value nested 65 deep")
	}
	if got, err := (&scanner{b: deep}).skip(); err != nil || len(got) != len(deep) {
		t.Fatalf("skip of a value nested 65 deep: %d bytes, %v", len(got), err)
	}
}
