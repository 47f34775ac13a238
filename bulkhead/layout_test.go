package bulkhead

import (
	"testing"
	"unsafe"
)

// TestFastPathFieldsShareALine guards the layout that keeps an idle
// bulkhead small and a slot taken and returned on one cache line: a
// Bulkhead is one line, the word every call writes and every field the
// fast path reads included.
func TestFastPathFieldsShareALine(t *testing.T) {
	var b Bulkhead
	if size := unsafe.Sizeof(b); size > cacheLine {
		t.Errorf("a Bulkhead is %d bytes, want at most %d", size, cacheLine)
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
