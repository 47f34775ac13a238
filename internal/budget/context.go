package budget

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Context is a context that ends at a deadline, or when its parent ends, or
// when Cancel is called. Unlike context.WithDeadline it costs one
// allocation until someone asks for Done: its channel, its timer and its
// link to the parent are made then, and only then. An attempt whose tier
// never waits on its context — a cache, a local model, a benchmark — pays
// for a deadline it never uses with nothing but that allocation; an HTTP
// call, which does wait, pays what a deadline strictly needs.
//
// It implements AfterFunc, so contexts derived from it with the context
// package (net/http derives one per request) are cancelled through it
// without a goroutine. Values come from the parent.
type Context struct {
	parent   context.Context
	deadline time.Time

	mu       sync.Mutex
	done     chan struct{}
	err      error
	timer    *time.Timer
	unlink   func() bool // stops watching the parent
	afters   []*afterFunc
	armed    bool
	canceled bool // by Cancel, not by the deadline or the parent
	// ended is set, after err, once the context has ended: Err reads it
	// without the lock, and takes the lock only when the context has
	// ended or is found to end.
	ended atomic.Bool
}

type afterFunc struct {
	f    func()
	once sync.Once
}

// closed is a channel that is always closed.
var closed = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// NewContext returns a context that ends at deadline or with parent,
// whichever comes first. A zero deadline means none: the context ends with
// its parent or by Cancel.
func NewContext(parent context.Context, deadline time.Time) *Context {
	return &Context{parent: parent, deadline: deadline}
}

// Init makes c, a zero Context, one that NewContext(parent, deadline)
// would return, for a Context held inside a larger value: one allocation
// fewer. It must not be called on a Context in use.
func (c *Context) Init(parent context.Context, deadline time.Time) {
	c.parent, c.deadline = parent, deadline
}

// Deadline returns the context's deadline, if it has one.
func (c *Context) Deadline() (time.Time, bool) { return c.deadline, !c.deadline.IsZero() }

// Value returns the parent's value for key.
func (c *Context) Value(key any) any { return c.parent.Value(key) }

// Done returns a channel closed when the context ends. The first call arms
// the deadline's timer and links the context to its parent.
func (c *Context) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armLocked()
	return c.done
}

// Err returns nil while the context lives, then why it ended:
// context.DeadlineExceeded once the deadline has passed (read from the
// clock, so it holds even before anyone armed the timer), the parent's
// error once the parent ended, context.Canceled after Cancel.
func (c *Context) Err() error {
	// The common case, a live context, without the lock: Err runs several
	// times per request, and a contended lock costs more than the checks.
	if !c.ended.Load() && c.parent.Err() == nil && !c.pastDeadline() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		if perr := c.parent.Err(); perr != nil {
			c.endLocked(perr)
		} else if c.pastDeadline() {
			c.endLocked(context.DeadlineExceeded)
		}
	}
	return c.err
}

// pastDeadline reads the monotonic clock alone (time.Until's fast path)
// rather than time.Now's wall and monotonic clocks: it runs on every Err,
// several times per request.
func (c *Context) pastDeadline() bool { return !c.deadline.IsZero() && time.Until(c.deadline) <= 0 }

// AfterFunc arranges for f to run in its own goroutine once the context
// ends, as context.AfterFunc does; the returned stop prevents it if it has
// not started. The context package uses it to cancel contexts derived from
// this one without starting a goroutine per derived context.
func (c *Context) AfterFunc(f func()) (stop func() bool) {
	a := &afterFunc{f: f}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		a.once.Do(func() { go a.f() })
		return func() bool { return false }
	}
	c.armLocked()
	c.afters = append(c.afters, a)
	c.mu.Unlock()
	return func() bool {
		stopped := false
		a.once.Do(func() { stopped = true })
		if stopped {
			c.mu.Lock()
			for i, x := range c.afters {
				if x == a {
					c.afters = append(c.afters[:i], c.afters[i+1:]...)
					break
				}
			}
			c.mu.Unlock()
		}
		return stopped
	}
}

// Cancel ends the context with context.Canceled, if it has not ended yet,
// and releases its timer and its link to the parent. Call it when the
// attempt is over.
func (c *Context) Cancel() {
	c.mu.Lock()
	if c.err == nil {
		c.canceled = true
		c.endLocked(context.Canceled)
	}
	c.mu.Unlock()
}

// Expired reports whether the context ended at its own deadline (not by
// Cancel, and not because its parent ended first).
func (c *Context) Expired() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil && c.parent.Err() == nil && c.pastDeadline() {
		c.endLocked(context.DeadlineExceeded)
	}
	return c.err == context.DeadlineExceeded && !c.canceled
}

func (c *Context) armLocked() {
	if c.armed {
		return
	}
	c.armed = true
	if c.err != nil {
		c.done = closed
		return
	}
	c.done = make(chan struct{})
	if perr := c.parent.Err(); perr != nil {
		c.endLocked(perr)
		return
	}
	if !c.deadline.IsZero() {
		d := time.Until(c.deadline)
		if d <= 0 {
			c.endLocked(context.DeadlineExceeded)
			return
		}
		c.timer = time.AfterFunc(d, c.expire)
	}
	if c.parent.Done() != nil {
		c.unlink = context.AfterFunc(c.parent, c.parentEnded)
	}
}

func (c *Context) expire() {
	c.mu.Lock()
	if c.err == nil {
		c.endLocked(context.DeadlineExceeded)
	}
	c.mu.Unlock()
}

func (c *Context) parentEnded() {
	c.mu.Lock()
	if c.err == nil {
		c.endLocked(c.parent.Err())
	}
	c.mu.Unlock()
}

// endLocked records err and wakes everyone waiting.
func (c *Context) endLocked(err error) {
	c.err = err
	c.ended.Store(true)
	if c.armed {
		if c.done != closed {
			close(c.done)
		}
	} else {
		c.done, c.armed = closed, true
	}
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	if c.unlink != nil {
		c.unlink()
		c.unlink = nil
	}
	for _, a := range c.afters {
		a.once.Do(func() { go a.f() })
	}
	c.afters = nil
}

// String names the context for debugging, as the context package's own do.
func (c *Context) String() string { return "tierguard.attemptContext" }
