package client

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/marlowe-follower/follower/chainsync/chain"
	"github.com/marlowe-follower/follower/history/record"
	"github.com/marlowe-follower/follower/streaming/protocol"
)

// frame is what the client reads of a server frame (protocol.Frame): the
// fields it acts on. A batch's records are decoded field by field; each
// record's payload, and the record itself (raw), are the bytes of the frame
// as they came, not copied and not decoded. The frame must not be changed
// while they are in use.
type frame struct {
	typ string
	// stream is the stream's name (its bytes in the frame when they need
	// no decoding): looked up, not kept.
	stream      []byte
	batch       int64
	cursor      string
	tip         protocol.Tip
	hasTip      bool
	redelivered bool
	code        string
	message     string
	records     []record.Record
	raw         []json.RawMessage
	// room, when the records were decoded into one, holds the batch the
	// frame becomes (newBatch).
	room *batchRoom
}

// batchRoom is a batch with room for minRecords records, their raw bytes
// and their contract references: a batch at the tip (a block's records,
// one to a few) in one allocation instead of four.
type batchRoom struct {
	batch   Batch
	records [minRecords]record.Record
	raw     [minRecords]json.RawMessage
	refs    [minRecords]chain.TxOutRef
}

// newBatch returns the batch the frame's records were decoded for, or a
// new one.
func (f *frame) newBatch() *Batch {
	if f.room != nil {
		return &f.room.batch
	}
	return new(Batch)
}

// FrameError is a server frame the client could not decode: not JSON, or
// a field it reads of the wrong type. The client drops the connection on
// one (the batch comes again on the next) and counts it
// (Client.BadFrames).
type FrameError struct {
	// Err says what is wrong and at which byte of the frame.
	Err error
	// Frame is the beginning of the frame, for the log.
	Frame []byte
}

// Error implements error.
func (e *FrameError) Error() string { return "undecodable frame from the server: " + e.Err.Error() }

// Unwrap returns the decoding error.
func (e *FrameError) Unwrap() error { return e.Err }

// decoder reads the frames of one connection, one at a time: its scanner
// (and the stack it steps over payloads with) and the size of the last
// batch are kept from frame to frame.
type decoder struct {
	s    scanner
	hint int // records in the last batch
}

// decodeFrame reads a server frame with a decoder of its own. recordsHint
// is the capacity to give the records. The records' bytes alias data.
func decodeFrame(data []byte, recordsHint int) (*frame, error) {
	d := decoder{hint: recordsHint}
	f := &frame{}
	if err := d.decode(data, f); err != nil {
		return nil, err
	}
	return f, nil
}

// decode reads a server frame into f (which it resets). The records' bytes
// alias data.
func (d *decoder) decode(data []byte, f *frame) error {
	*f = frame{}
	d.s.b, d.s.i = data, 0
	s := &d.s
	err := s.object(func(key []byte) error {
		if null, err := s.null(); null || err != nil {
			// A field set to null is left as it is, as encoding/json does,
			// but for those it would set to nil.
			switch string(key) {
			case "tip":
				f.tip, f.hasTip = protocol.Tip{}, false
			case "records":
				f.records, f.raw = nil, nil
			}
			return err
		}
		var err error
		switch string(key) {
		case "type":
			f.typ, err = frameType(s)
		case "stream":
			f.stream, err = plainString(s)
		case "batch":
			f.batch, err = s.int(64)
		case "cursor":
			f.cursor, err = s.str()
		case "tip":
			f.hasTip, err = true, decodeTip(s, &f.tip)
		case "redelivered":
			f.redelivered, err = s.boolean()
		case "code":
			f.code, err = s.str()
		case "message":
			f.message, err = s.str()
		case "records":
			err = f.decodeRecords(s, d.hint)
		default:
			_, err = s.skip()
		}
		return field(key, err)
	})
	if err == nil {
		if s.ws(); s.i != len(s.b) {
			err = s.errorf("data after the frame")
		}
	}
	d.s.b = nil // the frame is not kept past its decoding
	if err != nil {
		return &FrameError{Err: err, Frame: data[:min(len(data), 200)]}
	}
	if len(f.records) > 0 {
		d.hint = len(f.records)
	}
	return nil
}

// decodeTip reads a tip into t (a tip given twice: the fields of the
// second over those of the first, as encoding/json does).
func decodeTip(s *scanner, t *protocol.Tip) error {
	h := chain.BlockHeader{Slot: t.Slot, BlockNo: t.BlockNo, Hash: t.Hash}
	err := decodeBlock(s, &h, &t.Seq)
	t.Slot, t.BlockNo, t.Hash = h.Slot, h.BlockNo, h.Hash
	return err
}

// field names the field of an error.
func field(key []byte, err error) error {
	if err != nil && key != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return err
}

