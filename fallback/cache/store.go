package cache

import (
	"context"
	"encoding/json"
	"time"
)

// Record is an entry as a Store shares it.
type Record struct {
	// ID identifies the entry: a hash of its scope and exact key, the
	// same in every process.
	ID uint64 `json:"id"`
	// Tenant and Scenario are the entry's scope (empty when shared).
	Tenant   string `json:"tenant,omitempty"`
	Scenario string `json:"scenario,omitempty"`
	// Key is the normalised prompt.
	Key string `json:"key"`
	// Template and Vars are the prompt's template, if it has one.
	Template string `json:"template,omitempty"`
	Vars     []Var  `json:"vars,omitempty"`
	Free     []bool `json:"free,omitempty"`
	// Model is the model that produced the answer.
	Model string `json:"model,omitempty"`
	// Answer is the answer, encoded with the cache's Codec.
	Answer []byte `json:"answer"`
	// Vector is the prompt's unit embedding; empty without one.
	Vector []float32 `json:"vector,omitempty"`
	// Expires is when the entry stops being served.
	Expires time.Time `json:"expires"`
}

// Selector says which entries an invalidation drops: those of one ID, of
// one Tenant, or of one Model (the first field set decides).
type Selector struct {
	ID     uint64 `json:"id,omitempty"`
	Tenant string `json:"tenant,omitempty"`
	Model  string `json:"model,omitempty"`
}

// Change is what a Store tells the caches that observe it.
type Change struct {
	// Saved are records another process saved, or a resync found.
	Saved []*Record
	// Invalidated, when set, is an invalidation another process made.
	Invalidated *Selector
	// Live, when set, lists the ID of every record the store holds: the
	// cache drops the entries it learned from the store that are not in
	// it (records invalidated or expired while this process was not
	// listening).
	Live map[uint64]struct{}
}

// Store shares entries among processes. The cache saves every written
// entry (after its embedding, on its own goroutine) and applies the
// changes the store reports; lookups never wait for it, and a store that
// is down leaves every process with its local entries.
type Store interface {
	// Save shares rec.
	Save(ctx context.Context, rec *Record) error
	// Invalidate drops the records sel matches and tells the other
	// processes.
	Invalidate(ctx context.Context, sel Selector) error
	// Observe calls fn with the changes other processes make, on the
	// store's goroutine, and with the records the store holds when it
	// starts; it returns the function that stops the calls.
	Observe(fn func(Change)) (remove func())
}

// Codec encodes answers for a Store.
type Codec[Out any] interface {
	Marshal(out Out) ([]byte, error)
	Unmarshal(data []byte) (Out, error)
}

// JSON is a Codec that uses encoding/json.
type JSON[Out any] struct{}

// Marshal implements Codec.
func (JSON[Out]) Marshal(out Out) ([]byte, error) { return json.Marshal(out) }

// Unmarshal implements Codec.
func (JSON[Out]) Unmarshal(data []byte) (Out, error) {
	var out Out
	err := json.Unmarshal(data, &out)
	return out, err
}
