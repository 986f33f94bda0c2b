//go:build !race

package compat_test

const raceEnabled = false
