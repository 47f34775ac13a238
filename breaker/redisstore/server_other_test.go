//go:build !linux

package redisstore_test

import (
	"os/exec"
	"time"
)

func dieWithParent(*exec.Cmd) {}

// waitStopped gives a stopped server time to stop: without /proc there is
// no telling.
func waitStopped(int) bool {
	time.Sleep(100 * time.Millisecond)
	return true
}
