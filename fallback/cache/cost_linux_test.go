package cache_test

import (
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback/cache"
)

// threadCPU runs f on a goroutine locked to its thread and returns the CPU
// time that thread spent: other processes on a loaded machine do not count,
// as they would in wall-clock time.
func threadCPU(t *testing.T, f func()) time.Duration {
	t.Helper()
	done := make(chan time.Duration)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		before := threadClock(t)
		f()
		done <- threadClock(t) - before
	}()
	return <-done
}

// threadClock reads CLOCK_THREAD_CPUTIME_ID: the calling thread's CPU
// time, to the nanosecond (getrusage counts in scheduler ticks).
func threadClock(t *testing.T) time.Duration {
	const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		t.Error(errno)
	}
	return time.Duration(ts.Nano())
}

// numbers is a hostile prompt of n bytes: "0 1 2 … 9 0 1 …", a number slot
// match every other byte.
func numbers(n int, tag string) string {
	var b strings.Builder
	b.WriteString(tag)
	for i := 0; b.Len() < n; i++ {
		b.WriteString(strconv.Itoa(i % 10))
		b.WriteByte(' ')
	}
	return b.String()[:n]
}

// A hostile prompt costs a template cache about what it costs a cache
// without the template layer: the write-back and a lookup of a prompt
// that big do no template matching. Costs are CPU time of the calling
// thread, the least of three runs, compared as a ratio; and, without the
// race detector, a 1 MiB prompt costs at most 10 ms.
func TestAHugePromptCostsLittleCPU(t *testing.T) {
	for _, size := range []int{16 << 10, 1 << 20} {
		cost := func(cfg cache.Config[string, string]) time.Duration {
			best := time.Duration(1<<63 - 1)
			for run := range 3 {
				c := newCache(t, cfg)
				// A template entry in the scope, so that the lookup below
				// searches the template layer.
				c.Put(bg, "status of order 17", "shipped")
				stored, asked := numbers(size, "a"+strconv.Itoa(run)), numbers(size, "b"+strconv.Itoa(run))
				runtime.GC() // the test's own garbage is not the cache's cost
				cpu := threadCPU(t, func() {
					c.Put(bg, stored, "an answer")
					_, _, ok := c.Get(bg, asked)
					assert.False(t, ok)
				})
				best = min(best, cpu)
			}
			return best
		}
		withTemplates := cost(cache.Config[string, string]{})
		exactOnly := cost(cache.Config[string, string]{Template: cache.TemplateConfig[string]{Disabled: true}})
		t.Logf("%d KiB prompt: %v of CPU with the template layer, %v without", size>>10, withTemplates, exactOnly)
		require.LessOrEqual(t, float64(withTemplates), 3*float64(exactOnly)+float64(time.Millisecond),
			"a %d KiB prompt: the template layer costs %v on top of the exact layer's %v", size>>10, withTemplates-exactOnly, exactOnly)
		if !raceEnabled && size == 1<<20 {
			assert.LessOrEqual(t, withTemplates, 10*time.Millisecond, "a 1 MiB prompt, written and looked up")
		}
	}
}
