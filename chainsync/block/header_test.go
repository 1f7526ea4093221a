package block

import (
	"errors"
	"strings"
	"testing"

	"github.com/blinklabs-io/gouroboros/ledger"
	lcommon "github.com/blinklabs-io/gouroboros/ledger/common"
	"golang.org/x/crypto/blake2b"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

// The header of the first epoch boundary block of the old public testnet
// (from gouroboros protocol/chainsync/testdata), whose hash is known.
const (
	testnetEBBHeader = "851a4170cb17582096fceff972c2c06bd3bb5243c39215333be6d56aaf4823073dca31afe50384715820" +
		"69bc32be98bb4567c0d60f571781e92c9f3100b119d03ff8886ad3f4e2a0eff78200810081a0"
	testnetEBBHash = "8f8602837f7c6f8b8867dd1cbc1842cf51a27eaed2c70ef48325d00f8efb320f"

	// A main block of the same testnet (gouroboros protocol/chainsync/testdata).
	testnetMainBlock = "83851A4170CB175820067E773E6FFD66EA06F7F1C967E18A1EE0916797F6A1C1ABDF410379EB8B1DBE84830058200E5751C0" +
		"26E543B2E8AB2EB06099DAA1D1E5DF47778F7787FAAB45CDF12FE3A85820AFC0DA64183BF2664F3D4EEC7238D524BA607FAE" +
		"EAB24FC100EB861DBA69971B8300582025777ACA9E4A73D48FC73B4F961D345B06D4A6F349CB7916570D35537D53479F5820" +
		"D36A2619A672494604E11BB447CBCF5231E9F2BA25C2169177EDC941BD50AD6C5820AFC0DA64183BF2664F3D4EEC7238D524" +
		"BA607FAEEAB24FC100EB861DBA69971B58204E66280CD94D591072349BEC0A3090A53AA945562EFB6D08D56E53654B0E4098" +
		"84820019040A5840CB51D29AB94E50D9A144D4F426564CEC700DEE4D9E857AACF91D3B689374D81F742A452818CF2489C16D" +
		"FC186F6E9C76B7DF40845B7C450785F02D8809767575810482028284005840CB51D29AB94E50D9A144D4F426564CEC700DEE" +
		"4D9E857AACF91D3B689374D81F742A452818CF2489C16DFC186F6E9C76B7DF40845B7C450785F02D880976757558407EC249" +
		"D890D0AAF9A81207960C163AE2D6AC5E715CA6B96D5860E50D9F2B2B2A1D568FAA87C9CC8BFD433A3224A96EC5D101B4B6E9" +
		"DB008DB8857F49BAE294B25840A304BF45B44FBCCC78F54B9014A6B2D4354631EBFF235AEBB2E71A15BDD582BE3794384C1B" +
		"A713B99EF05766E92B8F438B2FC5AF349F2BB16E85E3780AA84C07584017A846A92477D3468690D97E28A44811BE4F8E3FDE" +
		"79E478E4DCC432B13370C669C124BE03015EF2B1F121B807FFE74B1A92A4247EA8A22F9EA30D5DF671CB068483000000826A" +
		"63617264616E6F2D736C00A058204BA92AA320C60ACC9AD7B9A64F2EDA55C4D2EC28E604FAF186708B4F0C4E8EDF849FFF83" +
		"00D9010280D90102809FFF82809FFF81A0"
	testnetMainHash = "f38aa5e8cf0b47d1ffa8b2385aa2d43882282db2ffd5ac0e3dadec1a6f2ecf08"
)

func TestByronTestnetBlocks(t *testing.T) {
	// The EBB's body is large; DecodeHeader reads only the header.
	ebb := append([]byte{0x83}, mustHex(testnetEBBHeader)...)
	ebb = append(ebb, 0x80, 0x81, 0xa0)
	b, err := DecodeHeader(TypeByronEBB, ebb, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Header.Hash.String() != testnetEBBHash || b.Header.Slot != 0 || b.Header.BlockNo != 0 {
		t.Errorf("EBB %+v", b.Header)
	}
	main := mustHex(testnetMainBlock)
	m, err := DecodeBlock(TypeByron, main, Options{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := ledger.NewBlockFromCbor(uint(TypeByron), main)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Hash.String() != testnetMainHash || m.Header.Slot != g.SlotNumber() || m.Header.BlockNo != g.BlockNumber() ||
		m.PrevHash != chain.Hash32(g.PrevHash()) {
		t.Errorf("main %+v prev %s; gouroboros %d %d %s", m.Header, m.PrevHash, g.SlotNumber(), g.BlockNumber(), g.PrevHash())
	}
}

// TestByronEBB builds an epoch boundary block of a later epoch and checks it
// against gouroboros.
func TestByronEBB(t *testing.T) {
	var e encoder
	body := []byte{0x80}
	proof := blake2b.Sum256(body)
	prev := newGen(4).hash32()
	e.array(3)
	e.array(5)
	e.uint(764824073)
	e.bytes(prev[:])
	e.bytes(proof[:])
	e.array(2)
	e.uint(208)
	e.array(1)
	e.uint(4492800)
	e.array(1)
	e.mapHead(0)
	e.raw(body)
	e.array(1)
	e.mapHead(0)
	raw := e.buf
	b, err := DecodeHeader(TypeByronEBB, raw, Options{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := ledger.NewBlockFromCbor(uint(TypeByronEBB), raw, lcommon.VerifyConfig{SkipBodyHashValidation: true})
	if err != nil {
		t.Fatal(err)
	}
	if b.Header.Hash != chain.Hash32(g.Hash()) || b.Header.Slot != 208*21600 || b.Header.Slot != g.SlotNumber() ||
		b.Header.BlockNo != 4492800 || b.PrevHash != prev {
		t.Errorf("%+v prev %s; gouroboros %s %d", b.Header, b.PrevHash, g.Hash(), g.SlotNumber())
	}
	if full, err := DecodeBlock(TypeByronEBB, raw, Options{}); err != nil || full.Header != b.Header {
		t.Errorf("DecodeBlock: %v %v", full, err)
	}
	if b, err := DecodeHeader(TypeByronEBB, raw, Options{ByronEpochLength: 4320}); err != nil || b.Header.Slot != 208*4320 {
		t.Errorf("epoch length 4320: %+v %v", b.Header, err)
	}
}

func TestByronEpochLength(t *testing.T) {
	raw := mainnet(t, "byron")
	// Mainnet block 4468973 is slot 7 of epoch 207.
	b, err := DecodeHeader(TypeByron, raw, Options{ByronEpochLength: 43200})
	if err != nil || b.Header.Slot != 207*43200+7 {
		t.Errorf("epoch length 43200: %+v %v", b.Header, err)
	}
	_, err = DecodeHeader(TypeByron, raw, Options{ByronEpochLength: 5})
	var de *DecodeError
	if !errors.As(err, &de) || !strings.Contains(de.Reason, "epoch length") {
		t.Errorf("epoch length 5: %v", err)
	}
}

func TestHeaderOnlyEras(t *testing.T) {
	// DecodeBlock leaves the body of pre-Alonzo blocks alone: a garbage body
	// after a valid header is not an error.
	for _, name := range []string{"shelley", "allegra", "mary"} {
		raw := mainnet(t, name)
		typ := map[string]Type{"shelley": TypeShelley, "allegra": TypeAllegra, "mary": TypeMary}[name]
		r := reader{buf: raw}
		_, _ = r.array(1)
		_ = r.skip()
		cut := append(append([]byte{}, raw[:r.pos]...), 0xff, 0xff, 0xff)
		want, err := DecodeHeader(typ, raw, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range [][]byte{raw, cut} {
			b, err := DecodeBlock(typ, in, Options{})
			if err != nil || b.Header != want.Header || b.Txs != nil {
				t.Errorf("%s: %+v %v", name, b, err)
			}
		}
	}
}

func TestHeaderAllocations(t *testing.T) {
	for _, mb := range mainnetBlocks(t) {
		allocs := testing.AllocsPerRun(20, func() {
			if _, err := DecodeHeader(mb.typ, mb.raw, Options{}); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: DecodeHeader allocates %.0f times", mb.name, allocs)
		}
	}
}

func TestDecodeBlockAllocations(t *testing.T) {
	for _, name := range []string{"babbage", "conway"} {
		raw := mainnet(t, name)
		typ := map[string]Type{"babbage": TypeBabbage, "conway": TypeConway}[name]
		b, err := DecodeBlock(typ, raw, Options{})
		if err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(20, func() { _, _ = DecodeBlock(typ, raw, Options{}) })
		// The block, its transaction slice, a slab or two per kind of value, two
		// scratch buffers, and two allocations per datum map.
		datums := 0
		for _, tx := range b.Txs {
			if tx.Datums != nil {
				datums++
			}
		}
		if limit := float64(16 + 2*datums); allocs > limit {
			t.Errorf("%s: DecodeBlock allocates %.0f times (%d txs), want at most %.0f", name, allocs, len(b.Txs), limit)
		}
		t.Logf("%s: %.0f allocations for %d txs", name, allocs, len(b.Txs))
	}
}
