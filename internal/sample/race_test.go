//go:build race

package sample

// raceEnabled: the race detector makes sync.Pool drop items at random.
const raceEnabled = true
