package fallback

import (
	"context"
	"sync"
	"time"

	"github.com/tierguard/tierguard/classify"
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
// part of that attempt (AttemptEnd.Reply); one that arrives later is
// reported on its own, as a LateReply, so that every billed
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
	hedge  bool

	// tokens is the stage's estimate for the call, for the limiters of a
	// pool's members; avoid is, for a hedge, the member the first call
	// holds.
	tokens int64
	avoid  string

	mu      sync.Mutex
	closed  bool
	replies int
	reply   Reply
	// What a tier that spreads its calls over members (a Pool) reported:
	// counted once it counts its own calls, calls the upstream calls it
	// made, at the member of the current one, rotated the member calls
	// that failed before it, memberFailure when the attempt's failure is
	// its member's alone (an exhausted quota: the member is parked, not
	// the tier).
	counted       bool
	calls         int
	at            string
	rotated       []rotation
	memberFailure bool
}

// rotation is a member's call that failed and sent the attempt to
// another member: an upstream call of its own on the trail.
type rotation struct {
	member  string
	err     error
	verdict classify.Verdict
	latency time.Duration
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

// counting marks a tier that counts its own upstream calls (enter), so
// that one that made none (every member out) is counted as none.
func (c *call) counting() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.counted = true
	c.mu.Unlock()
}

// enter reports an upstream call to member id, the attempt's current one.
func (c *call) enter(id string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.counted, c.calls, c.at = true, c.calls+1, id
	c.mu.Unlock()
}

// rotate reports that the current member's call failed with err and the
// attempt moves to another member.
func (c *call) rotate(err error, v classify.Verdict, latency time.Duration) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.rotated = append(c.rotated, rotation{member: c.at, err: err, verdict: v, latency: latency})
	c.mu.Unlock()
}

// memberFailed marks the attempt's failure as its member's alone.
func (c *call) memberFailed() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.memberFailure = true
	c.mu.Unlock()
}

// current is the member the call is on now, "" for a tier without
// members.
func (c *call) current() string {
	if c == nil {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at
}

// usage is the sum of the tokens reported so far, and whether any were.
func (c *call) usage() (int64, bool) {
	if c == nil {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reply.Usage.InputTokens + c.reply.Usage.OutputTokens, c.reply.HasUsage
}

// settled is what the tier reported of its calls, read once it returned:
// the upstream calls it made (1 for a tier that does not count them), the
// member of the last, the member calls that failed before it, and whether
// its failure is its member's alone.
func (c *call) settled() (calls int, member string, rotated []rotation, memberFailure bool) {
	if c == nil {
		return 1, "", nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	calls = 1
	if c.counted {
		calls = c.calls
	}
	return calls, c.at, c.rotated, c.memberFailure
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
// observer to tell, limiters to correct with the usage, or a tier that
// may spread its calls over members (a Pool, however wrapped) and report
// them for the trail. A stage learns its tier is plain — a success that
// named no member — and then makes no record when nothing else needs one.
func (r *request) listens(st *stage) bool { return r.obs != nil || st.limited || !st.plain.Load() }

// newCall returns the record of attempt n's call on st, built on base;
// tokens is the stage's estimate for it.
func (e *engine) newCall(r *request, st *stage, base context.Context, model string, n int, tokens int64) *call {
	return &call{Context: base, e: e, reqCtx: r.ctx, obs: r.obs, st: st, model: model, n: n, tokens: tokens}
}

// hedgeOf returns the record of the hedge of c's attempt, on st with
// model, built on base; on the same tier it avoids the member avoid.
func (c *call) hedgeOf(base context.Context, st *stage, model, avoid string) *call {
	return &call{Context: base, e: c.e, reqCtx: c.reqCtx, obs: c.obs, st: st, model: model, n: c.n, hedge: true, avoid: avoid, tokens: c.tokens}
}

// late reports a reply that came after the chain stopped waiting for its
// call.
func (e *engine) late(c *call, r Reply) {
	if c.obs == nil {
		return
	}
	c.obs.LateReplyReceived(c.reqCtx, LateReply{Stage: c.st.info, Model: c.model, Attempt: c.n, Member: c.current(), Hedge: c.hedge, Reply: r})
}
