package marlowe

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
)

// DatumType names a kind of value the datum codec converts between CBOR and JSON.
type DatumType string

// Datum types of the `datum` command.
const (
	TypeMarloweData DatumType = "marlowe-data" // datum of a semantics validator output
	TypeContract    DatumType = "contract"     // a contract (merkleized continuations are contracts)
	TypeState       DatumType = "state"        // a contract state
	TypeRedeemer    DatumType = "redeemer"     // redeemer of a semantics validator: list of inputs
	TypePayoutDatum DatumType = "payout-datum" // datum of a role-payout validator output
	TypePlutusData  DatumType = "plutus-data"  // any Plutus Data, in the cardano-cli detailed schema
)

// DatumTypes lists every datum type, in the order help texts show them.
var DatumTypes = []DatumType{TypeMarloweData, TypeContract, TypeState, TypeRedeemer, TypePayoutDatum, TypePlutusData}

// ParseDatumType checks a datum type name.
func ParseDatumType(s string) (DatumType, error) {
	for _, t := range DatumTypes {
		if string(t) == s {
			return t, nil
		}
	}
	names := make([]string, len(DatumTypes))
	for i, t := range DatumTypes {
		names[i] = string(t)
	}
	return "", fmt.Errorf("unknown type %q (one of %s)", s, strings.Join(names, ", "))
}

// ErrDatumWrapper is wrapped when the input is a transaction output's datum
// option rather than a datum.
var ErrDatumWrapper = errors.New("datum option wrapper")

// ParseHexInput reads hex text as the datum commands take it: surrounding
// white space and an optional 0x prefix are allowed.
func ParseHexInput(text []byte) ([]byte, error) {
	s := strings.TrimSpace(string(text))
	s = strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	if s == "" {
		return nil, errors.New("no input: expected CBOR hex")
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("bad hex: %w", err)
	}
	return b, nil
}

// checkWrapper refuses the datum-option wrappers that tools print around a
// datum: 82 00 <hash> (a datum hash) and 82 01 d8 18 <bytes> (an inline datum).
func checkWrapper(b []byte) error {
	switch {
	case bytes.HasPrefix(b, []byte{0x82, 0x00}):
		return fmt.Errorf("%w: the input starts with 8200, which is cardano-cli's datum wrapper "+
			"(a datum option [0, datum hash]); it holds a hash, not a datum: pass the datum's own CBOR", ErrDatumWrapper)
	case bytes.HasPrefix(b, []byte{0x82, 0x01, 0xd8, 0x18}):
		return fmt.Errorf("%w: the input starts with 8201d818, an inline datum option [1, #6.24(bytes)]; "+
			"pass the datum bytes inside it", ErrDatumWrapper)
	}
	return nil
}

// datumCodec converts the Plutus Data of one datum type to its JSON and
// back.
type datumCodec struct {
	toJSON   func(pd.Data) ([]byte, error)
	fromJSON func([]byte) (pd.Data, error)
}

// codecOf is the datumCodec of a Marlowe type, key naming it in the path of
// an error.
func codecOf[T any](key string, fromData func(pd.Data) (T, error), marshal func(T) ([]byte, error),
	parse func([]byte) (T, error), toData func(T) pd.Data) datumCodec {
	return datumCodec{
		toJSON: func(d pd.Data) ([]byte, error) {
			v, err := fromData(d)
			if err != nil {
				return nil, at(key, err)
			}
			return marshal(v)
		},
		fromJSON: func(text []byte) (pd.Data, error) {
			v, err := parse(text)
			if err != nil {
				return nil, at(key, err)
			}
			return toData(v), nil
		},
	}
}

var datumCodecs = map[DatumType]datumCodec{
	TypePlutusData: {
		toJSON:   func(d pd.Data) ([]byte, error) { return pd.MarshalJSON(d), nil },
		fromJSON: pd.UnmarshalJSON,
	},
	TypeMarloweData: codecOf("marloweData", MarloweDataFromData, (*MarloweData).MarshalJSON, ParseMarloweDataJSON, (*MarloweData).ToData),
	TypeContract:    codecOf("contract", ContractFromData, ContractJSON, ParseContractJSON, ContractToData),
	TypeState:       codecOf("state", StateFromData, (*State).MarshalJSON, ParseStateJSON, (*State).ToData),
	TypeRedeemer:    codecOf("redeemer", RedeemerFromData, Redeemer.MarshalJSON, ParseRedeemerJSON, Redeemer.ToData),
	TypePayoutDatum: codecOf("payoutDatum", PayoutDatumFromData, (*PayoutDatum).MarshalJSON, ParsePayoutDatumJSON, (*PayoutDatum).ToData),
}

// DecodeDatum reads CBOR of the given type and returns its JSON.
func DecodeDatum(t DatumType, cbor []byte) ([]byte, error) {
	if err := checkWrapper(cbor); err != nil {
		return nil, err
	}
	d, err := pd.Decode(cbor)
	if err != nil {
		return nil, err
	}
	c, ok := datumCodecs[t]
	if !ok {
		return nil, fmt.Errorf("unknown type %q", t)
	}
	return c.toJSON(d)
}

// EncodeDatum reads JSON of the given type and returns its canonical CBOR.
func EncodeDatum(t DatumType, text []byte) ([]byte, error) {
	c, ok := datumCodecs[t]
	if !ok {
		return nil, fmt.Errorf("unknown type %q", t)
	}
	d, err := c.fromJSON(text)
	if err != nil {
		return nil, err
	}
	return pd.Encode(d), nil
}
