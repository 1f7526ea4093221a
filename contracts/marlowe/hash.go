package marlowe

import (
	"golang.org/x/crypto/blake2b"

	pd "github.com/marlowe-follower/follower/contracts/plutusdata"
)

// DatumHash is the blake2b-256 hash of a datum's CBOR bytes, as the ledger
// computes it. Hash the bytes found on chain, not a re-encoding, when they
// are at hand: the ledger hashes whatever bytes the transaction carried.
func DatumHash(datumCBOR []byte) [32]byte {
	return blake2b.Sum256(datumCBOR)
}

// DataHash is the hash of d in its canonical encoding.
func DataHash(d pd.Data) [32]byte {
	return DatumHash(pd.Encode(d))
}

// ContinuationHash is the merkleization hash of a contract: the datum hash of
// its canonical Plutus Data encoding. A MerkleizedCase holds the hash of its
// continuation; the transaction that takes the case supplies the continuation
// as a datum with this hash.
func ContinuationHash(ct Contract) [32]byte {
	return DataHash(ContractToData(ct))
}
