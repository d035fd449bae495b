//go:build race

package model_test

// raceEnabled: the race detector makes sync.Pool drop items at random, so allocation counts
// mean nothing.
const raceEnabled = true
