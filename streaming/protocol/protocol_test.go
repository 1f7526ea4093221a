package protocol_test

import (
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/history"
	"github.com/marlowe-follower/follower/streaming/protocol"
)

func TestDecodeCommand(t *testing.T) {
	c, err := protocol.DecodeCommand([]byte(`{"type":"subscribe","stream":"s","filter":{"all":true},"from":"12:3",
		"batchSize":10,"batchTimeout":"250ms","mode":"broadcast"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.BatchTimeout != protocol.Duration(250*time.Millisecond) || c.Mode != protocol.ModeBroadcast || c.From != "12:3" {
		t.Fatalf("%+v", c)
	}
	c, err = protocol.DecodeCommand([]byte(`{"type":"subscribe","stream":"s","filter":{"all":true},"batchTimeout":40}`))
	if err != nil || c.BatchTimeout != protocol.Duration(40*time.Millisecond) {
		t.Fatalf("%+v %v", c, err)
	}
	for frame, code := range map[string]string{
		`{"type":"ack","stream":"s"}`:                                                   protocol.CodeBadRequest,
		`{"type":"ack","stream":"s","batch":1} {}`:                                      protocol.CodeBadJSON,
		`{"type":"subscribe","stream":"","filter":{"all":true}}`:                        protocol.CodeBadRequest,
		`{"type":"subscribe","stream":"s","filter":{"all":true},"batchTimeout":"soon"}`: protocol.CodeBadJSON,
	} {
		_, err := protocol.DecodeCommand([]byte(frame))
		var bc *protocol.ErrBadCommand
		if !errors.As(err, &bc) || bc.Code != code {
			t.Errorf("%s: %v, want %s", frame, err, code)
		}
	}
}

func TestParseFrom(t *testing.T) {
	for in, want := range map[string]history.From{
		"":       {Kind: history.FromOrigin},
		"origin": {Kind: history.FromOrigin},
		"tip":    {Kind: history.FromTip},
		"42":     {Kind: history.FromCursor, Cursor: history.Cursor{Seq: 42}},
		"50:7":   {Kind: history.FromCursor, Cursor: history.Cursor{Snapshot: 50, Seq: 7}},
	} {
		got, err := protocol.ParseFrom(in)
		if err != nil || got != want {
			t.Errorf("%q: %+v %v", in, got, err)
		}
	}
	for _, bad := range []string{"yesterday", "-1", "5:7", "0:0"} {
		if _, err := protocol.ParseFrom(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestFilter(t *testing.T) {
	cur := "0123456789abcdef0123456789abcdef0123456789abcdef01234567"
	f := protocol.Filter{
		Contracts:       []string{"ab00000000000000000000000000000000000000000000000000000000000000#2"},
		RolesCurrencies: []string{cur},
		PartyRoles:      []protocol.Role{{Currency: cur, Name: "buyer"}, {Currency: cur, Name: "\u00000xff00"}},
		Kinds:           []string{"rolled_back"},
	}
	h, err := f.History()
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Contracts) != 1 || h.Contracts[0].Index != 2 || len(h.RolesCurrency[0]) != 28 ||
		string(h.PartyRole[0].Name) != "buyer" || string(h.PartyRole[1].Name) != "\xff\x00" || h.Kinds[0] != history.KindRolledBack {
		t.Fatalf("%+v", h)
	}
	back, err := protocol.FilterFromQuery(f.Query())
	if err != nil || !back.Equal(&f) {
		t.Fatalf("query round trip: %+v %v", back, err)
	}
	g := f
	g.Kinds = []string{"rolled_back", "rolled_back"}
	if !g.Equal(&f) {
		t.Fatal("duplicates make filters differ")
	}
	for _, bad := range []protocol.Filter{{}, {All: true, Tags: []string{"a"}}, {Kinds: []string{"x"}},
		{RolesCurrencies: []string{"00"}}, {Tags: []string{""}}} {
		if _, err := bad.History(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if _, err := protocol.FilterFromQuery(url.Values{"partyRole": {"nodot"}}); err == nil {
		t.Error("partyRole without a dot accepted")
	}
}

func TestFrameJSON(t *testing.T) {
	f := protocol.Frame{Type: protocol.TypeError, Code: protocol.CodeBadJSON, Message: "m"}
	b, _ := json.Marshal(f)
	if string(b) != `{"type":"error","code":"bad_json","message":"m"}` {
		t.Fatal(string(b))
	}
	var back protocol.Frame
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, f) {
		t.Fatalf("%+v %v", back, err)
	}
}

// FuzzDecodeCommand: any frame decodes or is refused with a code, and an
// accepted command survives a round trip.
func FuzzDecodeCommand(f *testing.F) {
	f.Add([]byte(`{"type":"subscribe","stream":"s","filter":{"all":true},"batchTimeout":"1s"}`))
	f.Add([]byte(`{"type":"nack","stream":"s","batch":3,"reason":"r"}`))
	f.Add([]byte(`{"type":"ping"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := protocol.DecodeCommand(data)
		if err != nil {
			var bc *protocol.ErrBadCommand
			if !errors.As(err, &bc) || bc.Code == "" {
				t.Fatalf("error without a code: %v", err)
			}
			return
		}
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := protocol.DecodeCommand(b)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", b, err)
		}
		b2, _ := json.Marshal(c2)
		if string(b) != string(b2) {
			t.Fatalf("%s != %s", b, b2)
		}
		if c.Filter != nil {
			_, _ = c.Filter.History()
		}
	})
}