// decodeRecords reads the records of a batch. Contract references are
// kept in one array for the batch, not one allocation each. The arrays
// start with room for the last batch's records, and at least minRecords:
// up to minRecords, in one batchRoom with the batch.
func (f *frame) decodeRecords(s *scanner, hint int) error {
	hint = max(hint, minRecords)
	var refs []chain.TxOutRef
	if hint == minRecords {
		f.room = new(batchRoom)
		f.records, f.raw, refs = f.room.records[:0], f.room.raw[:0], f.room.refs[:0]
	} else {
		f.records = make([]record.Record, 0, hint)
		f.raw = make([]json.RawMessage, 0, hint)
	}
	return s.array(func(i int) error {
		s.ws()
		start := s.i
		var r record.Record
		var ref chain.TxOutRef
		hasRef := false
		err := s.object(func(key []byte) error {
			if string(key) == "payload" {
				// The payload as it is in the frame (null included, as
				// encoding/json keeps it in a json.RawMessage).
				p, err := s.skip()
				r.Payload = p
				return field(key, err)
			}
			if null, err := s.null(); null || err != nil {
				switch string(key) {
				case "contractId":
					hasRef = false
				case "rolledBackBy":
					r.RolledBackBy = nil
				}
				return err
			}
			var err error
			switch string(key) {
			case "seq":
				r.Seq, err = s.int(64)
			case "kind":
				r.Kind, err = kind(s)
			case "block":
				err = decodeBlock(s, &r.Block, nil)
			case "txId":
				r.TxID, err = hash32(s)
			case "txIndex":
				var v int64
				v, err = s.int(strconvIntSize)
				r.TxIndex = int(v)
			case "contractId":
				ref, err = txOutRef(s)
				hasRef = err == nil
			case "rolledBackBy":
				var v int64
				if v, err = s.int(64); err == nil {
					r.RolledBackBy = &v
				}
			default:
				_, err = s.skip()
			}
			return field(key, err)
		})
		if err != nil {
			return fmt.Errorf("[%d]: %w", i, err)
		}
		if hasRef {
			if refs == nil {
				refs = make([]chain.TxOutRef, 0, hint)
			}
			if len(refs) == cap(refs) {
				// A new array: the records before point into the old one,
				// which stays theirs.
				refs = make([]chain.TxOutRef, 0, 2*cap(refs))
			}
			refs = append(refs, ref)
			r.Contract = &refs[len(refs)-1]
		}
		f.records = append(f.records, r)
		// Capacity cut at the record's end: an append to it cannot
		// overwrite the frame's next bytes.
		f.raw = append(f.raw, s.b[start:s.i:s.i])
		return nil
	})
}

// minRecords is the least room the decoder gives a batch's records: at
// the tip a batch holds a block's records, one to a few.
const minRecords = 4

// strconvIntSize is the size of int, as strconv names it.
const strconvIntSize = 32 << (^uint(0) >> 63)

// decodeBlock reads a block header into h; seq, when not nil, takes the
// "seq" field (a tip's), which a block header does not have.
func decodeBlock(s *scanner, h *chain.BlockHeader, seq *int64) error {
	return s.object(func(key []byte) error {
		if null, err := s.null(); null || err != nil {
			return err
		}
		var err error
		switch string(key) {
		case "slot":
			h.Slot, err = s.uint()
		case "blockNo":
			h.BlockNo, err = s.uint()
		case "hash":
			h.Hash, err = hash32(s)
		case "seq":
			if seq != nil {
				*seq, err = s.int(64)
				break
			}
			fallthrough
		default:
			_, err = s.skip()
		}
		return field(key, err)
	})
}

// hash32 reads a hash written as 64 hex digits.
func hash32(s *scanner) (chain.Hash32, error) {
	var h chain.Hash32
	raw, err := plainString(s)
	if err != nil {
		return h, err
	}
	if len(raw) == 2*len(h) {
		if _, err := hex.Decode(h[:], raw); err == nil {
			return h, nil
		}
	}
	return chain.ParseHash32(string(raw)) // the error
}

// txOutRef reads an output reference written TXID#INDEX.
func txOutRef(s *scanner) (chain.TxOutRef, error) {
	raw, err := plainString(s)
	if err != nil {
		return chain.TxOutRef{}, err
	}
	var r chain.TxOutRef
	if len(raw) > 65 && raw[64] == '#' && len(raw) <= 65+10 {
		if _, err := hex.Decode(r.TxID[:], raw[:64]); err == nil {
			if ix, err := strconv.ParseUint(string(raw[65:]), 10, 32); err == nil {
				r.Index = uint32(ix)
				return r, nil
			}
		}
	}
	return chain.ParseTxOutRef(string(raw)) // the result, or the error
}

// plainString reads a string, giving its contents as they are in the frame
// when they hold no escape (the usual case for hex and references), or its
// decoded value.
func plainString(s *scanner) ([]byte, error) {
	if s.peek() != '"' {
		return nil, s.want("a string")
	}
	start := s.i
	raw, special, err := s.stringBytes()
	if err != nil || !special {
		return raw, err
	}
	s.i = start
	v, err := s.str()
	return []byte(v), err
}

// frameTypes are the server frame types.
var frameTypes = []string{protocol.TypeBatch, protocol.TypeSubscribed, protocol.TypeHeartbeat, protocol.TypeError,
	protocol.TypePong, protocol.TypeUnsubscribed}

// frameType reads a frame type: the known ones without allocating.
func frameType(s *scanner) (string, error) {
	raw, err := plainString(s)
	if err != nil {
		return "", err
	}
	for _, t := range frameTypes {
		if string(raw) == t {
			return t, nil
		}
	}
	return string(raw), nil
}

// kind reads a record kind: the known ones without allocating.
func kind(s *scanner) (record.Kind, error) {
	if s.peek() != '"' {
		return "", s.want("a string")
	}
	save := s.i
	raw, special, err := s.stringBytes()
	if err != nil {
		return "", err
	}
	if !special {
		for _, k := range record.Kinds {
			if string(raw) == string(k) {
				return k, nil
			}
		}
	}
	s.i = save
	v, err := s.str()
	return record.Kind(v), err
}
