package bulkhead

import (
	"testing"
	"unsafe"
)

// TestStateHasALineOfItsOwn guards the layout of the fast path: the
// fields it reads (max, flags) on one cache line, the word every call
// writes (state) alone on the next, so that a core reading the flags does
// not fetch the line another core is writing. A Bulkhead is two lines,
// its size class one of 64-byte-aligned objects.
func TestStateHasALineOfItsOwn(t *testing.T) {
	var b Bulkhead
	if size := unsafe.Sizeof(b); size != 2*cacheLine {
		t.Errorf("a Bulkhead is %d bytes, want %d", size, 2*cacheLine)
	}
	if off := unsafe.Offsetof(b.state); off != cacheLine {
		t.Errorf("state is at offset %d, want %d (the second line, alone)", off, cacheLine)
	}
	for name, off := range map[string]uintptr{"max": unsafe.Offsetof(b.max), "flags": unsafe.Offsetof(b.flags), "extra": unsafe.Offsetof(b.extra)} {
		if off >= cacheLine {
			t.Errorf("%s is at offset %d, want it on the first line", name, off)
		}
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

// TestUndoAfterAReleaseWithoutAcquire: a Release without Acquire that
// takes the slot a refused acquisition counted for an instant leaves the
// count right once the acquisition undoes its add.
func TestUndoAfterAReleaseWithoutAcquire(t *testing.T) {
	b, err := New(Config{Name: "b", Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !b.TryAcquire() {
		t.Fatal("refused a free slot")
	}
	b.state.Add(grant) // a refused acquisition's add, not yet undone
	b.Release()
	b.Release() // one too many: it takes the refused acquisition's slot
	b.undo()
	if s := b.Stats(); s.InFlight != 0 || s.Accepted != 1 {
		t.Errorf("Stats = %+v, want nothing in flight and one accepted", s)
	}
	if !b.TryAcquire() || b.TryAcquire() {
		t.Error("the bulkhead no longer holds one slot")
	}
}
