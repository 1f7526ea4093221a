package block

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	"github.com/marlowe-follower/follower/chainsync/chain"
	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
)

// encoder appends canonical CBOR: every head in its shortest form and every
// container of definite length.
type encoder struct {
	buf []byte
}

func (e *encoder) head(major byte, v uint64) { e.buf = pd.AppendHead(e.buf, major, v) }

func (e *encoder) uint(v uint64) { e.head(majorUint, v) }

func (e *encoder) int(v int64) {
	if v < 0 {
		e.head(majorNegint, uint64(-1-v))
		return
	}
	e.head(majorUint, uint64(v))
}

func (e *encoder) bytes(b []byte) {
	e.head(majorBytes, uint64(len(b)))
	e.buf = append(e.buf, b...)
}

func (e *encoder) array(n int)   { e.head(majorArray, uint64(n)) }
func (e *encoder) mapHead(n int) { e.head(majorMap, uint64(n)) }
func (e *encoder) tag(n uint64)  { e.head(majorTag, n) }
func (e *encoder) null()         { e.buf = append(e.buf, nullByte) }
func (e *encoder) raw(b []byte)  { e.buf = append(e.buf, b...) }
func (e *encoder) refs(rs []chain.TxOutRef) {
	e.tag(tagSet)
	e.array(len(rs))
	for _, r := range rs {
		e.array(2)
		e.bytes(r.TxID[:])
		e.uint(uint64(r.Index))
	}
}

// output encodes an output in the legacy array form when it has neither an
// inline datum nor a script reference, as the ledger does, and in the map
// form otherwise.
func (e *encoder) output(o *TxOut) error {
	if o.DatumHash != nil && o.InlineDatum != nil {
		return fmt.Errorf("output has both a datum hash and an inline datum")
	}
	if len(o.Address) == 0 {
		return fmt.Errorf("output has no address")
	}
	if o.InlineDatum == nil && !o.HasScriptRef {
		n := 2
		if o.DatumHash != nil {
			n = 3
		}
		e.array(n)
		e.bytes(o.Address)
		if err := e.value(&o.Value); err != nil {
			return err
		}
		if o.DatumHash != nil {
			e.bytes(o.DatumHash[:])
		}
		return nil
	}
	n := 2
	if o.DatumHash != nil || o.InlineDatum != nil {
		n++
	}
	if o.HasScriptRef {
		n++
	}
	e.mapHead(n)
	e.uint(0)
	e.bytes(o.Address)
	e.uint(1)
	if err := e.value(&o.Value); err != nil {
		return err
	}
	switch {
	case o.DatumHash != nil:
		e.uint(2)
		e.array(2)
		e.uint(0)
		e.bytes(o.DatumHash[:])
	case o.InlineDatum != nil:
		if err := checkItem(o.InlineDatum); err != nil {
			return fmt.Errorf("inline datum: %w", err)
		}
		e.uint(2)
		e.array(2)
		e.uint(1)
		e.tag(tagEncodedCBOR)
		e.bytes(o.InlineDatum)
	}
	if o.HasScriptRef {
		e.uint(3)
		e.tag(tagEncodedCBOR)
		e.bytes(placeholderScript)
	}
	return nil
}

// placeholderScript is the reference script of built outputs that have one:
// the native script that requires nothing, [0, [1, []]].
var placeholderScript = []byte{0x82, 0x00, 0x82, 0x01, 0x80}

// value encodes coin or [coin, multiasset].
func (e *encoder) value(v *Value) error {
	if len(v.Assets) == 0 {
		e.uint(v.Lovelace)
		return nil
	}
	groups, err := groupAssets(v.Assets, func(a Asset) (chain.Hash28, []byte, bool) {
		return a.Policy, a.Name, a.Quantity != 0
	})
	if err != nil {
		return err
	}
	e.array(2)
	e.uint(v.Lovelace)
	e.mapHead(len(groups))
	for _, g := range groups {
		e.bytes(g.policy[:])
		e.mapHead(len(g.idx))
		for _, i := range g.idx {
			e.bytes(v.Assets[i].Name)
			e.uint(v.Assets[i].Quantity)
		}
	}
	return nil
}

// mint encodes multiasset<nonZeroInt64>.
func (e *encoder) mint(m []MintAsset) error {
	groups, err := groupAssets(m, func(a MintAsset) (chain.Hash28, []byte, bool) {
		return a.Policy, a.Name, a.Quantity != 0
	})
	if err != nil {
		return err
	}
	e.mapHead(len(groups))
	for _, g := range groups {
		e.bytes(g.policy[:])
		e.mapHead(len(g.idx))
		for _, i := range g.idx {
			e.bytes(m[i].Name)
			e.int(m[i].Quantity)
		}
	}
	return nil
}

// assetGroup is the assets of one policy, as indexes into the asset list.
type assetGroup struct {
	policy chain.Hash28
	idx    []int
}

// groupAssets groups assets by policy in canonical CBOR key order: policies
// by bytes and names by length and then bytes. A repeated policy and name,
// a zero quantity or a name longer than 32 bytes is an error.
func groupAssets[T any](assets []T, key func(T) (chain.Hash28, []byte, bool)) ([]assetGroup, error) {
	idx := make([]int, len(assets))
	for i := range idx {
		idx[i] = i
		p, name, nonZero := key(assets[i])
		if !nonZero {
			return nil, fmt.Errorf("asset %s.%x: quantity zero", p, name)
		}
		if len(name) > maxAssetName {
			return nil, fmt.Errorf("asset %s.%x: name longer than %d bytes", p, name, maxAssetName)
		}
	}
	slices.SortStableFunc(idx, func(i, j int) int {
		pi, ni, _ := key(assets[i])
		pj, nj, _ := key(assets[j])
		if c := bytes.Compare(pi[:], pj[:]); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(len(ni), len(nj)), bytes.Compare(ni, nj))
	})
	var groups []assetGroup
	for n, i := range idx {
		p, name, _ := key(assets[i])
		if n > 0 {
			pp, pname, _ := key(assets[idx[n-1]])
			if pp == p && bytes.Equal(pname, name) {
				return nil, fmt.Errorf("asset %s.%x appears twice", p, name)
			}
		}
		if len(groups) == 0 || groups[len(groups)-1].policy != p {
			groups = append(groups, assetGroup{policy: p})
		}
		g := &groups[len(groups)-1]
		g.idx = append(g.idx, i)
	}
	return groups, nil
}
