package spend

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/tierguard/tierguard/fallback"
)

// Chain is what Attach needs of a chain. *fallback.Chain and
// *fallback.StreamChain implement it.
type Chain interface {
	// Observe adds an observer to the chain and returns the function that
	// removes it.
	Observe(fallback.Observer) (remove func())
	// Stages describes the chain's stages, in order.
	Stages() []fallback.StageInfo
}

// Attach makes the ledger record the requests of c that carry a Ticket.
// costGroups, if given, are the cost groups of c's stages, in order ("" or
// absent: the list price). The returned function detaches it.
func (l *Ledger) Attach(c Chain, costGroups ...string) (detach func(), err error) {
	stages := c.Stages()
	if len(costGroups) > len(stages) {
		return nil, fmt.Errorf("spend: %d cost groups for a chain of %d stages", len(costGroups), len(stages))
	}
	o := l.observer(len(stages), costGroups)
	return c.Observe(o), nil
}

// Observer returns a fallback.Observer that records requests into the
// ledger, for fallback.Config.Observer: costGroups are the chain's stages'
// cost groups, in order. Attach does this for a chain already built.
func (l *Ledger) Observer(costGroups ...string) fallback.Observer {
	return l.observer(len(costGroups), costGroups)
}

func (l *Ledger) observer(n int, groups []string) *binding {
	b := &binding{l: l, groups: make([]string, n)}
	copy(b.groups, groups)
	return b
}

// cachedStages is how many stages of a chain have their price cached;
// later ones (rare) are looked up per event.
const cachedStages = 8

// binding records the events of one chain. It caches each stage's price,
// so that an event costs a comparison, not a lookup.
type binding struct {
	fallback.NopObserver
	l      *Ledger
	groups []string
	cache  [cachedStages]atomic.Pointer[priceSlot]
}

type priceSlot struct {
	model string
	idx   int
}

// ticket returns the request's Ticket when it is this ledger's.
func (b *binding) ticket(ctx context.Context) *Ticket {
	// The chain passes its events the context its caller gave it, most
	// often the Ticket itself: found without a Value call.
	t, ok := ctx.(*Ticket)
	if !ok {
		t, _ = ctx.Value(ticketKey{}).(*Ticket)
	}
	if t != nil && t.l == b.l {
		return t
	}
	return nil
}

// run reports whether the chain's goroutine holds t. It takes the ticket
// with its first event (its RequestStarted); End cannot close it after
// that, so a caller who stops waiting for a shared execution it started
// still gets the execution's costs on its record.
func run(t *Ticket) bool {
	s := t.loadState()
	return s == ticketRunning || s == ticketOpen && t.casState(ticketOpen, ticketRunning)
}

// RequestStarted takes the request's Ticket for the chain.
func (b *binding) RequestStarted(ctx context.Context, _ fallback.RequestStart) context.Context {
	if t := b.ticket(ctx); t != nil {
		run(t)
	}
	return ctx
}

// AttemptEnded records the attempt into the request's Ticket, or, once
// the ticket is closed, the call and its usage into the account: a shared
// execution outlives the caller who started it, and whichever of the two
// ends first, each of its calls is counted.
func (b *binding) AttemptEnded(ctx context.Context, e fallback.AttemptEnd) {
	t := b.ticket(ctx)
	switch {
	case t == nil:
	case run(t):
		t.attempt(b, &e)
	default:
		t.late(b, e.Stage, e.Model, e.Reply, 1)
	}
}

// TierSkipped records the skip into the request's Ticket. A hedge's skip
// is not the tier's: the call it hedged decides what the request's
// fallback stands for.
func (b *binding) TierSkipped(ctx context.Context, e fallback.TierSkip) {
	if e.Hedge {
		return
	}
	if t := b.ticket(ctx); t != nil && run(t) {
		t.skipped(b, &e)
	}
}

// RequestEnded closes the request's Ticket, or counts a request that
// carried none.
func (b *binding) RequestEnded(ctx context.Context, e fallback.RequestEnd) {
	t := b.ticket(ctx)
	if t == nil {
		b.l.untracked.Add(1)
		return
	}
	if run(t) {
		t.ended(&e)
	}
}

// LateReplyReceived records a response nobody waited for any more (an
// abandoned call, a hedge that lost), billed all the same, and the calls
// of a hedge that returned after its attempt ended. It may come from
// another goroutine, at any time: it goes to the account.
func (b *binding) LateReplyReceived(ctx context.Context, e fallback.LateReply) {
	if t := b.ticket(ctx); t != nil && (e.Calls > 0 || e.Reply != nil && e.Reply.HasUsage) {
		t.late(b, e.Stage, e.Model, e.Reply, max(e.Calls, 0))
	}
}

// group returns the cost group of stage i.
func (b *binding) group(i int) string {
	if i >= 0 && i < len(b.groups) {
		return b.groups[i]
	}
	return ""
}

// price returns the price entry of model on stage i, or -1.
func (b *binding) price(i int, model string) int {
	p := b.l.prices
	if p == nil {
		return -1
	}
	if i < 0 || i >= len(b.cache) {
		return p.find(model, b.group(i))
	}
	if s := b.cache[i].Load(); s != nil && s.model == model {
		return s.idx
	}
	idx := p.find(model, b.group(i))
	b.cache[i].Store(&priceSlot{model: model, idx: idx})
	return idx
}
