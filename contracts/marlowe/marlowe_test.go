package marlowe

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"testing"

	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
)

func TestPathErrorNamesTheLocation(t *testing.T) {
	// When [Case (Deposit role role ada (Value constructor 14)) Close] 0 Close
	role := c(1, b([]byte("r")))
	ada := c(0, b(nil), b(nil))
	bad := c(3, pd.NewList(c(0, c(0, role, role, ada, c(14)), c(0))), pd.NewInt(0), c(0))
	_, err := ContractFromData(bad)
	if err == nil {
		t.Fatal("expected an error")
	}
	if got, want := "contract"+"."+err.Error(), "contract.when[0].case.deposits: unknown Value constructor 14"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if !errors.Is(err, ErrShape) {
		t.Fatal("error does not match ErrShape")
	}
	var pe *PathError
	if !errors.As(err, &pe) || pe.Path() != "when[0].case.deposits" {
		t.Fatalf("path %v", pe)
	}

	md := c(0, c(0, b(nil)), c(0, pd.NewMap(), pd.NewMap(), pd.NewMap(), pd.NewInt(0)), bad)
	_, err = MarloweDataFromData(md)
	if err == nil || err.Error() != "marloweContract.when[0].case.deposits: unknown Value constructor 14" {
		t.Fatalf("got %v", err)
	}

	_, err = ParseContractJSON([]byte(`{"when":[{"case":{"deposits":{"bogus":1},"into_account":{"role_token":"r"},"party":{"role_token":"r"},"of_token":{"currency_symbol":"","token_name":""}},"then":"close"}],"timeout":0,"timeout_continuation":"close"}`))
	if err == nil || err.Error() != "when[0].case.deposits: Value: no constructor has the keys {bogus}" {
		t.Fatalf("got %v", err)
	}
}

