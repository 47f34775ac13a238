//go:build !unix

package benchcmp

import "time"

// cpuTime is not measured on this platform: cpu-ns/op is not reported.
func cpuTime() time.Duration { return 0 }
