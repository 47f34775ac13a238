package bulkhead

import (
	"testing"
	"unsafe"
)

// TestHotFieldsAreALineApart guards the layout that keeps the counters
// every call writes off the lines other fields are read from.
func TestHotFieldsAreALineApart(t *testing.T) {
	var b Bulkhead
	apart := func(what string, before, after uintptr, size uintptr) {
		t.Helper()
		if after-(before+size) < cacheLine {
			t.Errorf("%s: %d bytes apart, want at least %d", what, after-(before+size), cacheLine)
		}
	}
	apart("read-mostly fields and the queue length", unsafe.Offsetof(b.observers), unsafe.Offsetof(b.waiting), unsafe.Sizeof(b.observers))
	apart("the queue length and the slots", unsafe.Offsetof(b.queued), unsafe.Offsetof(b.inflight), unsafe.Sizeof(b.queued))
	apart("the slots and the refusals", unsafe.Offsetof(b.accepted), unsafe.Offsetof(b.rejected), unsafe.Sizeof(b.accepted))
	apart("the refusals and the locks", unsafe.Offsetof(b.rejected), unsafe.Offsetof(b.obsMu), unsafe.Sizeof(b.rejected))
}
