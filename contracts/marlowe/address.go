package marlowe

import (
	"errors"
	"fmt"
	"math/big"

	"github.com/btcsuite/btcd/btcutil/bech32"
)

// Address parties are shown in JSON as Shelley addresses (CIP-19) in bech32,
// with the human-readable part "addr" on mainnet and "addr_test" on testnets.
// The Haskell encoder refuses pointer addresses; this one writes and reads
// them too (header types 4 and 5), so every address party is shown.

// Bech32 human-readable parts of Shelley payment addresses.
const (
	HRPMainnet = "addr"
	HRPTestnet = "addr_test"
)

// hashSize is the size of a credential hash (blake2b-224).
const hashSize = 28

// maxBech32Length bounds the text accepted as an address. The longest Shelley
// address (a pointer address with three huge pointer fields) stays far below.
const maxBech32Length = 256

// Bytes returns the CIP-19 binary form of an address party: a header byte
// (address type << 4 | network id) followed by the credentials or pointer.
func (pa *PartyAddress) Bytes() ([]byte, error) {
	a := pa.Address
	if len(a.Payment.Hash) != hashSize {
		return nil, fmt.Errorf("payment credential hash has %d bytes; an address needs %d", len(a.Payment.Hash), hashSize)
	}
	if pa.Network > Mainnet {
		return nil, fmt.Errorf("unknown network %d", pa.Network)
	}
	var typ byte
	out := make([]byte, 1, 1+2*hashSize)
	out = append(out, a.Payment.Hash...)
	paymentScript := a.Payment.Kind == ScriptCredential
	switch {
	case a.Staking == nil:
		typ = 6
		if paymentScript {
			typ = 7
		}
	case a.Staking.Pointer != nil:
		typ = 4
		if paymentScript {
			typ = 5
		}
		p := a.Staking.Pointer
		for _, v := range []*big.Int{p.Slot, p.TxIndex, p.CertIndex} {
			if v == nil || v.Sign() < 0 {
				return nil, errors.New("a stake pointer with a negative field cannot be written as an address")
			}
			out = appendVarNat(out, v)
		}
	default:
		if len(a.Staking.Hash.Hash) != hashSize {
			return nil, fmt.Errorf("staking credential hash has %d bytes; an address needs %d", len(a.Staking.Hash.Hash), hashSize)
		}
		if paymentScript {
			typ |= 1
		}
		if a.Staking.Hash.Kind == ScriptCredential {
			typ |= 2
		}
		out = append(out, a.Staking.Hash.Hash...)
	}
	out[0] = typ<<4 | byte(pa.Network)
	return out, nil
}

// Bech32 returns the bech32 text of an address party.
func (pa *PartyAddress) Bech32() (string, error) {
	raw, err := pa.Bytes()
	if err != nil {
		return "", err
	}
	hrp := HRPTestnet
	if pa.Network == Mainnet {
		hrp = HRPMainnet
	}
	return bech32.EncodeFromBase256(hrp, raw)
}

// ParsePartyAddress reads an address party from bech32 text. The
// human-readable part must agree with the network in the header.
func ParsePartyAddress(text string) (*PartyAddress, error) {
	if len(text) > maxBech32Length {
		return nil, fmt.Errorf("address of %d characters is too long", len(text))
	}
	hrp, data, version, err := bech32.DecodeNoLimitWithVersion(text)
	if err != nil {
		return nil, fmt.Errorf("bad bech32 address: %w", err)
	}
	if version != bech32.Version0 {
		return nil, errors.New("bad bech32 address: bech32m checksum, Cardano addresses use bech32")
	}
	raw, err := bech32.ConvertBits(data, 5, 8, false)
	if err != nil {
		return nil, fmt.Errorf("bad bech32 address: %w", err)
	}
	var network Network
	switch hrp {
	case HRPMainnet:
		network = Mainnet
	case HRPTestnet:
		network = Testnet
	default:
		return nil, fmt.Errorf("address prefix %q is neither %q nor %q", hrp, HRPMainnet, HRPTestnet)
	}
	return PartyAddressFromBytes(raw, network)
}

