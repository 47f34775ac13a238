//go:build !race

package striped_test

const raceEnabled = false
