package fallback

import (
	"context"
	"iter"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/internal/budget"
	"github.com/tierguard/tierguard/internal/detach"
)

// racer is one stream of a hedged stream attempt: the first, or its
// hedge. Its sequence is read on a goroutine of its own (pump), which
// hands each pair over items; everything else is the race's, on the
// consumer's goroutine, but state, which the pump's end shares.
type racer[Chunk any] struct {
	ctx   *budget.Context
	rec   *Record
	hedge bool
	// quit is closed when the race reads the racer no more; done when its
	// sequence has returned.
	quit, done chan struct{}
	stopped    bool
	// What it sent before a chunk with content, held back: the chunks,
	// and whether one had a finish reason.
	pending  []Chunk
	finished bool
	// over is set once it failed before the commit point, err its
	// failure; cut once its first-chunk window ended.
	over, cut bool
	err       error
	// doneSeen is set once the race saw its context end.
	doneSeen bool
	// state is the first stream's callRunning, callReturned, callLost or
	// callStuck, as for a hedged unary call: a first stream the race left
	// running gives back the stage's slot and probe itself.
	state atomic.Int32
}

// stop tells x's sequence to stop: its context is cancelled and its pump
// hands nothing more over.
func (x *racer[Chunk]) stop() {
	x.ctx.Cancel()
	if !x.stopped {
		x.stopped = true
		close(x.quit)
	}
}

// raceItem is a pair a racer's sequence yielded, or (end) its return.
type raceItem[Chunk any] struct {
	from    *racer[Chunk]
	ch      Chunk
	err     error
	end     bool
	outcome detach.Outcome
}

// pump reads x's sequence on the calling goroutine, handing each pair
// over items until the race quits x; then finish settles what x's
// return settles, and x's end is handed over.
func pump[Chunk any](x *racer[Chunk], seq func() iter.Seq2[Chunk, error], items chan<- raceItem[Chunk], finish func(o detach.Outcome, last error)) {
	var last error
	detach.Run(func() {
		for ch, err := range seq() {
			if err != nil {
				last = err
			}
			select {
			case items <- raceItem[Chunk]{from: x, ch: ch, err: err}:
			case <-x.quit:
				return
			}
			if err != nil {
				// An error ends the stream, as it does read inline.
				return
			}
		}
	}, func(o detach.Outcome) {
		finish(o, last)
		select {
		case items <- raceItem[Chunk]{from: x, end: true, outcome: o}:
		case <-x.quit:
		}
		close(x.done)
	})
}

// race runs a hedged stream attempt with reading a (its context, record
// and first-chunk window set as for an unhedged one): the first stream
// and, when it has sent no content by the stage's hedge delay and the
// hedge budget allows, a second one (see StreamStage.Hedge). The first to
// send content is the attempt's stream from then on, read to its end as
// an unhedged one is, its chunks handed over from its goroutine; the
// other is cancelled. It returns how the attempt ended, as attempt does.
func (s *Stream[In, Chunk]) race(a *reading[Chunk], b budget.Budget, base context.Context, per, remaining time.Duration, in In, tok breaker.Token) attemptEnd {
	c, st := s.c, a.st
	st.hedges.Attempted()
	tier := c.tiers[st.index]
	items := make(chan raceItem[Chunk])
	first := &racer[Chunk]{ctx: &a.ctx, rec: a.rec, quit: make(chan struct{}), done: make(chan struct{}), pending: a.pending}
	go pump(first, func() iter.Seq2[Chunk, error] { return tier.Stream(&a.ctx, in) }, items, func(detach.Outcome, error) {
		if first.state.CompareAndSwap(callRunning, callReturned) {
			return
		}
		// Left running, its guards are its own: lost to a hedge on the same
		// tier, the tier answered; abandoned, it failed.
		o := breaker.Success
		if first.state.Load() == callStuck {
			o = breaker.Failure
			c.counters.Stuck.Add(-1)
		}
		if st.bulkhead != nil {
			st.bulkhead.Release()
		}
		if tok.IsProbe() {
			tok.Done(o)
		}
	})
	rc := streamRace[In, Chunk]{s: s, a: a, b: b, base: base, in: in, first: first, items: items}
	defer rc.cleanup()
	if st.cutsFirstChunk(per, remaining) {
		rc.firstCut = time.NewTimer(per)
	}
	if delay, ok := st.latency.Delay(); ok {
		rc.delay, rc.hedgeDelay = time.NewTimer(delay), delay
	}
	return rc.run()
}

