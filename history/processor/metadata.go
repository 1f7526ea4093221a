package processor

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/marlowe-follower/follower/chainsync/block"
)

// Transaction metadata (CBOR "metadatum" values) shown as JSON without a
// schema, as cardano-cli shows it: integers as numbers, text as strings,
// byte strings as "0x" and hex, lists as arrays, maps as objects whose keys
// are a text key's text, an integer's decimal, a byte string's "0x" and hex,
// or the JSON of a list or map key.

// maxMetadataDepth bounds nesting; metadata is bounded by the transaction size anyway.
const maxMetadataDepth = 256

type metaReader struct {
	b   []byte
	pos int
}

var errMetadata = errors.New("malformed metadata")

func (r *metaReader) head() (major byte, arg uint64, indef bool, err error) {
	if r.pos >= len(r.b) {
		return 0, 0, false, errMetadata
	}
	ib := r.b[r.pos]
	r.pos++
	major, info := ib>>5, ib&0x1f
	switch {
	case info < 24:
		return major, uint64(info), false, nil
	case info <= 27:
		n := 1 << (info - 24)
		if len(r.b)-r.pos < n {
			return 0, 0, false, errMetadata
		}
		buf := make([]byte, 8)
		copy(buf[8-n:], r.b[r.pos:r.pos+n])
		r.pos += n
		return major, binary.BigEndian.Uint64(buf), false, nil
	case info == 31 && major >= 2 && major <= 5:
		return major, 0, true, nil
	}
	return 0, 0, false, errMetadata
}

func (r *metaReader) isBreak() bool {
	if r.pos < len(r.b) && r.b[r.pos] == 0xff {
		r.pos++
		return true
	}
	return false
}

// more reports whether a container of arg items, or an indefinite one
// (read up to its break, which it consumes), has an item after the first i.
func (r *metaReader) more(indef bool, arg, i uint64) bool {
	if indef {
		return !r.isBreak()
	}
	return i < arg
}

// value reads one metadatum as a JSON-ready Go value: *big.Int, string
// (text), []byte, []any or metaMap.
func (r *metaReader) value(depth int) (any, error) {
	if depth > maxMetadataDepth {
		return nil, errMetadata
	}
	major, arg, indef, err := r.head()
	if err != nil {
		return nil, err
	}
	switch major {
	case 0:
		return new(big.Int).SetUint64(arg), nil
	case 1:
		v := new(big.Int).SetUint64(arg)
		return v.Neg(v).Sub(v, big.NewInt(1)), nil
	case 2, 3:
		var out []byte
		if !indef {
			if arg > uint64(len(r.b)-r.pos) {
				return nil, errMetadata
			}
			out = r.b[r.pos : r.pos+int(arg)]
			r.pos += int(arg)
		} else {
			for !r.isBreak() {
				m, n, ci, err := r.head()
				if err != nil || m != major || ci || n > uint64(len(r.b)-r.pos) {
					return nil, errMetadata
				}
				out = append(out, r.b[r.pos:r.pos+int(n)]...)
				r.pos += int(n)
			}
		}
		if major == 3 {
			return string(out), nil
		}
		return append([]byte{}, out...), nil
	case 4:
		var items []any
		for i := uint64(0); r.more(indef, arg, i); i++ {
			v, err := r.value(depth + 1)
			if err != nil {
				return nil, err
			}
			items = append(items, v)
		}
		if items == nil {
			items = []any{}
		}
		return items, nil
	case 5:
		m := metaMap{}
		for i := uint64(0); r.more(indef, arg, i); i++ {
			k, err := r.value(depth + 1)
			if err != nil {
				return nil, err
			}
			v, err := r.value(depth + 1)
			if err != nil {
				return nil, err
			}
			m = append(m, [2]any{k, v})
		}
		return m, nil
	case 6: // a tagged value (bignums): show the value inside
		return r.value(depth + 1)
	}
	return nil, errMetadata
}

// metaMap keeps map entries in order.
type metaMap [][2]any

func toJSONValue(v any) any {
	switch x := v.(type) {
	case *big.Int:
		return json.Number(x.String())
	case []byte:
		return "0x" + hex.EncodeToString(x)
	case string:
		if !utf8.ValidString(x) {
			return "0x" + hex.EncodeToString([]byte(x))
		}
		return x
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = toJSONValue(e)
		}
		return out
	case metaMap:
		out := make(map[string]any, len(x))
		for _, kv := range x {
			out[mapKey(kv[0])] = toJSONValue(kv[1])
		}
		return out
	}
	return nil
}

