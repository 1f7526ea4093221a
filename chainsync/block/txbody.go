package block

import (
	"errors"
	"fmt"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

// Transaction body keys read by the decoder. Other keys are skipped.
const (
	keyInputs           = 0
	keyOutputs          = 1
	keyFee              = 2
	keyTTL              = 3
	keyAuxDataHash      = 7
	keyValidityStart    = 8
	keyMint             = 9
	keyCollateral       = 13
	keyCollateralReturn = 16
	keyReferenceInputs  = 18
)

// bodyKeyNames names the body keys in error messages.
var bodyKeyNames = map[uint64]string{
	keyInputs:           "inputs",
	keyOutputs:          "outputs",
	keyFee:              "fee",
	keyTTL:              "ttl",
	keyValidityStart:    "validity_start",
	keyMint:             "mint",
	keyCollateral:       "collateral",
	keyCollateralReturn: "collateral_return",
	keyReferenceInputs:  "reference_inputs",
}

// maxAssetName is the longest asset name the ledger allows.
const maxAssetName = 32

// keySet tracks the map keys below 64 already read, to refuse duplicates.
type keySet uint64

// add records key and reports whether it was new. Keys of 64 and above are
// not tracked: the decoder never reads them.
func (s *keySet) add(key uint64) bool {
	if key >= 64 {
		return true
	}
	if *s&(1<<key) != 0 {
		return false
	}
	*s |= 1 << key
	return true
}

func (s keySet) has(key uint64) bool { return s&(1<<key) != 0 }

// mapKey reads a map key that must be an unsigned integer and must not
// repeat.
func (d *decoder) mapKey(seen *keySet) (uint64, error) {
	r := &d.r
	at := r.pos
	key, err := r.uint()
	if err != nil {
		return 0, err
	}
	if !seen.add(key) {
		return 0, r.errAt(at, ErrMalformed, "key %d appears twice", key)
	}
	return key, nil
}

// keyedMap reads a map whose keys are unsigned integers, each at most
// once, handing each key to field, which reads its value; it returns the
// keys read.
func (d *decoder) keyedMap(field func(key uint64) error) (keySet, error) {
	r := &d.r
	l, err := r.mapHead(2)
	if err != nil {
		return 0, err
	}
	var seen keySet
	for {
		more, err := r.more(&l)
		if err != nil || !more {
			return seen, err
		}
		key, err := d.mapKey(&seen)
		if err != nil {
			return seen, err
		}
		if err := field(key); err != nil {
			return seen, err
		}
	}
}

// txBody reads a transaction body map.
func (d *decoder) txBody(tx *Tx) error {
	r := &d.r
	start := r.pos
	seen, err := d.keyedMap(func(key uint64) (err error) {
		switch key {
		case keyInputs:
			tx.Inputs, err = d.inputs()
		case keyOutputs:
			tx.Outputs, err = d.outputs()
		case keyFee:
			tx.Fee, err = r.uint()
		case keyTTL:
			var v uint64
			if v, err = r.uint(); err == nil {
				tx.TTL = d.numbers.one(v)
			}
		case keyValidityStart:
			var v uint64
			if v, err = r.uint(); err == nil {
				tx.ValidityStart = d.numbers.one(v)
			}
		case keyMint:
			tx.Mint, err = d.mint()
		case keyCollateral:
			tx.Collateral, err = d.inputs()
		case keyCollateralReturn:
			o := d.outs.take(1)[:1]
			if err = d.output(&o[0]); err == nil {
				tx.CollateralReturn = &o[0]
			}
		case keyReferenceInputs:
			tx.ReferenceInputs, err = d.inputs()
		default:
			err = r.skip()
		}
		if err != nil {
			if name, ok := bodyKeyNames[key]; ok {
				return inField(err, name)
			}
			return inField(err, "key "+itoa(key))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range [...]uint64{keyInputs, keyOutputs, keyFee} {
		if !seen.has(k) {
			return r.errAt(start, ErrMalformed, "no %s (key %d)", bodyKeyNames[k], k)
		}
	}
	return nil
}

// itoa formats a map key for an error message.
func itoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}

// inputs reads a set of transaction inputs, with or without tag 258, in
// wire order.
func (d *decoder) inputs() ([]chain.TxOutRef, error) {
	l, err := d.r.set(minInput)
	if err != nil {
		return nil, err
	}
	return items(&d.r, l, &d.refs, func(ref *chain.TxOutRef) (err error) {
		*ref, err = d.input()
		return err
	})
}

// input reads [transaction_id, index].
func (d *decoder) input() (chain.TxOutRef, error) {
	r := &d.r
	var ref chain.TxOutRef
	indef, err := r.fixedArray(2, "input")
	if err != nil {
		return ref, err
	}
	if ref.TxID, err = r.hash32(); err != nil {
		return ref, err
	}
	if ref.Index, err = r.uint32(); err != nil {
		return ref, err
	}
	return ref, r.closeFixed(indef, "input")
}

// outputs reads [* transaction_output].
func (d *decoder) outputs() ([]TxOut, error) {
	l, err := d.r.array(minOutput)
	if err != nil {
		return nil, err
	}
	return items(&d.r, l, &d.outs, d.output)
}

// addressOrValue reads what both forms of an output hold under 0, the
// address, and 1, the value.
func (d *decoder) addressOrValue(o *TxOut, key uint64) (err error) {
	if key == 0 {
		if o.Address, err = d.r.bytes(); err != nil {
			return inField(err, "address")
		}
		return nil
	}
	if err := d.value(&o.Value); err != nil {
		return inField(err, "value")
	}
	return nil
}

// output reads an output in either form:
//
//	[address, value, ? datum_hash]                                 ; legacy
//	{0: address, 1: value, ? 2: datum_option, ? 3: script_ref}     ; Babbage
func (d *decoder) output(o *TxOut) error {
	r := &d.r
	start := r.pos
	major, err := r.peekMajor()
	if err != nil {
		return err
	}
	switch major {
	case majorArray:
		l, err := r.array(1)
		if err != nil {
			return err
		}
		n := 0
		for ; ; n++ {
			more, err := r.more(&l)
			if err != nil {
				return err
			}
			if !more {
				break
			}
			switch n {
			case 0, 1:
				if err := d.addressOrValue(o, uint64(n)); err != nil {
					return err
				}
			case 2:
				h, err := r.hash32()
				if err != nil {
					return inField(err, "datum_hash")
				}
				o.DatumHash = d.hashes.one(h)
			default:
				return r.errAt(start, ErrMalformed, "legacy output with more than 3 entries")
			}
		}
		if n < 2 {
			return r.errAt(start, ErrMalformed, "legacy output with %d entries", n)
		}
		return nil
	case majorMap:
		seen, err := d.keyedMap(func(key uint64) (err error) {
			switch key {
			case 0, 1:
				return d.addressOrValue(o, key)
			case 2:
				if err := d.datumOption(o); err != nil {
					return inField(err, "datum_option")
				}
			case 3:
				if err := r.tag(tagEncodedCBOR); err != nil {
					return inField(err, "script_ref")
				}
				if _, err := r.bytes(); err != nil {
					return inField(err, "script_ref")
				}
				o.HasScriptRef = true
			default:
				if err := r.skip(); err != nil {
					return inField(err, "key "+itoa(key))
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if !seen.has(0) || !seen.has(1) {
			return r.errAt(start, ErrMalformed, "output without address (key 0) or value (key 1)")
		}
		return nil
	}
	return r.errAt(start, ErrMalformed, "output: want array or map, got %s", majorNames[major])
}

// datumOption reads [0, datum_hash] or [1, #6.24(bytes .cbor plutus_data)].
func (d *decoder) datumOption(o *TxOut) error {
	r := &d.r
	indef, err := r.fixedArray(2, "datum option")
	if err != nil {
		return err
	}
	at := r.pos
	kind, err := r.uint()
	if err != nil {
		return err
	}
	switch kind {
	case 0:
		h, err := r.hash32()
		if err != nil {
			return err
		}
		o.DatumHash = d.hashes.one(h)
	case 1:
		if err := r.tag(tagEncodedCBOR); err != nil {
			return err
		}
		at := r.pos
		b, err := r.bytes()
		if err != nil {
			return err
		}
		if err := checkItem(b); err != nil {
			return r.errAt(at, ErrMalformed, "inline datum is not one CBOR item: %v", err)
		}
		o.InlineDatum = b
	default:
		return r.errAt(at, ErrMalformed, "datum option %d", kind)
	}
	return r.closeFixed(indef, "datum option")
}

// checkItem checks that b is exactly one well-formed CBOR item. Its error
// gives the offset within b.
func checkItem(b []byte) error {
	sub := reader{buf: b}
	err := sub.skip()
	if err == nil && sub.pos != len(b) {
		err = sub.errAt(sub.pos, ErrMalformed, "%d bytes after the item", len(b)-sub.pos)
	}
	var de *DecodeError
	if errors.As(err, &de) {
		return fmt.Errorf("at byte %d: %w: %s", de.Offset, de.Err, de.Reason)
	}
	return err
}

// value reads coin or [coin, multiasset<uint>]. Like the ledger, it drops
// assets with quantity zero.
func (d *decoder) value(v *Value) error {
	r := &d.r
	major, err := r.peekMajor()
	if err != nil {
		return err
	}
	if major == majorUint {
		v.Lovelace, err = r.uint()
		return err
	}
	indef, err := r.fixedArray(2, "value")
	if err != nil {
		return err
	}
	if v.Lovelace, err = r.uint(); err != nil {
		return err
	}
	assets, err := nonZero(d, &d.assetBuf, 64, &d.assets, r.uint, func(policy chain.Hash28, name []byte, q uint64) Asset {
		return Asset{Policy: policy, Name: name, Quantity: q}
	})
	if err != nil {
		return inField(err, "assets")
	}
	v.Assets = assets
	return r.closeFixed(indef, "value")
}

// mint reads multiasset<int64>, dropping quantities of zero as the ledger
// does.
func (d *decoder) mint() ([]MintAsset, error) {
	return nonZero(d, &d.mintBuf, 16, &d.mints, d.r.int64, func(policy chain.Hash28, name []byte, q int64) MintAsset {
		return MintAsset{Policy: policy, Name: name, Quantity: q}
	})
}

// nonZero reads a multi-asset map with quantity reading each quantity, and
// returns, in a slice from s, the assets (made by asset) whose quantity is
// not zero. buf is the scratch reused from one call to the next (made with
// room for size the first time).
func nonZero[A any, Q uint64 | int64](d *decoder, buf *[]A, size int, s *slab[A], quantity func() (Q, error), asset func(chain.Hash28, []byte, Q) A) ([]A, error) {
	if *buf == nil {
		*buf = make([]A, 0, size)
	}
	kept := (*buf)[:0]
	err := d.multiAsset(func(policy chain.Hash28, name []byte) error {
		q, err := quantity()
		if q != 0 {
			kept = append(kept, asset(policy, name, q))
		}
		return err
	})
	*buf = kept
	if err != nil {
		return nil, err
	}
	return append(s.take(len(kept)), kept...), nil
}

// multiAsset reads {* policy_id => {* asset_name => quantity}}, calling
// quantity to read each quantity.
func (d *decoder) multiAsset(quantity func(chain.Hash28, []byte) error) error {
	r := &d.r
	return r.entries(r.mapHead, minPolicy, func() error {
		policy, err := r.hash28()
		if err != nil {
			return err
		}
		return r.entries(r.mapHead, minAsset, func() error {
			at := r.pos
			name, err := r.bytes()
			if err != nil {
				return err
			}
			if len(name) > maxAssetName {
				return r.errAt(at, ErrMalformed, "asset name of %d bytes", len(name))
			}
			return quantity(policy, name)
		})
	})
}
