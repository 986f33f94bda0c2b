//go:build race

package compat_test

// raceEnabled: this binary runs under the race detector.
const raceEnabled = true
