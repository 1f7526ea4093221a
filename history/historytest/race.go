//go:build race

package historytest

// raceEnabled: the race detector slows the pure-Go SQLite driver several
// times over, so the large history test is smaller under it.
const raceEnabled = true
