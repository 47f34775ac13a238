//go:build unix

package benchcmp

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user + system) the process has used. On a
// shared machine it does not grow while the process waits for a CPU, so
// cpu-ns/op is steadier than sec/op, which is wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
