//go:build race

package storage

// raceEnabled says the race detector is on: the big cases shrink.
const raceEnabled = true
