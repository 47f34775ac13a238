package hnsw

import "slices"

// heap is a binary max-heap of items by sim.
type heap struct{ a []item }

func (h *heap) reset()    { h.a = h.a[:0] }
func (h *heap) len() int  { return len(h.a) }
func (h *heap) top() item { return h.a[0] }

func (h *heap) push(slot uint32, sim float32) {
	h.a = append(h.a, item{slot: slot, sim: sim})
	i := len(h.a) - 1
	for i > 0 {
		p := (i - 1) / 2
		if h.a[p].sim >= h.a[i].sim {
			break
		}
		h.a[p], h.a[i] = h.a[i], h.a[p]
		i = p
	}
}

func (h *heap) pop() item {
	top := h.a[0]
	last := len(h.a) - 1
	h.a[0] = h.a[last]
	h.a = h.a[:last]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && h.a[l].sim > h.a[m].sim {
			m = l
		}
		if r < last && h.a[r].sim > h.a[m].sim {
			m = r
		}
		if m == i {
			break
		}
		h.a[i], h.a[m] = h.a[m], h.a[i]
		i = m
	}
	return top
}

// drainDescending empties a heap of negated similarities and returns its
// items most similar first, with their similarities restored. The slice
// is the heap's own: valid until its next use.
func (h *heap) drainDescending() []item {
	out := h.a
	// Popping yields the least similar first: fill from the back.
	n := len(out)
	for i := n - 1; i >= 0; i-- {
		it := h.pop()
		it.sim = -it.sim
		// pop shrinks h.a, whose backing array is out's: position i is
		// free once the heap holds i items.
		out[:n][i] = it
	}
	return out[:n]
}

// sortItems sorts items most similar first.
func sortItems(a []item) {
	slices.SortFunc(a, func(x, y item) int {
		switch {
		case x.sim > y.sim:
			return -1
		case x.sim < y.sim:
			return 1
		}
		return 0
	})
}
