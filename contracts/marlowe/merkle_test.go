package marlowe

import (
	"bytes"
	"math/big"
	"slices"
	"testing"
)

// notifyWhen waits for a notification, then continues with the cases.
func notifyWhen(timeout int64, cases ...Case) *When {
	return &When{Cases: cases, Timeout: big.NewInt(timeout), TimeoutContinuation: &Close{}}
}

func notify() Action { return &Notify{Observation: &TrueObs{}} }

func TestMerkleizedHashesAndDemerkleize(t *testing.T) {
	leaf := notifyWhen(3, plainCase(notify()))
	mid := notifyWhen(2, merkleizedCase(notify(), leaf), plainCase(notify()))
	top := notifyWhen(1, merkleizedCase(notify(), mid), merkleizedCase(notify(), leaf), merkleizedCase(notify(), mid))
	hl, hm := ContinuationHash(leaf), ContinuationHash(mid)
	want := [][]byte{hl[:], hm[:]}
	slices.SortFunc(want, bytes.Compare)
	if got := MerkleizedHashes(top); !slices.EqualFunc(got, want, bytes.Equal) {
		t.Fatalf("adjacency %x, want %x (each once, ascending)", got, want)
	}
	if got := MerkleizedHashes(leaf); len(got) != 0 {
		t.Fatalf("a contract without merkleized cases: %x", got)
	}
	known := map[[32]byte]Contract{hl: leaf, hm: mid}
	lookup := func(h []byte) (Contract, bool) { c, ok := known[[32]byte(h)]; return c, ok }
	full, ok := Demerkleize(top, lookup, 1000)
	if !ok {
		t.Fatal("refused a small expansion")
	}
	if got := MerkleizedHashes(full); len(got) != 0 {
		t.Fatalf("merkleized cases left after a full expansion: %x", got)
	}
	plainMid := notifyWhen(2, Case{Action: notify(), Then: leaf}, plainCase(notify()))
	plainTop := notifyWhen(1, Case{Action: notify(), Then: plainMid}, Case{Action: notify(), Then: leaf}, Case{Action: notify(), Then: plainMid})
	if ContinuationHash(full) != ContinuationHash(plainTop) {
		t.Fatal("the expansion is not the contract written out")
	}
	if got := MerkleizedHashes(top); len(got) != 2 {
		t.Fatal("Demerkleize changed its input")
	}
	delete(known, hl)
	partial, ok := Demerkleize(top, lookup, 1000)
	if got := MerkleizedHashes(partial); !ok || !slices.EqualFunc(got, [][]byte{hl[:]}, bytes.Equal) {
		t.Fatalf("an unknown continuation: left %x (ok %v), want only it", got, ok)
	}
	// Each level referenced twice doubles the expansion: 2^20 leaves.
	c := Contract(leaf)
	deep := map[[32]byte]Contract{}
	for range 20 {
		h := ContinuationHash(c)
		deep[h] = c
		c = notifyWhen(1, merkleizedCase(notify(), c), merkleizedCase(notify(), c))
	}
	if _, ok := Demerkleize(c, func(h []byte) (Contract, bool) { x, ok := deep[[32]byte(h)]; return x, ok }, 100_000); ok {
		t.Fatal("an expansion of millions of nodes was not refused")
	}
}
