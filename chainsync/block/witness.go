package block

import (
	"math"

	"golang.org/x/crypto/blake2b"

	"github.com/marlowe-follower/follower/chainsync/chain"
)

// Witness set keys read by the decoder. Other keys are skipped.
const (
	keyPlutusData = 4
	keyRedeemers  = 5
)

// witnesses reads a transaction witness set map.
func (d *decoder) witnesses(tx *Tx) error {
	_, err := d.keyedMap(func(key uint64) error {
		switch key {
		case keyPlutusData:
			if err := d.plutusData(tx); err != nil {
				return inField(err, "plutus_data")
			}
		case keyRedeemers:
			if err := d.redeemers(tx); err != nil {
				return inField(err, "redeemers")
			}
		default:
			if err := d.r.skip(); err != nil {
				return inField(err, "key "+itoa(key))
			}
		}
		return nil
	})
	return err
}

// plutusData reads the witness datums, a set of Plutus data with or without
// tag 258, keyed by the hash of each datum's bytes as they appear.
func (d *decoder) plutusData(tx *Tx) error {
	r := &d.r
	l, err := r.set(1)
	if err != nil {
		return err
	}
	hint := 8
	if !l.indef {
		hint = min(l.n, hint)
	}
	tx.Datums = make(map[chain.Hash32][]byte, hint)
	for i := 0; ; i++ {
		more, err := r.more(&l)
		if err != nil || !more {
			return err
		}
		raw, err := r.raw()
		if err != nil {
			return inFieldIndex(err, "", i)
		}
		tx.Datums[blake2b.Sum256(raw)] = raw
	}
}

// redeemers reads the redeemers, in wire order, in either form:
//
//	[* [tag, index, data, [mem, steps]]]          ; Alonzo, Babbage, Conway
//	{* [tag, index] => [data, [mem, steps]]}       ; Conway
func (d *decoder) redeemers(tx *Tx) error {
	r := &d.r
	major, err := r.peekMajor()
	if err != nil {
		return err
	}
	var l list
	switch major {
	case majorArray:
		l, err = r.array(minRedeemer)
	case majorMap:
		l, err = r.mapHead(minRedeemer + 1)
	default:
		return r.errAt(r.pos, ErrMalformed, "want array or map, got %s", majorNames[major])
	}
	if err != nil {
		return err
	}
	var out []Redeemer
	if !l.indef {
		out = d.reds.take(l.n)
	}
	for i := 0; ; i++ {
		more, err := r.more(&l)
		if err != nil {
			return err
		}
		if !more {
			tx.Redeemers = out
			return nil
		}
		var rd Redeemer
		if major == majorArray {
			err = d.redeemerEntry(&rd)
		} else {
			err = d.redeemerMapEntry(&rd)
		}
		if err != nil {
			return inFieldIndex(err, "", i)
		}
		out = addRedeemer(out, rd)
	}
}

// addRedeemer appends rd, or, when an earlier redeemer has the same tag and
// index, replaces that one's data and units: the ledger reads redeemers into
// a map, and a repeated key keeps its last value.
func addRedeemer(out []Redeemer, rd Redeemer) []Redeemer {
	for i := range out {
		if out[i].Tag == rd.Tag && out[i].Index == rd.Index {
			out[i] = rd
			return out
		}
	}
	return append(out, rd)
}

// redeemerEntry reads [tag, index, data, ex_units].
func (d *decoder) redeemerEntry(rd *Redeemer) error {
	return d.r.fixed(4, "redeemer", func() error {
		if err := d.redeemerKey(rd); err != nil {
			return err
		}
		return d.redeemerData(rd)
	})
}

// redeemerMapEntry reads [tag, index] => [data, ex_units].
func (d *decoder) redeemerMapEntry(rd *Redeemer) error {
	if err := d.r.fixed(2, "redeemer key", func() error { return d.redeemerKey(rd) }); err != nil {
		return err
	}
	return d.r.fixed(2, "redeemer value", func() error { return d.redeemerData(rd) })
}

// redeemerKey reads a redeemer's tag and index.
func (d *decoder) redeemerKey(rd *Redeemer) error {
	r := &d.r
	at := r.pos
	tag, err := r.uint()
	if err != nil {
		return inField(err, "tag")
	}
	if tag > math.MaxUint8 {
		return r.errAt(at, ErrMalformed, "redeemer tag %d", tag)
	}
	rd.Tag = RedeemerTag(tag)
	if rd.Index, err = r.uint32(); err != nil {
		return inField(err, "index")
	}
	return nil
}

// redeemerData reads a redeemer's data and [mem, steps].
func (d *decoder) redeemerData(rd *Redeemer) error {
	r := &d.r
	var err error
	if rd.Data, err = r.raw(); err != nil {
		return inField(err, "data")
	}
	indef, err := r.fixedArray(2, "ex_units")
	if err != nil {
		return inField(err, "ex_units")
	}
	if rd.Mem, err = r.uint(); err != nil {
		return inField(err, "ex_units.mem")
	}
	if rd.Steps, err = r.uint(); err != nil {
		return inField(err, "ex_units.steps")
	}
	return r.closeFixed(indef, "ex_units")
}

// auxData reads auxiliary data in any of its three forms and keeps the
// metadata:
//
//	{* label => metadatum}                         ; Shelley
//	[metadata, [* native_script]]                  ; Allegra, Mary
//	#6.259({? 0: metadata, ? 1: ..., ...})         ; Alonzo and later
func (d *decoder) auxData(tx *Tx) error {
	r := &d.r
	major, err := r.peekMajor()
	if err != nil {
		return err
	}
	switch major {
	case majorMap:
		tx.Metadata, err = d.metadata()
		return err
	case majorArray:
		indef, err := r.fixedArray(2, "auxiliary data")
		if err != nil {
			return err
		}
		if tx.Metadata, err = d.metadata(); err != nil {
			return err
		}
		if err := r.skip(); err != nil {
			return inField(err, "scripts")
		}
		return r.closeFixed(indef, "auxiliary data")
	case majorTag:
		if err := r.tag(tagAuxiliaryData); err != nil {
			return err
		}
		_, err := d.keyedMap(func(key uint64) (err error) {
			if key == 0 {
				tx.Metadata, err = d.metadata()
			} else {
				err = r.skip()
			}
			if err != nil {
				return inField(err, "key "+itoa(key))
			}
			return nil
		})
		return err
	}
	return r.errAt(r.pos, ErrMalformed, "want map, array or tag 259, got %s", majorNames[major])
}

// metadata reads {* label => metadatum}, keeping each value's raw bytes.
func (d *decoder) metadata() ([]Metadatum, error) {
	r := &d.r
	l, err := r.mapHead(minMetadata)
	if err != nil {
		return nil, inField(err, "metadata")
	}
	var out []Metadatum
	if !l.indef {
		out = d.metas.take(l.n)
	}
	for {
		more, err := r.more(&l)
		if err != nil {
			return nil, inField(err, "metadata")
		}
		if !more {
			return out, nil
		}
		var m Metadatum
		if m.Label, err = r.uint(); err != nil {
			return nil, inField(err, "metadata.label")
		}
		if m.Value, err = r.raw(); err != nil {
			return nil, inField(err, "metadata."+itoa(m.Label))
		}
		out = append(out, m)
	}
}
