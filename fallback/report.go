package fallback

import (
	"context"
	"sync"
)

// Reply is what one upstream response says about itself: what it cost and
// who answered. It holds no content.
type Reply struct {
	// Usage is the response's token usage, when HasUsage is set.
	Usage    Usage
	HasUsage bool
	// Response describes the response: its id, the model version that
	// answered, the finish reason.
	Response ResponseInfo
}

// Report tells the chain attempt that ctx belongs to what an upstream
// response said about itself. The code that receives a billed response —
// an SDK adapter, a hand-written tier — calls it once per response, as
// soon as the response is read and whether or not the response is then
// accepted: a rejected answer, a partial stream, a call nobody waits for
// any more (abandoned, or the loser of a hedged race) were all billed.
//
// Because the report travels in the context, it reaches the chain through
// any number of wrappers (pools, chaos faults, mappings) that pass their
// context on. A reply that arrives while the chain waits for its call is
// part of that attempt (Event.Usage on AttemptEnded); one that arrives
// later is reported on its own, as a LateReply event, so that every billed
// response is counted exactly once. Outside a chain, or when nothing
// listens to the chain, Report does nothing. It is safe to call from any
// goroutine.
func Report(ctx context.Context, r Reply) {
	if c, ok := ctx.Value(callKey{}).(*call); ok {
		c.report(r)
	}
}

type callKey struct{}

// call is one upstream call's record: the context its tier receives (it
// carries the record to Report) and the replies reported for it. The
// chain closes it when it stops waiting for the call; a reply reported
// after that is late, and goes to the chain's observers on its own.
type call struct {
	context.Context
	e *engine
	// reqCtx and obs are the request's, for a late reply's event.
	reqCtx context.Context
	obs    Observer
	st     *stage
	model  string
	n      int
	member string
	hedge  bool

	mu      sync.Mutex
	closed  bool
	replies int
	reply   Reply
}

// Value finds the record for Report; every other key goes to the parent.
func (c *call) Value(key any) any {
	if key == (callKey{}) {
		return c
	}
	return c.Context.Value(key)
}

func (c *call) report(r Reply) {
	c.mu.Lock()
	if !c.closed {
		c.replies++
		c.reply = merge(c.reply, r)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.e.late(c, r)
}

// close ends the chain's wait for the call and returns what its replies
// said so far.
func (c *call) close() (Reply, int) {
	if c == nil {
		return Reply{}, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return c.reply, c.replies
}

// merge adds a second reply of one call: a tier that made several
// upstream calls for one attempt (a pool rotating over its members) was
// billed for each; the later response's description wins where it says
// something.
func merge(a, b Reply) Reply {
	if b.HasUsage {
		a.HasUsage = true
		a.Usage.InputTokens += b.Usage.InputTokens
		a.Usage.OutputTokens += b.Usage.OutputTokens
		a.Usage.CacheReadInputTokens += b.Usage.CacheReadInputTokens
		a.Usage.CacheWriteInputTokens += b.Usage.CacheWriteInputTokens
		a.Usage.ReasoningOutputTokens += b.Usage.ReasoningOutputTokens
	}
	a.Response = mergeResponse(a.Response, b.Response)
	return a
}

// listens reports whether a request's attempts need a call record: an
// observer to tell, or limiters to correct with the usage.
func (r *request) listens(st *stage) bool { return r.obs != nil || st.limited }

// newCall returns the record of an attempt's call on st, built on base.
func (e *engine) newCall(r *request, st *stage, base context.Context, model string, n int, member string, hedge bool) *call {
	return &call{Context: base, e: e, reqCtx: r.ctx, obs: r.obs, st: st, model: model, n: n, member: member, hedge: hedge}
}

// late reports a reply that came after the chain stopped waiting for its
// call.
func (e *engine) late(c *call, r Reply) {
	if c.obs == nil {
		return
	}
	ev := Event{Kind: LateReply, Operation: e.op, Stream: e.stream, Tier: c.st.name, TierIndex: c.st.index, Model: c.model,
		Provider: c.st.provider, Attempt: c.n, Member: c.member, Hedge: c.hedge,
		Usage: r.Usage, HasUsage: r.HasUsage, Response: r.Response}
	c.obs.Observe(c.reqCtx, ev)
}
