package bulkhead_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tierguard/tierguard/bulkhead"
)

// FuzzBulkhead builds bulkheads from arbitrary sizes and waits and drives
// them with arbitrary sequences of acquisitions and releases against a
// model: an invalid configuration is refused with an error naming the
// field; a valid one never holds more than its size, never lets a Release
// without an Acquire raise its limit, and reports what the model expects.
func FuzzBulkhead(f *testing.F) {
	f.Add(2, int64(0), 0, []byte{0, 0, 0, 2, 1, 2, 2, 2, 3})
	f.Add(1, int64(time.Millisecond), 1, []byte{1, 1, 2, 2, 3})
	f.Add(0, int64(0), 0, []byte{0})
	f.Add(-5, int64(-1), -1, []byte{})
	f.Add(1<<40, int64(1<<62), 1<<30, []byte{0, 1, 0, 1, 3, 2, 2, 2})
	f.Add(3, int64(-time.Second), 5, []byte{})
	f.Fuzz(func(t *testing.T, size int, wait int64, queue int, ops []byte) {
		waits := wait != 0 || queue != 0
		b, err := bulkhead.New(bulkhead.Config{Name: "fz", Max: size, MaxWait: time.Duration(wait), Queue: queue})
		valid := size > 0 && size <= 1<<31-1 && (!waits || wait > 0 && queue > 0)
		if err != nil {
			if valid {
				t.Fatalf("valid config refused: %v", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, `bulkhead "fz"`) || (size <= 0 || size > 1<<31-1) && !strings.Contains(msg, "Max") ||
				size > 0 && size <= 1<<31-1 && wait < 0 && !strings.Contains(msg, "MaxWait") || size > 0 && size <= 1<<31-1 && wait >= 0 && queue != 0 && !strings.Contains(msg, "Queue") {
				t.Fatalf("error does not name the field: %v", err)
			}
			return
		}
		if !valid {
			t.Fatalf("invalid config accepted: size %d, wait %v, queue %d", size, time.Duration(wait), queue)
		}
		canceled, cancel := context.WithCancel(context.Background())
		cancel()
		held := 0
		var accepted, rejected uint64
		for i, op := range ops {
			if i == 512 {
				break
			}
			switch op % 4 {
			case 0:
				got := b.TryAcquire()
				if got != (held < size) {
					t.Fatalf("TryAcquire = %v with %d of %d held", got, held, size)
				}
				if got {
					held++
					accepted++
				} else {
					rejected++
				}
			case 1:
				// A cancelled context never blocks: a free slot is taken,
				// otherwise the bulkhead refuses at once.
				err := b.Acquire(canceled)
				switch {
				case held < size && err != nil:
					t.Fatalf("Acquire refused a free slot: %v", err)
				case held < size:
					held++
					accepted++
				case err == nil:
					t.Fatalf("Acquire took slot %d of %d", held+1, size)
				case !errors.Is(err, bulkhead.ErrFull) && !errors.Is(err, context.Canceled):
					t.Fatalf("Acquire: %v", err)
				default:
					rejected++
				}
			case 2:
				if held == 0 {
					func() {
						defer func() {
							if recover() == nil {
								t.Fatalf("Release without Acquire did not panic")
							}
						}()
						b.Release()
					}()
				} else {
					b.Release()
					held--
				}
			case 3:
				s := b.Stats()
				if s.InFlight != held || s.Waiting != 0 || s.Max != size || s.Accepted != accepted || s.Rejected != rejected {
					t.Fatalf("Stats %+v, want %d held of %d, %d accepted, %d rejected", s, held, size, accepted, rejected)
				}
			}
		}
		for ; held > 0; held-- {
			b.Release()
		}
		if s := b.Stats(); s.InFlight != 0 {
			t.Fatalf("%d slots left", s.InFlight)
		}
	})
}
