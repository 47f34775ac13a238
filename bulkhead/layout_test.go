package bulkhead

import (
	"testing"
	"unsafe"
)

// TestFastPathFieldsShareALine guards the layout that makes a slot taken
// and returned move one cache line: the word every call writes and every
// field the fast path reads lie in the struct's first line.
func TestFastPathFieldsShareALine(t *testing.T) {
	var b Bulkhead
	for name, end := range map[string]uintptr{
		"state":       unsafe.Offsetof(b.state) + unsafe.Sizeof(b.state),
		"waiting":     unsafe.Offsetof(b.waiting) + unsafe.Sizeof(b.waiting),
		"observers":   unsafe.Offsetof(b.observers) + unsafe.Sizeof(b.observers),
		"cfg.Max":     unsafe.Offsetof(b.cfg) + unsafe.Offsetof(b.cfg.Max) + unsafe.Sizeof(b.cfg.Max),
		"cfg.MaxWait": unsafe.Offsetof(b.cfg) + unsafe.Offsetof(b.cfg.MaxWait) + unsafe.Sizeof(b.cfg.MaxWait),
	} {
		if end > cacheLine {
			t.Errorf("%s ends at byte %d, past the first line (%d)", name, end, cacheLine)
		}
	}
	// A Group holds one per key: no padding.
	if size := unsafe.Sizeof(b); size > 192 {
		t.Errorf("a Bulkhead is %d bytes, want at most 192", size)
	}
}

// TestAcceptedCountsPastItsWord: the count of acquisitions kept above the
// slots in state wraps into wraps, and Stats adds both.
func TestAcceptedCountsPastItsWord(t *testing.T) {
	b, err := New(Config{Name: "b", Max: 2})
	if err != nil {
		t.Fatal(err)
	}
	b.state.Store(uint64(inFlightMask) << 32) // 2^32 − 1 accepted, none in flight
	for range 3 {
		if !b.TryAcquire() {
			t.Fatal("refused a free slot")
		}
		b.Release()
	}
	if s := b.Stats(); s.Accepted != 1<<32-1+3 || s.InFlight != 0 {
		t.Errorf("Stats = %+v, want Accepted %d and nothing in flight", s, uint64(1<<32-1+3))
	}
}