func TestFromDataRejectsWrongShapes(t *testing.T) {
	cases := []struct {
		name string
		d    pd.Data
		want string
	}{
		{"integer as contract", pd.NewInt(1), "Contract: expected a constructor, found an integer"},
		{"close with a field", c(0, pd.NewInt(1)), "Contract constructor 0 takes 0 fields, found 1"},
		{"unknown contract", c(6), "unknown Contract constructor 6"},
		{"when cases not a list", c(3, pd.NewMap(), pd.NewInt(0), c(0)), "when: cases: expected a list, found a map"},
		{"timeout not an integer", c(3, pd.NewList(), b(nil), c(0)), "timeout: timeout: expected an integer, found a byte string"},
		{"bad network", c(1, c(0, c(2), c(0, c(0, b(make([]byte, 28))), c(1))), c(0, c(1, b(nil))), c(0, b(nil), b(nil)), c(1, pd.NewInt(1)), c(0)), "from_account.address.network: unknown Network constructor 2"},
		{"bad staking", c(1, c(0, c(0), c(0, c(0, b(make([]byte, 28))), c(0, c(2)))), c(0, c(1, b(nil))), c(0, b(nil), b(nil)), c(1, pd.NewInt(1)), c(0)), "from_account.address.staking: unknown StakingCredential constructor 2"},
	}
	for _, tc := range cases {
		_, err := ContractFromData(tc.d)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := RedeemerFromData(pd.NewList(c(0, c(2)), c(1, c(2)))); err == nil || err.Error() != "[1]: MarloweTxInput constructor 1 takes 2 fields, found 1" {
		t.Errorf("redeemer: %v", err)
	}
	if _, err := PayoutDatumFromData(c(0, b(nil), pd.NewInt(3))); err == nil || err.Error() != "role: role name: expected a byte string, found an integer" {
		t.Errorf("payout: %v", err)
	}
}

func TestNameEscape(t *testing.T) {
	cases := []struct {
		name []byte
		text string
	}{
		{[]byte("Buyer"), "Buyer"},
		{[]byte(""), ""},
		{[]byte("ação ✓"), "ação ✓"},
		{[]byte{0xff, 0x00, 0x41}, "\x000xff0041"},
		{[]byte("\x00abc"), "\x00\x00\x00abc"},
		{[]byte("\x000xab"), "\x00\x00\x000xab"},
		{[]byte{0xc3}, "\x000xc3"},
	}
	for _, tc := range cases {
		if got := NameText(tc.name); got != tc.text {
			t.Errorf("NameText(%x) = %q, want %q", tc.name, got, tc.text)
		}
		back, err := NameFromText(tc.text)
		if err != nil || !bytes.Equal(back, tc.name) {
			t.Errorf("NameFromText(%q) = %x, %v; want %x", tc.text, back, err, tc.name)
		}
	}
	for _, bad := range []string{"\x00", "\x00x", "\x000xzz", "\x00\x00"} {
		if _, err := NameFromText(bad); err == nil {
			t.Errorf("NameFromText(%q) should fail", bad)
		}
	}
	// Through JSON: a role name that is not UTF-8 survives both codecs.
	p := Party{Role: []byte{0xde, 0xad, 0xbe, 0xef}}
	js, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if string(js) != `{"role_token":"\u00000xdeadbeef"}` {
		t.Fatalf("got %s", js)
	}
	var back Party
	if err := back.UnmarshalJSON(js); err != nil || !bytes.Equal(back.Role, p.Role) {
		t.Fatalf("got %x %v", back.Role, err)
	}
}

func mustHexT(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestScriptAddresses checks the bech32 forms against the example addresses
// of shared/design/MARLOWE.md (v5 semantics and payout validators).
func TestScriptAddresses(t *testing.T) {
	cases := []struct {
		hash    string
		network Network
		text    string
	}{
		{"377325ad84a55ba0282d844dff2d5f0f18c33fd4a28a0a9d73c6f60d", Mainnet, "addr1wymhxfddsjj4hgpg9kzymledtu833sel6j3g5z5aw0r0vrg5ezax4"},
		{"377325ad84a55ba0282d844dff2d5f0f18c33fd4a28a0a9d73c6f60d", Testnet, "addr_test1wqmhxfddsjj4hgpg9kzymledtu833sel6j3g5z5aw0r0vrg03kpfs"},
		{"fcb8885eb5e4f9a5cfca3c75e8c7280e482af32dcdf2d13e47d05d27", Mainnet, "addr1w87t3zz7khj0nfw0eg78t6x89q8ys2hn9hxl95f7glg96fcltkxqz"},
		{"fcb8885eb5e4f9a5cfca3c75e8c7280e482af32dcdf2d13e47d05d27", Testnet, "addr_test1wr7t3zz7khj0nfw0eg78t6x89q8ys2hn9hxl95f7glg96fcyrz608"},
	}
	for _, tc := range cases {
		pa := &PartyAddress{Network: tc.network, Address: Address{Payment: Credential{Kind: ScriptCredential, Hash: mustHexT(t, tc.hash)}}}
		got, err := pa.Bech32()
		if err != nil || got != tc.text {
			t.Errorf("Bech32 = %q, %v; want %q", got, err, tc.text)
		}
		back, err := ParsePartyAddress(tc.text)
		if err != nil || !reflect.DeepEqual(back, pa) {
			t.Errorf("ParsePartyAddress(%q) = %+v, %v", tc.text, back, err)
		}
	}
}

func TestAddressForms(t *testing.T) {
	h1 := bytes.Repeat([]byte{1}, 28)
	h2 := bytes.Repeat([]byte{2}, 28)
	forms := []PartyAddress{
		{Mainnet, Address{Payment: Credential{PubKeyCredential, h1}}},
		{Testnet, Address{Payment: Credential{PubKeyCredential, h1}, Staking: &StakingCredential{Hash: Credential{PubKeyCredential, h2}}}},
		{Mainnet, Address{Payment: Credential{ScriptCredential, h1}, Staking: &StakingCredential{Hash: Credential{PubKeyCredential, h2}}}},
		{Mainnet, Address{Payment: Credential{PubKeyCredential, h1}, Staking: &StakingCredential{Hash: Credential{ScriptCredential, h2}}}},
		{Testnet, Address{Payment: Credential{ScriptCredential, h1}, Staking: &StakingCredential{Hash: Credential{ScriptCredential, h2}}}},
		{Mainnet, Address{Payment: Credential{PubKeyCredential, h1}, Staking: &StakingCredential{Pointer: &StakePointer{big.NewInt(2498243), big.NewInt(27), big.NewInt(3)}}}},
		{Testnet, Address{Payment: Credential{ScriptCredential, h1}, Staking: &StakingCredential{Pointer: &StakePointer{big.NewInt(0), big.NewInt(0), big.NewInt(128)}}}},
	}
	headers := []byte{0x61, 0x00, 0x11, 0x21, 0x30, 0x41, 0x50}
	for i := range forms {
		pa := &forms[i]
		raw, err := pa.Bytes()
		if err != nil {
			t.Fatalf("form %d: %v", i, err)
		}
		if raw[0] != headers[i] {
			t.Errorf("form %d: header %02x, want %02x", i, raw[0], headers[i])
		}
		roundTrip(t, fmt.Sprintf("form %d", i), pa, (*PartyAddress).Bech32, ParsePartyAddress)
		// Through Plutus Data as well.
		p := Party{Address: pa}
		d, _ := pd.Decode(pd.Encode(p.ToData()))
		pb, err := PartyFromData(d)
		if err != nil || !reflect.DeepEqual(pb, p) {
			t.Errorf("form %d: data round trip %v", i, err)
		}
	}
	// CIP-19 test vector: pointer address (2498243, 27, 3) on mainnet.
	ptr := forms[5]
	raw, _ := ptr.Bytes()
	if !bytes.HasSuffix(raw, []byte{0x81, 0x98, 0xbd, 0x43, 0x1b, 0x03}) {
		t.Fatalf("pointer encoding %x", raw[29:])
	}
}

func TestAddressRejects(t *testing.T) {
	mainnetEnterprise := "addr1wymhxfddsjj4hgpg9kzymledtu833sel6j3g5z5aw0r0vrg5ezax4"
	cases := map[string]string{
		"stake1uyehkck0lajq8gr28t9uxnuvgcqrc6070x3k9r8048z8y5gh6ffgw": "address prefix \"stake\"",
		"addr1wymhxfddsjj4hgpg9kzymledtu833sel6j3g5z5aw0r0vrg5ezax5":  "bad bech32 address",
		strings.Repeat("a", 300): "too long",
	}
	for text, want := range cases {
		if _, err := ParsePartyAddress(text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.30s: got %v, want %q", text, err, want)
		}
	}
	// A mainnet header under the testnet prefix.
	pa, _ := ParsePartyAddress(mainnetEnterprise)
	raw, _ := pa.Bytes()
	if _, err := PartyAddressFromBytes(raw, Testnet); err == nil || !strings.Contains(err.Error(), "names network 1") {
		t.Errorf("network mismatch: %v", err)
	}
	short := &PartyAddress{Address: Address{Payment: Credential{Hash: []byte{1, 2}}}}
	if _, err := (Party{Address: short}).MarshalJSON(); err == nil || !strings.Contains(err.Error(), "2 bytes") {
		t.Errorf("short hash: %v", err)
	}
	if _, err := PartyAddressFromBytes(append([]byte{0x41}, append(make([]byte, 28), 0x80, 0x01, 0x00, 0x00)...), Mainnet); err == nil {
		t.Error("non-minimal pointer accepted")
	}
}

func TestMerkleizedCaseAndInput(t *testing.T) {
	cont := &Pay{
		From:  Party{Role: []byte("A")},
		To:    Payee{Kind: PayeeParty, Party: Party{Role: []byte("B")}},
		Token: Token{Currency: []byte{}, Name: []byte{}},
		Value: &Constant{N: big.NewInt(5)},
		Then:  closeContract,
	}
	h := ContinuationHash(cont)
	// The hash is blake2b-256 of the canonical CBOR of the contract's data.
	if want := DatumHash(pd.Encode(ContractToData(cont))); h != want {
		t.Fatal("continuation hash is not the datum hash of the contract")
	}
	notify := &Notify{Observation: trueObservation}
	when := &When{
		Cases:               []Case{{Action: notify, MerkleizedThen: h[:]}},
		Timeout:             big.NewInt(1700000000000),
		TimeoutContinuation: closeContract,
	}
	js, err := ContractJSON(when)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"timeout":1700000000000,"timeout_continuation":"close","when":[{"case":{"notify_if":true},"merkleized_then":"` + hex.EncodeToString(h[:]) + `"}]}`
	if string(js) != want {
		t.Fatalf("got  %s\nwant %s", js, want)
	}
	contractCodec.check(t, "merkleized when", js)
	d := ContractToData(when)
	if cs := d.(*pd.Constr).Fields[0].(*pd.List).Items[0].(*pd.Constr); cs.Index != 1 {
		t.Fatalf("merkleized case constructor %d", cs.Index)
	}

	// A merkleized notify input, with its continuation resolved.
	in := Input{Content: notifyInput, ContinuationHash: h[:], Continuation: cont}
	ij := inputThroughJSON(t, "merkleized notify", in)
	if !strings.HasPrefix(string(ij), `{"continuation_hash":`) {
		t.Fatalf("merkleized notify JSON %s", ij)
	}
	// On chain the continuation is not part of the redeemer.
	data := in.ToData().(*pd.Constr)
	if data.Index != 1 || len(data.Fields) != 2 {
		t.Fatalf("MarloweTxInput %s", pd.MarshalJSON(data))
	}
	fromChain, err := InputFromData(data)
	if err != nil || fromChain.Continuation != nil || !bytes.Equal(fromChain.ContinuationHash, h[:]) {
		t.Fatalf("from chain: %+v %v", fromChain, err)
	}
	// A merkleized deposit keeps its content keys beside the merkleization keys.
	dep := Input{Content: &IDeposit{IntoAccount: Party{Role: []byte("A")}, From: Party{Role: []byte("A")}, Token: Token{Currency: []byte{}, Name: []byte{}}, Amount: big.NewInt(7)}, ContinuationHash: h[:], Continuation: cont}
	inputThroughJSON(t, "merkleized deposit", dep)
	// Without the continuation it also survives the chain form.
	dep.Continuation = nil
	dj, _ := dep.MarshalJSON()
	inputCodec.check(t, "merkleized deposit without continuation", dj)
}

// inputThroughJSON writes in as JSON and reads it back, which must give in;
// it returns the JSON.
func inputThroughJSON(t *testing.T, what string, in Input) []byte {
	t.Helper()
	return roundTrip(t, what, in, inputCodec.marshal, inputCodec.parse)
}

// roundTrip writes v with write and reads it back with read, which must
// give v; it returns what write wrote (text).
func roundTrip[T any, E string | []byte](t *testing.T, what string, v T, write func(T) (E, error), read func(E) (T, error)) E {
	t.Helper()
	text, err := write(v)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	back, err := read(text)
	if err != nil || !reflect.DeepEqual(back, v) {
		t.Fatalf("%s: %s -> %+v, %v", what, text, back, err)
	}
	return text
}

func TestJSONRejects(t *testing.T) {
	cases := []struct{ in, want string }{
		{`"open"`, `Contract: unknown contract "open"`},
		{`{"when":[],"timeout":1.5,"timeout_continuation":"close"}`, "timeout: 1.5 is not an integer"},
		{`{"when":[],"timeout":"1","timeout_continuation":"close"}`, "timeout: expected an integer, found a string"},
		{`{"when":[],"timeout":1,"timeout_continuation":"close","extra":1}`, "Contract: no constructor has the keys {extra,timeout,timeout_continuation,when}"},
		{`{"assert":true,"then":"close"} {}`, "trailing data"},
		{`{"assert":true,"then":`, "invalid JSON"},
		{`{"assert":{"value":1,"gt":"x"},"then":"close"}`, `assert.gt: Value: unknown value "x"`},
		{`{"pay":1,"from_account":{"address":"addr1qqq"},"to":{"party":{"role_token":"b"}},"token":{"currency_symbol":"","token_name":""},"then":"close"}`, "from_account.address: bad bech32 address"},
		{`{"pay":1,"from_account":{"role_token":"a"},"to":{"party":{"role_token":"b"}},"token":{"currency_symbol":"zz","token_name":""},"then":"close"}`, "token.currency_symbol: bad hex"},
	}
	for _, tc := range cases {
		_, err := ParseContractJSON([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant %q", tc.in, err, tc.want)
		}
	}
	if _, err := ParseStateJSON([]byte(`{"accounts":[[[{"role_token":"a"}],1]],"choices":[],"boundValues":[],"minTime":0}`)); err == nil || !strings.Contains(err.Error(), "accounts[0][0]: expected an account key") {
		t.Errorf("state: %v", err)
	}
	if _, err := ParseInputJSON([]byte(`{}`)); err == nil {
		t.Error("empty input accepted")
	}
}

// TestDeepContract: a contract of 500 nested Pays is 15.5 KB, so it fits in a
// transaction, and CBOR nesting of more than 1,000 levels. It must decode (a
// fixed limit of 256 levels, as in plutigo's data package, refuses it).
func TestDeepContract(t *testing.T) {
	var ct Contract = closeContract
	for i := 0; i < 500; i++ {
		ct = &Pay{
			From:  Party{Role: []byte("a")},
			To:    Payee{Kind: PayeeParty, Party: Party{Role: []byte("b")}},
			Token: Token{Currency: []byte{}, Name: []byte{}},
			Value: &Constant{N: big.NewInt(1)},
			Then:  ct,
		}
	}
	raw := pd.Encode(ContractToData(ct))
	if len(raw) > 16384 {
		t.Fatalf("%d bytes: the test contract no longer fits in a transaction", len(raw))
	}
	d, err := pd.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ContractFromData(d)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, ct) {
		t.Fatal("deep contract changed")
	}
	js, err := ContractJSON(back)
	if err != nil {
		t.Fatal(err)
	}
	contractCodec.check(t, "deep contract", js)
}
