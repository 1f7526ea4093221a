//go:build race

package main

// raceEnabled is true when the test binary is built with -race. The quick
// suite then measures the race detector rather than the code, and takes four
// times as long; scripts/test.sh runs it in a step of its own without -race.
const raceEnabled = true
