package breaker

import (
	"fmt"
	"time"

	"github.com/tierguard/tierguard/internal/keyed"
)

// overflowKey names the breaker that keys beyond a Group's limit share.
const overflowKey = "_overflow"

// Group holds one breaker per key — typically model × endpoint — created on
// first use from the same Config. The number of keys is bounded: keys
// beyond the limit share one overflow breaker, so a flood of distinct keys
// cannot grow memory without bound. Group is safe for concurrent use.
//
// A member's Config.Name is cfg.Name+"/"+key; a Store knows it by that name
// (the Redis store keeps only a hash of it). In errors, transitions, logs
// and metrics a member goes by cfg.Name+"/#"+ the first 12 hex digits of
// the key's SHA-256, because a key is often a tenant or user id; set
// Config.KeysInNames to show the keys instead.
type Group struct {
	g *keyed.Group[*Breaker]
}

// NewGroup returns a group of breakers configured by cfg; at most maxKeys
// keys get their own breaker. The config is validated now.
func NewGroup(cfg Config, maxKeys int) (*Group, error) {
	if maxKeys <= 0 {
		return nil, fmt.Errorf("breaker group %q: maxKeys must be positive, got %d", cfg.Name, maxKeys)
	}
	overflow, err := New(member(cfg, overflowKey))
	if err != nil {
		return nil, err
	}
	// The config was validated by the overflow breaker, and every member
	// shares it; only a Store's Join can fail later, and a store must fail
	// open: such a key gets the overflow breaker rather than a refused
	// call.
	norm, _ := cfg.normalize()
	sh := &shared{Config: norm, epoch: time.Now()}
	mk := func(key string) (*Breaker, error) {
		return newShared(sh, key, true)
	}
	return &Group{g: keyed.New(mk, maxKeys, overflow, overflowKey)}, nil
}

func member(cfg Config, key string) Config {
	cfg.Name = cfg.Name + "/" + key
	return cfg
}

// Get returns key's breaker, creating it on first use.
func (g *Group) Get(key string) *Breaker { return g.g.Get(key) }

// Observe calls fn for every member of the group — now, and for each one
// created later, as it is created (under the group's lock: fn must not call
// back into the group) — until the returned function is called.
// Instrumentation uses it to watch members as they appear.
func (g *Group) Observe(fn func(key string, b *Breaker)) (remove func()) { return g.g.OnMember(fn) }

// Each calls fn for every breaker of the group, the overflow one included.
func (g *Group) Each(fn func(key string, b *Breaker)) { g.g.Each(fn) }
