package fallback

import (
	"context"
	"iter"
	"sync/atomic"
	"time"
)

// source is a stream being read: the tier's sequence, pulled one chunk at a
// time.
type source[Chunk any] interface {
	// next returns the next chunk or error; ok is false at the end.
	next() (ch Chunk, err error, ok bool)
	// stop ends the reading and reports whether the tier was abandoned
	// because it ignored its context. It may be called more than once.
	stop() (abandoned bool)
}

// open starts reading stage st's stream for in: on the caller's goroutine
// (iter.Pull2), or, with AbandonAfter, on a goroutine of its own.
func (c *StreamChain[In, Chunk]) open(st *stage, ctx context.Context, in In) source[Chunk] {
	seq := c.tiers[st.index].Stream(ctx, in)
	if c.abandonAfter <= 0 {
		next, stop := iter.Pull2(seq)
		return &pulled[Chunk]{pull: next, end: stop}
	}
	d := &detachedSource[Chunk]{e: c.engine, ctx: ctx, items: make(chan item[Chunk]), quit: make(chan struct{})}
	if st.bulkhead != nil {
		d.release = st.bulkhead.Release
	}
	go run(func() (struct{}, error) {
		for ch, err := range seq {
			select {
			case d.items <- item[Chunk]{ch: ch, err: err}:
			case <-d.quit:
				return struct{}{}, nil
			}
		}
		return struct{}{}, nil
	}, d.finished)
	return d
}

// pulled reads a stream on the caller's goroutine.
type pulled[Chunk any] struct {
	pull func() (Chunk, error, bool)
	end  func()
}

func (p *pulled[Chunk]) next() (Chunk, error, bool) { return p.pull() }
func (p *pulled[Chunk]) stop() bool                 { p.end(); return false }

type item[Chunk any] struct {
	ch   Chunk
	err  error
	last *outcome[struct{}] // set on the item that reports the sequence's end
}

// detachedSource reads a stream on its own goroutine, so that a tier that
// ignores its context cannot hold the consumer: a wait that outlasts the
// stream's context by AbandonAfter abandons the tier. The abandoned reader
// keeps the stage's bulkhead slot until the tier's sequence returns.
type detachedSource[Chunk any] struct {
	e         *engine
	ctx       context.Context
	items     chan item[Chunk]
	quit      chan struct{}
	release   func()
	state     atomic.Int32
	ended     bool
	stopped   bool
	abandoned bool
}

// finished runs when the reading goroutine ends, however it ends: it hands
// the end to the consumer, or, if the consumer abandoned the tier, releases
// what the reader kept.
func (d *detachedSource[Chunk]) finished(o outcome[struct{}]) {
	if d.state.CompareAndSwap(callRunning, callAnswered) {
		select {
		case d.items <- item[Chunk]{last: &o}:
		case <-d.quit:
		}
		return
	}
	if d.release != nil {
		d.release()
	}
	d.e.stuck.Add(-1)
}

func (d *detachedSource[Chunk]) next() (Chunk, error, bool) {
	var zero Chunk
	if d.ended || d.abandoned {
		return zero, nil, false
	}
	var it item[Chunk]
	select {
	case it = <-d.items:
	case <-d.ctx.Done():
		grace := time.NewTimer(d.e.abandonAfter)
		select {
		case it = <-d.items:
			grace.Stop()
		case <-grace.C:
			if d.state.CompareAndSwap(callRunning, callAbandoned) {
				d.e.stuck.Add(1)
				d.e.abandoned.Add(1)
				d.abandoned = true
				return zero, errAbandoned, true
			}
			it = <-d.items
		}
	}
	if it.last != nil {
		d.ended = true
		reraise(*it.last)
		return zero, nil, false
	}
	return it.ch, it.err, true
}

func (d *detachedSource[Chunk]) stop() bool {
	if !d.stopped {
		d.stopped = true
		close(d.quit)
	}
	return d.abandoned
}
