package chain

import (
	"encoding/hex"

	"github.com/btcsuite/btcd/btcutil/bech32"
)

// AddressText shows an address: a Shelley address (header types 0 to 7) in
// bech32 with "addr" on mainnet and "addr_test" elsewhere, any other
// address (Byron, malformed) in hex.
func AddressText(raw []byte) string {
	if len(raw) > 0 && raw[0]>>4 <= 7 {
		hrp := "addr_test"
		if raw[0]&0x0f == 1 {
			hrp = "addr"
		}
		if s, err := bech32.EncodeFromBase256(hrp, raw); err == nil {
			return s
		}
	}
	return hex.EncodeToString(raw)
}
