module github.com/marlowe-follower/follower

go 1.26.8

require (
	github.com/btcsuite/btcd/btcutil v1.2.0
	github.com/spf13/cobra v1.10.2
	golang.org/x/crypto v0.55.0
)

require (
	github.com/blinklabs-io/plutigo v0.3.0 // indirect
	github.com/fxamacker/cbor/v2 v2.9.2 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	github.com/x448/float16 v0.8.4 // indirect
	golang.org/x/sys v0.47.0 // indirect
)