// streamRace is a hedged stream attempt under way.
type streamRace[In, Chunk any] struct {
	s     *Stream[In, Chunk]
	a     *reading[Chunk]
	b     budget.Budget
	base  context.Context
	in    In
	items chan raceItem[Chunk]

	first, hedge *racer[Chunk]
	hc           *hedgeCall
	hedgeStart   time.Duration
	late         bool
	// winner is the racer that sent content first.
	winner *racer[Chunk]
	// The timers: the first stream's and the hedge's first-chunk windows,
	// the hedge's delay (hedgeDelay), and the abandonment of streams that
	// outlived their contexts by AbandonAfter.
	firstCut, hedgeCut, delay, abandon *time.Timer
	hedgeDelay                         time.Duration
	// gaveUp is set once the winner was abandoned past its commit point.
	gaveUp bool
}

// chanOf is t's channel, nil for no timer.
func chanOf(t *time.Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C
}

// doneOf is the channel a racer's context ends on, while the race may
// have to abandon it: nil once it is over, or without AbandonAfter.
func (rc *streamRace[In, Chunk]) doneOf(x *racer[Chunk]) <-chan struct{} {
	if x == nil || x.over || x.doneSeen || rc.abandon != nil || rc.s.c.abandonAfter <= 0 || (rc.winner != nil && x != rc.winner) {
		return nil
	}
	return x.ctx.Done()
}

func (rc *streamRace[In, Chunk]) run() attemptEnd {
	for {
		select {
		case it := <-rc.items:
			if end, done := rc.take(it); done {
				return end
			}
		case <-chanOf(rc.firstCut):
			rc.firstCut = nil
			rc.cutFirstChunk(rc.first)
		case <-chanOf(rc.hedgeCut):
			rc.hedgeCut = nil
			rc.cutFirstChunk(rc.hedge)
		case <-chanOf(rc.delay):
			if rc.winner != nil || rc.first.over || !rc.startHedge() {
				if rc.winner == nil && !rc.first.over {
					// No hedge now (the budget is spent, no slot free):
					// look again a quarter of the delay later, as the
					// budget refills with other requests' attempts.
					rc.delay.Reset(max(rc.hedgeDelay/4, time.Millisecond))
					continue
				}
			}
			rc.delay = nil
		case <-rc.doneOf(rc.first):
			rc.first.doneSeen = true
			rc.armAbandon()
		case <-rc.doneOf(rc.hedge):
			rc.hedge.doneSeen = true
			rc.armAbandon()
		case <-chanOf(rc.abandon):
			if end, done := rc.abandoned(); done {
				return end
			}
		}
	}
}

// cutFirstChunk ends x's wait for its first chunk with content, unless
// the race is already decided.
func (rc *streamRace[In, Chunk]) cutFirstChunk(x *racer[Chunk]) {
	if rc.winner == nil && x != nil && !x.over {
		x.cut = true
		x.ctx.Cancel()
	}
}

// armAbandon starts the wait after which streams that ignore their
// contexts are given up, once every stream the race waits for has had its
// context end.
func (rc *streamRace[In, Chunk]) armAbandon() {
	for _, x := range [2]*racer[Chunk]{rc.first, rc.hedge} {
		if x != nil && !x.over && (rc.winner == nil || x == rc.winner) && x.ctx.Err() == nil {
			return
		}
	}
	rc.abandon = time.NewTimer(rc.s.c.abandonAfter)
}

