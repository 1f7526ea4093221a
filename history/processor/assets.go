package processor

import (
	"encoding/hex"
	"encoding/json"
	"strconv"

	"github.com/marlowe-follower/follower/chainsync/block"
	"github.com/marlowe-follower/follower/contracts/marlowe"
	"github.com/marlowe-follower/follower/history/record"
)

// AssetsOf converts a ledger value.
func AssetsOf(v block.Value) record.Assets {
	a := record.Assets{Lovelace: v.Lovelace, Tokens: map[string]map[string]json.Number{}}
	for _, t := range v.Assets {
		p := t.Policy.String()
		if a.Tokens[p] == nil {
			a.Tokens[p] = map[string]json.Number{}
		}
		a.Tokens[p][marlowe.NameText(t.Name)] = json.Number(strconv.FormatUint(t.Quantity, 10))
	}
	return a
}

// hexString is the lowercase hex of b.
func hexString(b []byte) string { return hex.EncodeToString(b) }
