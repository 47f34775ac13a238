package striped

import (
	"sync"
	"sync/atomic"
)

// stripes is the number of stripes: more than the cores that add at once
// on most machines, few enough that a read stays cheap.
const stripes = 8

// Counter is a count spread over stripes. The zero value is zero and
// ready to use. It is 576 bytes: each stripe's word is a cache line away
// from the next, so that cores adding at once write different lines, and
// the first is a line into the counter: on the machine measured, two
// cores adding, one to the word at the start of the counter's allocation,
// took four times as long as adding to two other lines of it. Embedded in
// a struct, its last word may share a line with the field after it.
type Counter struct {
	_       [64]byte
	stripes [stripes]struct {
		n atomic.Uint64
		_ [56]byte
	}
}

// Add adds n to the stripe of the processor the goroutine runs on, as a
// token from a sync.Pool tells (a pool keeps one per processor). A stripe
// picked at random would move its line from core to core on most
// additions, and cost more in parallel than one shared word. Starting on
// one word and spreading once two additions collided on it (as Java's
// LongAdder does) spread too late: the word's line moved from core to
// core on every addition while its compare-and-swaps rarely failed.
func (c *Counter) Add(n uint64) {
	t := tokens.Get().(*token)
	c.stripes[t.stripe].n.Add(n)
	tokens.Put(t)
}

// Load returns the sum of every addition that happened before it;
// additions concurrent with it may or may not be counted.
func (c *Counter) Load() uint64 {
	var n uint64
	for i := range c.stripes {
		n += c.stripes[i].n.Load()
	}
	return n
}

// token is a processor's stripe, the same for every Counter.
type token struct{ stripe uint32 }

// stripeTokens are the tokens the pool hands out, one per stripe: made
// once, never written, so that a token the pool dropped (at a collection,
// or at random under the race detector) is replaced without allocating.
var stripeTokens = func() (ts [stripes]token) {
	for i := range ts {
		ts[i].stripe = uint32(i)
	}
	return ts
}()

// nextStripe numbers the tokens the pool makes: those made one after
// another, as the processors make theirs, name different stripes.
var nextStripe atomic.Uint32

// tokens hands each processor its token. It is the process's, not a
// Counter's, because it holds no count, only which stripe a processor
// adds to: one pool serves every counter, where one per counter would
// cost a breaker group a pool per key.
var tokens = sync.Pool{New: func() any { return &stripeTokens[nextStripe.Add(1)%stripes] }}
