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
	l      *Ledger
	groups []string
	cache  [cachedStages]atomic.Pointer[priceSlot]
}

type priceSlot struct {
	model string
	idx   int
}

// Observe records e into the request's Ticket.
func (b *binding) Observe(ctx context.Context, e fallback.Event) context.Context {
	switch e.Kind {
	case fallback.RequestStarted, fallback.AttemptEnded, fallback.StageSkipped, fallback.RequestEnded, fallback.LateReply:
	default:
		return ctx
	}
	t, _ := ctx.Value(ticketKey{}).(*Ticket)
	if e.Kind == fallback.LateReply {
		// A response nobody waited for any more (an abandoned call, a
		// hedge that lost) was billed all the same. It may come from
		// another goroutine, at any time: it goes to the account.
		if t != nil && t.l == b.l {
			t.late(b, &e)
		}
		return ctx
	}
	if t == nil || t.l != b.l {
		if e.Kind == fallback.RequestEnded {
			b.l.untracked.Add(1)
		}
		return ctx
	}
	// The chain's goroutine takes the ticket with its first event (its
	// RequestStarted); End cannot close it after that, so a caller who
	// stops waiting for a shared execution it started still gets the
	// execution's costs on its record.
	if s := t.state.Load(); s != ticketRunning && (s != ticketOpen || !t.state.CompareAndSwap(ticketOpen, ticketRunning)) {
		t.late(b, &e)
		return ctx
	}
	switch e.Kind {
	case fallback.AttemptEnded:
		t.attempt(b, &e)
	case fallback.StageSkipped:
		t.skipped(b, &e)
	case fallback.RequestEnded:
		t.ended(&e)
	}
	return ctx
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
