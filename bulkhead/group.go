package bulkhead

import (
	"fmt"

	"github.com/tierguard/tierguard/internal/keyed"
)

// OverflowKey names the bulkhead that keys beyond a Group's limit share.
const OverflowKey = "_overflow"

// Group holds one bulkhead per key — per tenant or per feature — so one
// key's load cannot take another key's slots. Bulkheads are created on
// first use with the same size and options. The number of keys is bounded:
// keys beyond the limit share one overflow bulkhead, so a flood of new keys
// cannot grow memory without bound. Group is safe for concurrent use.
//
// A member is named prefix+"/#"+ a short stable hash of its key (see
// WithKeysInNames), because a key is often a tenant id, which must not
// reach errors, logs or metrics; the overflow bulkhead is
// prefix+"/"+OverflowKey.
type Group struct {
	g *keyed.Group[*Bulkhead]
}

// NewGroup returns a group whose bulkheads have max slots each; at most
// maxKeys keys get their own bulkhead. The options are checked now, by
// building the overflow bulkhead.
func NewGroup(prefix string, max, maxKeys int, opts ...Option) (*Group, error) {
	if maxKeys <= 0 {
		return nil, fmt.Errorf("bulkhead group %q: maxKeys must be positive, got %d", prefix, maxKeys)
	}
	overflow, err := New(prefix+"/"+OverflowKey, max, opts...)
	if err != nil {
		return nil, err
	}
	show := overflow.keysInNames
	mk := func(key string) (*Bulkhead, error) { return New(keyed.Name(prefix, key, show), max, opts...) }
	return &Group{g: keyed.New(mk, maxKeys, overflow, OverflowKey)}, nil
}

// Get returns key's bulkhead, creating it on first use.
func (g *Group) Get(key string) *Bulkhead { return g.g.Get(key) }

// OnMember calls fn for every member of the group — now, and for each one
// created later, as it is created (under the group's lock: fn must not call
// back into the group). Instrumentation uses it to watch members as they
// appear.
func (g *Group) OnMember(fn func(key string, b *Bulkhead)) { g.g.OnMember(fn) }

// Each calls fn for every bulkhead of the group, the overflow one included.
func (g *Group) Each(fn func(key string, b *Bulkhead)) { g.g.Each(fn) }
