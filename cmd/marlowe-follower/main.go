// Command marlowe-follower follows the Cardano chain from a node's local
// socket, recognises Marlowe contract activity and serves it. This file only
// wires the subcommands; their logic lives in the project's packages.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