// abandoned gives up the streams that outlived their contexts by
// AbandonAfter; done is set when the attempt is over.
func (rc *streamRace[In, Chunk]) abandoned() (attemptEnd, bool) {
	c := rc.s.c
	rc.abandon = nil
	if w := rc.winner; w != nil {
		// Past the commit point: the stream is cut, as an unhedged one.
		if w == rc.first && w.state.CompareAndSwap(callRunning, callStuck) {
			c.counters.Stuck.Add(1)
			rc.a.abandoned = true
		}
		c.counters.Abandoned.Add(1)
		rc.gaveUp = true
		w.stop()
		rc.s.push(*new(Chunk), errAbandoned)
		return rc.committed(), true
	}
	for _, x := range [2]*racer[Chunk]{rc.first, rc.hedge} {
		if x == nil || x.over {
			continue
		}
		if x == rc.first && x.state.CompareAndSwap(callRunning, callStuck) {
			c.counters.Stuck.Add(1)
		}
		c.counters.Abandoned.Add(1)
		if end, done := rc.failed(x, errAbandoned); done {
			return end, true
		}
	}
	return attemptEnd{}, false
}

// startHedge starts the hedge, if one can run now.
func (rc *streamRace[In, Chunk]) startHedge() bool {
	s, a := rc.s, rc.a
	c, st := s.c, a.st
	hc, window := c.prepareStreamHedge(rc.b, st, rc.base, a.rec, a.model, rc.late)
	rc.late = true
	if hc == nil {
		return false
	}
	rc.hc = hc
	var hctx context.Context = hc.ctx
	if a.rec != nil {
		// The hedge's replies and members are its own stream's; on a
		// pool, it avoids the first stream's member.
		hc.end.rec = a.rec.hedgeOf(hc.ctx, st, a.model, hc.avoid)
		hctx = hc.end.rec
	}
	h := &racer[Chunk]{ctx: hc.ctx, rec: hc.end.rec, hedge: true, quit: make(chan struct{}), done: make(chan struct{})}
	rc.hedge, rc.hedgeStart = h, c.now()
	if window != budget.Unlimited {
		rc.hedgeCut = time.NewTimer(window)
	}
	tier := c.tiers[st.index]
	in := rc.in
	var started bool
	go pump(h, func() iter.Seq2[Chunk, error] {
		if started = hc.end.phase.CompareAndSwap(hedgeWaiting, hedgeCalling); !started {
			// The race ended before the stream started: it makes none.
			return func(func(Chunk, error) bool) {}
		}
		return tier.Stream(hctx, in)
	}, rc.items, func(_ detach.Outcome, last error) {
		if started {
			hc.end.callErr = last
			if !hc.end.phase.CompareAndSwap(hedgeCalling, hedgeReturned) {
				// The race ended during the stream: it settles its calls.
				c.settleLate(&hc.end)
			}
		}
		hc.ctx.Cancel()
		hc.release(classify.Verdict{}, breaker.Ignored, 0)
	})
	return true
}

// take handles one pair or end a racer handed over; done is set when the
// attempt is over.
func (rc *streamRace[In, Chunk]) take(it raceItem[Chunk]) (attemptEnd, bool) {
	x, a := it.from, rc.a
	if it.end && it.outcome.Ended() {
		// A panic or Goexit in a stream, before or after the commit point,
		// ends the attempt, to be raised again on the caller's goroutine.
		rc.stopAll()
		end := attemptEnd{ended: &it.outcome, hedge: rc.heEnd(), slotLeft: rc.first.state.CompareAndSwap(callRunning, callLost)}
		return end, true
	}
	if w := rc.winner; w != nil {
		if x != w {
			// A loser's pair sent as it was being stopped.
			return attemptEnd{}, false
		}
		if it.end {
			return rc.committed(), true
		}
		if !rc.s.push(it.ch, it.err) {
			return rc.committed(), true
		}
		return attemptEnd{}, false
	}
	if x.over {
		return attemptEnd{}, false
	}
	if it.end || it.err != nil {
		err := it.err
		switch {
		case x.cut:
			err = classify.Wrap(ErrFirstChunkTimeout, classify.Verdict{Class: classify.Transient, Reason: "no first chunk in time"})
		case it.end && x.finished:
			err = classify.Wrap(ErrEmptyStream, classify.Verdict{Class: classify.InvalidOutput, Reason: "empty stream"})
		case it.end:
			err = classify.Wrap(ErrEmptyStream, classify.Verdict{Class: classify.Transient, Reason: "stream ended without a finish reason"})
		}
		return rc.failed(x, err)
	}
	info := rc.s.c.tiers[a.st.index].Inspect(it.ch)
	if !info.NonTextContent && strings.TrimSpace(info.Text) == "" {
		x.pending = append(x.pending, it.ch)
		x.finished = x.finished || info.FinishReason != ""
		return attemptEnd{}, false
	}
	rc.commit(x)
	if !rc.s.push(it.ch, nil) {
		return rc.committed(), true
	}
	return attemptEnd{}, false
}

