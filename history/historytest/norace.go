//go:build !race

package historytest

// raceEnabled reports whether the race detector is on.
const raceEnabled = false
