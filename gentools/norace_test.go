//go:build !race

package gentools_test

const raceEnabled = false
