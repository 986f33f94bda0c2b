//go:build race

package gentools_test

// raceEnabled: this binary runs under the race detector.
const raceEnabled = true