// PartyAddressFromBytes reads the CIP-19 binary form of a Shelley payment
// address whose network must be the given one.
func PartyAddressFromBytes(raw []byte, network Network) (*PartyAddress, error) {
	if len(raw) < 1+hashSize {
		return nil, fmt.Errorf("address of %d bytes is too short", len(raw))
	}
	header := raw[0]
	if Network(header&0x0f) != network {
		return nil, fmt.Errorf("address header names network %d but the prefix names network %d", header&0x0f, network)
	}
	typ := header >> 4
	pa := &PartyAddress{Network: network}
	a := &pa.Address
	payment := raw[1 : 1+hashSize]
	rest := raw[1+hashSize:]
	switch typ {
	case 0, 1, 2, 3:
		if len(rest) != hashSize {
			return nil, fmt.Errorf("base address of %d bytes, want %d", len(raw), 1+2*hashSize)
		}
		a.Payment = Credential{Kind: CredentialKind(typ & 1), Hash: clone(payment)}
		a.Staking = &StakingCredential{Hash: Credential{Kind: CredentialKind(typ >> 1 & 1), Hash: clone(rest)}}
	case 4, 5:
		a.Payment = Credential{Kind: CredentialKind(typ & 1), Hash: clone(payment)}
		ptr := &StakePointer{}
		var err error
		for _, dst := range []**big.Int{&ptr.Slot, &ptr.TxIndex, &ptr.CertIndex} {
			if *dst, rest, err = readVarNat(rest); err != nil {
				return nil, fmt.Errorf("pointer address: %w", err)
			}
		}
		if len(rest) != 0 {
			return nil, fmt.Errorf("pointer address has %d trailing bytes", len(rest))
		}
		a.Staking = &StakingCredential{Pointer: ptr}
	case 6, 7:
		if len(rest) != 0 {
			return nil, fmt.Errorf("enterprise address of %d bytes, want %d", len(raw), 1+hashSize)
		}
		a.Payment = Credential{Kind: CredentialKind(typ & 1), Hash: clone(payment)}
	default:
		return nil, fmt.Errorf("address type %d is not a Shelley payment address", typ)
	}
	return pa, nil
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// appendVarNat writes a natural number as CIP-19 pointers do: big-endian groups
// of seven bits, the high bit set on every byte but the last.
func appendVarNat(dst []byte, v *big.Int) []byte {
	if v.Sign() == 0 {
		return append(dst, 0)
	}
	var groups []byte
	x := new(big.Int).Set(v)
	mask := big.NewInt(0x7f)
	for x.Sign() > 0 {
		groups = append(groups, byte(new(big.Int).And(x, mask).Uint64()))
		x.Rsh(x, 7)
	}
	for i := len(groups) - 1; i >= 0; i-- {
		g := groups[i]
		if i > 0 {
			g |= 0x80
		}
		dst = append(dst, g)
	}
	return dst
}

// maxVarNatBytes bounds a pointer field: 20 groups of seven bits is 140 bits,
// far above any slot or index the chain can reach.
const maxVarNatBytes = 20

func readVarNat(b []byte) (*big.Int, []byte, error) {
	if len(b) > 0 && b[0] == 0x80 {
		return nil, nil, errors.New("pointer field is not minimally encoded")
	}
	v := new(big.Int)
	for i := 0; i < len(b) && i < maxVarNatBytes; i++ {
		v.Lsh(v, 7)
		v.Or(v, big.NewInt(int64(b[i]&0x7f)))
		if b[i]&0x80 == 0 {
			return v, b[i+1:], nil
		}
	}
	if len(b) >= maxVarNatBytes {
		return nil, nil, errors.New("pointer field too long")
	}
	return nil, nil, errors.New("pointer field truncated")
}