// mapKey shows a map key as cardano-cli (cardano-api's
// metadataValueToJsonNoSchema) does: a text key as its text, an integer
// in decimal, a byte string as "0x" and hex, a list or map as its JSON.
func mapKey(k any) string {
	switch x := k.(type) {
	case string:
		if !utf8.ValidString(x) {
			return "0x" + hex.EncodeToString([]byte(x))
		}
		return x
	case *big.Int:
		return x.String()
	case []byte:
		return "0x" + hex.EncodeToString(x)
	}
	js, _ := json.Marshal(toJSONValue(k))
	return string(js)
}

// MetadatumJSON shows a metadatum's CBOR as JSON; malformed CBOR is shown
// as {"cbor": hex}.
func MetadatumJSON(raw []byte) json.RawMessage {
	r := &metaReader{b: raw}
	v, err := r.value(0)
	if err == nil && r.pos == len(raw) {
		if js, err := json.Marshal(toJSONValue(v)); err == nil {
			return js
		}
	}
	js, _ := json.Marshal(map[string]string{"cbor": hex.EncodeToString(raw)})
	return js
}

// MetadataJSON shows every label of a transaction's metadata.
func MetadataJSON(md []block.Metadatum) map[string]json.RawMessage {
	if len(md) == 0 {
		return nil
	}
	out := make(map[string]json.RawMessage, len(md))
	for _, m := range md {
		out[strconv.FormatUint(m.Label, 10)] = MetadatumJSON(m.Value)
	}
	return out
}

// ParseMarloweTags reads Marlowe tags from the value under metadata label
// 1564: [version, tags, ?continuationsURI] with version 1 (a tag is text or
// [text, payload]) or 2 (a tag is [chunked text] or [chunked text, payload],
// chunked text being a text or a list of texts). A tag without payload maps
// to null. Later duplicates win, as in the Marlowe Runtime.
func ParseMarloweTags(raw []byte) (map[string]json.RawMessage, error) {
	r := &metaReader{b: raw}
	v, err := r.value(0)
	if err != nil || r.pos != len(raw) {
		return nil, fmt.Errorf("marlowe metadata: %w", errMetadata)
	}
	top, ok := v.([]any)
	if !ok || len(top) < 2 {
		return nil, errors.New("marlowe metadata: not [version, tags, ...]")
	}
	ver, ok := top[0].(*big.Int)
	if !ok || (ver.Cmp(big.NewInt(1)) != 0 && ver.Cmp(big.NewInt(2)) != 0) {
		return nil, errors.New("marlowe metadata: unknown version")
	}
	items, ok := top[1].([]any)
	if !ok {
		return nil, errors.New("marlowe metadata: tags are not a list")
	}
	tags := map[string]json.RawMessage{}
	null := json.RawMessage("null")
	for _, it := range items {
		var name any
		var payload any
		hasPayload := false
		switch x := it.(type) {
		case string:
			if ver.Int64() != 1 {
				return nil, errors.New("marlowe metadata: a version 2 tag must be a list")
			}
			name = x
		case []any:
			if len(x) == 0 || len(x) > 2 {
				return nil, errors.New("marlowe metadata: a tag must be [tag] or [tag, payload]")
			}
			name = x[0]
			if len(x) == 2 {
				payload, hasPayload = x[1], true
			}
		default:
			return nil, errors.New("marlowe metadata: malformed tag")
		}
		text, err := chunkedText(name, ver.Int64() == 2)
		if err != nil {
			return nil, err
		}
		tags[text] = null
		if hasPayload {
			js, err := json.Marshal(toJSONValue(payload))
			if err != nil {
				return nil, err
			}
			tags[text] = js
		}
	}
	return tags, nil
}

func chunkedText(v any, chunksAllowed bool) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case []any:
		if !chunksAllowed {
			break
		}
		var b strings.Builder
		for _, c := range x {
			s, ok := c.(string)
			if !ok {
				return "", errors.New("marlowe metadata: a tag chunk is not text")
			}
			b.WriteString(s)
		}
		return b.String(), nil
	}
	return "", errors.New("marlowe metadata: a tag is not text")
}
