package main

import "github.com/marlowe-follower/follower/chainsync/waitfor"

// The waits of the kit (chainsync/waitfor) under this package's names.
var (
	waitUntil = waitfor.Until   // (t, d, what, cond): how long it took
	checkFor  = waitfor.NoError // (t, d, cond): fails with cond's last error
	holdsFor  = waitfor.Holds   // (t, d, what, cond)
	poll      = waitfor.Poll    // (d, cond): whether cond held within d
)