// commit makes x the attempt's stream: the other is stopped, and from now
// on the reading is x's.
func (rc *streamRace[In, Chunk]) commit(x *racer[Chunk]) {
	a := rc.a
	rc.winner = x
	for _, t := range [...]*time.Timer{rc.firstCut, rc.hedgeCut, rc.delay} {
		if t != nil {
			t.Stop()
		}
	}
	rc.firstCut, rc.hedgeCut, rc.delay = nil, nil, nil
	if rc.abandon != nil {
		rc.abandon.Stop()
		rc.abandon = nil
	}
	a.pending, a.finished, a.rec, a.live = x.pending, x.finished, x.rec, x.ctx
	if x.hedge {
		a.hedgeWon = true
		he := &rc.hc.end
		he.won, he.latency = true, rc.s.c.now()-rc.hedgeStart
		if rc.first.over {
			he.primaryErr = rc.first.err
		}
		rc.first.stop()
	} else if rc.hedge != nil {
		rc.hedge.stop()
	}
}

// failed records that x failed with err before the commit point; done
// is set when no stream is left in the race.
func (rc *streamRace[In, Chunk]) failed(x *racer[Chunk], err error) (attemptEnd, bool) {
	x.over, x.err = true, err
	x.stop()
	if x.hedge {
		rc.hc.end.err, rc.hc.end.latency = err, rc.s.c.now()-rc.hedgeStart
	}
	if !rc.first.over || rc.hedge != nil && !rc.hedge.over {
		return attemptEnd{}, false
	}
	f := rc.first
	end := attemptEnd{err: f.err, timedOut: f.cut, hedge: rc.heEnd()}
	if end.abandoned = f.state.Load() == callStuck; !end.abandoned {
		// Stopped, it returns at once unless it ignores its context: the
		// stage's decision then settles its guards, as for an unhedged
		// stream. One that ignores it is left to finish, past AbandonAfter.
		rc.wait(f)
		end.slotLeft = f.state.CompareAndSwap(callRunning, callLost)
	}
	return end, true
}

// committed ends the attempt whose stream has ended past its commit
// point: the winner's sequence is told to stop, and waited for (with
// AbandonAfter, that long at most), since what it reports by its return
// is the attempt's; the first stream, if it lost and is still running,
// keeps the stage's slot and probe until it returns.
func (rc *streamRace[In, Chunk]) committed() attemptEnd {
	a, w, c := rc.a, rc.winner, rc.s.c
	if !w.stopped {
		w.stopped = true
		close(w.quit)
	}
	if rc.gaveUp {
		// Abandoned: not waited for.
	} else if c.abandonAfter > 0 {
		t := time.NewTimer(c.abandonAfter)
		select {
		case <-w.done:
		case <-t.C:
			if w == rc.first && w.state.CompareAndSwap(callRunning, callStuck) {
				c.counters.Stuck.Add(1)
				a.abandoned = true
			}
			c.counters.Abandoned.Add(1)
		}
		t.Stop()
	} else {
		<-w.done
	}
	end := attemptEnd{rotations: a.rotations, toCommit: a.toCommit, hedge: rc.heEnd()}
	if w != rc.first {
		end.slotLeft = rc.first.state.CompareAndSwap(callRunning, callLost)
	}
	return end
}

