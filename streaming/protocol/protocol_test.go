package protocol_test

import (
	"encoding/json"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/marlowe-follower/follower/history/record"
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
	for in, want := range map[string]record.From{
		"":       {Kind: record.FromOrigin},
		"origin": {Kind: record.FromOrigin},
		"tip":    {Kind: record.FromTip},
		"42":     {Kind: record.FromCursor, Cursor: record.Cursor{Seq: 42}},
		"50:7":   {Kind: record.FromCursor, Cursor: record.Cursor{Snapshot: 50, Seq: 7}},
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
		string(h.PartyRole[0].Name) != "buyer" || string(h.PartyRole[1].Name) != "\xff\x00" || h.Kinds[0] != record.KindRolledBack {
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
	f.Add([]byte(`{"type":"subscribe","stream":"s","filter":{"partyRole":["ab.c.d"],"contractId":["x"],"tags":["t"]}}`))
	f.Add([]byte(`{"type":"ack","stream":"s","batch":3,"upToSeq":7}`))
	f.Add([]byte(`{"type":"ack","stream":"f","batch":12}`))
	f.Add([]byte(` { "batch" : 0012 , "type":"ack","stream":"f"}`))
	f.Add([]byte(`{"type":"ack","stream":"f","batch":1,"batch":2}`))
	f.Add([]byte(`{"type":"ack","Stream":"f","batch":1e3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if plain, ok := protocol.ScanAck(data); ok {
			// The cheap path reads what encoding/json reads.
			var want protocol.Command
			if err := json.Unmarshal(data, &want); err != nil || !reflect.DeepEqual(plain, want) {
				t.Fatalf("scanAck read %s as %+v, encoding/json as %+v (%v)", data, plain, want, err)
			}
		}
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

// TestFilterJSON: the filter object is written with the vocabulary's names
// and read with them or their older aliases; a name in both spellings and
// an unknown name are bad_filter.
func TestFilterJSON(t *testing.T) {
	cur := "0123456789abcdef0123456789abcdef0123456789abcdef01234567"
	id := "ab00000000000000000000000000000000000000000000000000000000000000#2"
	f := protocol.Filter{Contracts: []string{id}, RolesCurrencies: []string{cur, ""}, Tags: []string{"t"},
		PartyAddresses: []string{"addr_test1wqmhxfddsjj4hgpg9kzymledtu833sel6j3g5z5aw0r0vrg03kpfs"},
		PartyRoles:     []protocol.Role{{Currency: cur, Name: "buy.er"}}, Kinds: []string{"rolled_back"}}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"contractId":["` + id + `"],"roleCurrency":["` + cur + `",""],"tag":["t"],` +
		`"partyAddress":["addr_test1wqmhxfddsjj4hgpg9kzymledtu833sel6j3g5z5aw0r0vrg03kpfs"],"partyRole":["` + cur + `.buy.er"],"kind":["rolled_back"]}`
	if string(b) != want {
		t.Fatalf("%s\nwant %s", b, want)
	}
	if _, err := f.History(); err != nil {
		t.Fatal(err)
	}
	alias := `{"contracts":["` + id + `"],"rolesCurrencies":["` + cur + `",""],"tags":["t"],` +
		`"partyAddresses":["addr_test1wqmhxfddsjj4hgpg9kzymledtu833sel6j3g5z5aw0r0vrg03kpfs"],"partyRoles":[{"currency":"` + cur + `","name":"buy.er"}],"kinds":["rolled_back"]}`
	for _, in := range []string{want, alias} {
		var back protocol.Filter
		if err := json.Unmarshal([]byte(in), &back); err != nil || !back.Equal(&f) || !reflect.DeepEqual(back, f) {
			t.Fatalf("%s: %+v %v", in, back, err)
		}
		c, err := protocol.DecodeCommand([]byte(`{"type":"subscribe","stream":"s","filter":` + in + `}`))
		if err != nil || !c.Filter.Equal(&f) {
			t.Fatalf("subscribe with %s: %+v %v", in, c, err)
		}
	}
	var all protocol.Filter
	if err := json.Unmarshal([]byte(`{"all":true}`), &all); err != nil || !all.All {
		t.Fatalf("%+v %v", all, err)
	}
	for _, bad := range []string{
		`{"contract":["` + id + `"]}`,
		`{"rolesCurrency":["` + cur + `"]}`,
		`{"contractId":["` + id + `"],"contracts":["` + id + `"]}`,
		`{"roleCurrency":[],"rolesCurrencies":[]}`,
		`{"tag":["a"],"tags":["a"]}`,
		`{"partyAddress":[],"partyAddresses":[]}`,
		`{"partyRole":[],"partyRoles":[]}`,
		`{"kind":[],"kinds":[]}`,
		`{"partyRole":["nodot"]}`,
		`{"partyRoles":[{"currency":"` + cur + `","name":"a","x":1}]}`,
		`{"tag":"a"}`,
		`{"all":1}`,
		`"all"`,
	} {
		_, err := protocol.DecodeCommand([]byte(`{"type":"subscribe","stream":"s","filter":` + bad + `}`))
		var bc *protocol.ErrBadCommand
		if !errors.As(err, &bc) || bc.Code != protocol.CodeBadFilter {
			t.Errorf("%s: %v, want bad_filter", bad, err)
		}
	}
	// Values are read as the query API reads them.
	for _, bad := range []protocol.Filter{{PartyAddresses: []string{"addr_test1nope"}}, {Tags: []string{string([]byte{0xff})}},
		{PartyRoles: []protocol.Role{{Currency: cur, Name: strings.Repeat("n", 33)}}}, {RolesCurrencies: []string{cur[:10]}},
		{Contracts: []string{"ab#1"}}} {
		if _, err := bad.History(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestFilterQueryNames: the query string names and the aliases contract
// and rolesCurrency; both spellings of one name are refused.
func TestFilterQueryNames(t *testing.T) {
	cur := "0123456789abcdef0123456789abcdef0123456789abcdef01234567"
	if got := strings.Join(protocol.QueryNames(), ","); got != "all,contract,contractId,kind,partyAddress,partyRole,roleCurrency,rolesCurrency,tag" {
		t.Fatal(got)
	}
	a, err := protocol.FilterFromQuery(url.Values{"contract": {"x"}, "rolesCurrency": {cur}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := protocol.FilterFromQuery(url.Values{"contractId": {"x"}, "roleCurrency": {cur}})
	if err != nil || !a.Equal(&b) || len(a.Contracts) != 1 || len(a.RolesCurrencies) != 1 {
		t.Fatalf("%+v %+v %v", a, b, err)
	}
	if q := a.Query(); q.Get("contractId") != "x" || q.Get("roleCurrency") != cur || len(q) != 2 {
		t.Fatalf("%v", q)
	}
	for _, bad := range []url.Values{{"contract": {"x"}, "contractId": {"y"}}, {"rolesCurrency": {cur}, "roleCurrency": {cur}},
		{"all": {"true", "true"}}, {"all": {"maybe"}}} {
		_, err := protocol.FilterFromQuery(bad)
		var fe *protocol.FilterError
		if !errors.As(err, &fe) {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

// TestScanAck: the plain acks clients write take the cheap path, read as
// encoding/json reads them; any other form is left to encoding/json.
func TestScanAck(t *testing.T) {
	for _, tc := range []struct {
		in    string
		plain bool
	}{
		{`{"type":"ack","stream":"f","batch":12}`, true},
		{`{"type":"ack","stream":"f","batch":12,"upToSeq":40}`, true},
		{" {\n\"batch\" : 7 ,\t\"stream\":\"a b\", \"type\":\"ack\" } ", true},
		{`{"type":"ack","stream":"f","batch":012}`, false},     // not JSON
		{`{"type":"ack","stream":"f","batch":-1}`, false},      // a sign
		{`{"type":"ack","stream":"f","batch":1.5}`, false},     // not an integer
		{`{"type":"ack","stream":"f","batch":1e3}`, false},     // an exponent
		{`{"type":"ack","stream":"f\u00e9","batch":1}`, false}, // an escape
		{`{"type":"ack","stream":"f","batch":1,"batch":2}`, false},
		{`{"Type":"ack","stream":"f","batch":1}`, false}, // encoding/json matches names without case
		{`{"type":"nack","stream":"f","batch":1}`, false},
		{`{"stream":"f","batch":1}`, false},
		{`{"type":"ack","stream":"f","batch":1234567890123456789}`, false},
		{`{"type":"ack","stream":"f","batch":1} x`, false},
		{`{"type":"ack","stream":"f","batch":1,}`, false},
		{`{}`, false},
	} {
		got, ok := protocol.ScanAck([]byte(tc.in))
		if ok != tc.plain {
			t.Errorf("%s: plain %v, want %v", tc.in, ok, tc.plain)
			continue
		}
		if !ok {
			continue
		}
		var want protocol.Command
		if err := json.Unmarshal([]byte(tc.in), &want); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, encoding/json %+v (%v)", tc.in, got, want, err)
		}
	}
}
