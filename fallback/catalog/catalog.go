package catalog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/internal/detach"
	"github.com/tierguard/tierguard/internal/modelid"
	"github.com/tierguard/tierguard/internal/park"
)

var _ fallback.Catalog = (*Catalog)(nil)

// Catalog is the list of models an API currently serves, for preflight: a
// chain skips a tier whose model is not in it, without an upstream call.
// Retrying a retired model never shows in success latency, only in queues
// that fill with calls certain to fail.
//
// The list comes from a function (for Gemini, models.list). A refresh that
// fails keeps the last good list. A 404 on a tier marks its model retired
// until the next successful refresh. Until the first successful refresh,
// every model is presumed available.
//
// The request path reads an immutable snapshot: one atomic load and a map
// lookup, no lock. Refreshes happen when you call Refresh, or on a timer
// after Start; Stop ends the timer.
type Catalog struct {
	fetch   func(context.Context) ([]string, error)
	ttl     time.Duration
	timeout time.Duration

	snap    atomic.Pointer[catalogSnapshot]
	retired park.Models
	epoch   time.Time

	mu      sync.Mutex
	timer   *time.Timer
	running bool
	stop    context.CancelFunc
	stopCtx context.Context
	lastErr error
	wg      sync.WaitGroup
}

type catalogSnapshot struct {
	loaded bool
	live   map[string]struct{}
	at     time.Time
}

// Options tunes a Catalog.
type Options struct {
	// TTL is the time between refreshes after Start. 0 means 10 minutes.
	TTL time.Duration
	// Timeout bounds one refresh started by the timer. 0 means 10 seconds.
	Timeout time.Duration
}

// New returns a catalog fed by fetch, which returns the ids of the models
// currently served ("gemini-2.5-pro" or "models/gemini-2.5-pro").
func New(fetch func(context.Context) ([]string, error), opts Options) (*Catalog, error) {
	if fetch == nil {
		return nil, errors.New("catalog: a fetch function is required")
	}
	if opts.TTL < 0 || opts.Timeout < 0 {
		return nil, fmt.Errorf("catalog: TTL and Timeout must not be negative, got %v and %v", opts.TTL, opts.Timeout)
	}
	if opts.TTL == 0 {
		opts.TTL = 10 * time.Minute
	}
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second
	}
	c := &Catalog{fetch: fetch, ttl: opts.TTL, timeout: opts.Timeout, epoch: time.Now()}
	c.snap.Store(&catalogSnapshot{})
	return c, nil
}

// Available reports whether model may be called: it is in the last list
// fetched (or no list was fetched yet) and no 404 marked it retired since.
func (c *Catalog) Available(model string) bool {
	if c.retired.Has(model, c.epoch) {
		return false
	}
	s := c.snap.Load()
	if !s.loaded {
		return true
	}
	_, ok := s.live[modelid.Normalize(model)]
	return ok
}

// MarkRetired records that model answered 404 NOT_FOUND: it is skipped
// until the next successful refresh says otherwise.
func (c *Catalog) MarkRetired(model string) { c.retired.Mark(model, c.epoch, math.MaxInt64/2) }

// Refresh fetches the list now. On failure the last good list stays and the
// error is returned (and kept for Err).
func (c *Catalog) Refresh(ctx context.Context) error {
	ids, err := c.fetch(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.lastErr = err
		return fmt.Errorf("catalog: refresh: %w", err)
	}
	live := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		live[modelid.Normalize(id)] = struct{}{}
	}
	c.lastErr = nil
	c.snap.Store(&catalogSnapshot{loaded: true, live: live, at: time.Now()})
	c.retired.Clear()
	return nil
}

// Start refreshes the list in the background now and every TTL after,
// until Stop.
func (c *Catalog) Start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running {
		return
	}
	c.running = true
	c.stopCtx, c.stop = context.WithCancel(context.Background())
	c.timer = time.AfterFunc(0, c.tick)
}

// tick is a background refresh. It runs on the timer's goroutine, where
// nobody could recover a panic of fetch: a refresh that panics (or calls
// runtime.Goexit) is kept for Err as a *fallback.PanicError, the last good list
// stays, and the next refresh is scheduled all the same.
func (c *Catalog) tick() {
	c.mu.Lock()
	if !c.running {
		c.mu.Unlock()
		return
	}
	c.wg.Add(1)
	stopCtx := c.stopCtx
	c.mu.Unlock()
	defer c.wg.Done()

	ctx, cancel := context.WithTimeout(stopCtx, c.timeout)
	defer cancel()
	defer func() {
		c.mu.Lock()
		if c.running {
			c.timer.Reset(c.ttl)
		}
		c.mu.Unlock()
	}()
	detach.Run(func() { _ = c.Refresh(ctx) }, func(o detach.Outcome) {
		if o.Ended() {
			c.mu.Lock()
			c.lastErr = panicError(o)
			c.mu.Unlock()
		}
	})
}

// Stop ends background refreshes, cancelling one in progress and waiting
// for it to return.
func (c *Catalog) Stop() {
	c.mu.Lock()
	c.running = false
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.stop != nil {
		c.stop()
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// Err returns the last refresh's error, nil after a success.
func (c *Catalog) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastErr
}

// Refreshed returns when the list in use was fetched; zero if never.
func (c *Catalog) Refreshed() time.Time { return c.snap.Load().at }

// panicError is a refresh's panic or runtime.Goexit as an error.
func panicError(o detach.Outcome) *fallback.PanicError {
	if o.Goexit {
		return &fallback.PanicError{Value: "runtime.Goexit called"}
	}
	return &fallback.PanicError{Value: o.Panic, Stack: o.Stack}
}