// wait waits for x's sequence to return: AbandonAfter at most, when set.
func (rc *streamRace[In, Chunk]) wait(x *racer[Chunk]) {
	c := rc.s.c
	if c.abandonAfter <= 0 {
		<-x.done
		return
	}
	t := time.NewTimer(c.abandonAfter)
	defer t.Stop()
	select {
	case <-x.done:
	case <-t.C:
	}
}

// heEnd is the hedge's description, nil when none started.
func (rc *streamRace[In, Chunk]) heEnd() *hedgeEnd {
	if rc.hc == nil {
		return nil
	}
	return &rc.hc.end
}

// stopAll stops every stream of the race.
func (rc *streamRace[In, Chunk]) stopAll() {
	rc.first.stop()
	if rc.hedge != nil {
		rc.hedge.stop()
	}
}

// cleanup stops the race's timers and tells every stream still running
// that nobody reads it any more.
func (rc *streamRace[In, Chunk]) cleanup() {
	for _, t := range [...]*time.Timer{rc.firstCut, rc.hedgeCut, rc.delay, rc.abandon} {
		if t != nil {
			t.Stop()
		}
	}
	if rc.a.idle != nil {
		rc.a.idle.Stop()
	}
	for _, x := range [2]*racer[Chunk]{rc.first, rc.hedge} {
		if x != nil && !x.stopped {
			x.stopped = true
			close(x.quit)
		}
	}
	if rc.hc != nil && rc.winner != rc.hedge {
		rc.hc.ctx.Cancel()
	}
}

// prepareStreamHedge takes what a hedge of a stream attempt on st needs,
// whose first stream's record is first (nil when the request has none):
// another member of the same tier when the first stream named one (a
// pool, however wrapped, takes that member's guards), or else the same
// tier behind a bulkhead slot of its own, taken without waiting — never
// the next tier, whose chunks are another model's. window is the hedge's
// wait for its first chunk with content: the stage's window for an
// attempt starting now; its context ends with the request's budget, since
// a hedge that wins streams to the end. nil when no hedge can run now;
// late is as for prepareHedge.
func (e *engine) prepareStreamHedge(b budget.Budget, st *stage, base context.Context, first *Record, model string, late bool) (hc *hedgeCall, window time.Duration) {
	least := int64(2)
	if late {
		least = 1
	}
	if !st.hedges.Take(least) {
		return nil, 0
	}
	per, remaining, ok := e.hedgePer(b, st)
	if !ok {
		st.hedges.Refund()
		return nil, 0
	}
	if !st.cutsFirstChunk(per, remaining) {
		// Only the deadline bounds the wait, as for the first stream.
		per = budget.Unlimited
	}
	var deadline time.Time
	if d, ok := b.Deadline(); ok {
		deadline = d
	}
	hc = &hedgeCall{ctx: budget.NewContext(base, deadline), end: hedgeEnd{stage: st, model: model},
		release: func(classify.Verdict, breaker.Outcome, time.Duration) {}}
	if member := first.CurrentMember(); member != "" {
		hc.avoid = member
		return hc, per
	}
	if st.bulkhead != nil {
		if !st.bulkhead.TryAcquire() {
			hc.ctx.Cancel()
			st.hedges.Refund()
			return nil, 0
		}
		hc.release = func(classify.Verdict, breaker.Outcome, time.Duration) { st.bulkhead.Release() }
	}
	return hc, per
}

// cutsFirstChunk reports whether a stream's wait for its first chunk
// with content, in a window per of what remaining the budget had left,
// needs a timer of its own: when the stage caps it (FirstChunkTimeout),
// or the reserve for later tiers ends it before the deadline does.
func (st *stage) cutsFirstChunk(per, remaining time.Duration) bool {
	return per != budget.Unlimited && (st.try.Cap > 0 || per < remaining)
}
