package fallback_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/internal/testbed/reported"
	"github.com/tierguard/tierguard/retry"
)

// tally counts the events an observer handled, by name.
type tally struct {
	mu   sync.Mutex
	seen []string
}

func (t *tally) add(name string) {
	t.mu.Lock()
	t.seen = append(t.seen, name)
	t.mu.Unlock()
}

func (t *tally) names() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.seen...)
}

// only is what the observers of one event share: NopObserver for the
// events they do not handle, and the tally of those they do.
type only struct {
	fallback.NopObserver
	*tally
}

// One observer per event: each implements the method of its event only.
type (
	onRequestStarted     struct{ only }
	onAttemptStarted     struct{ only }
	onAttemptEnded       struct{ only }
	onTierSkipped        struct{ only }
	onLocalAnswered      struct{ only }
	onRequestEnded       struct{ only }
	onFirstChunkReceived struct{ only }
	onChunkReceived      struct{ only }
	onLateReplyReceived  struct{ only }
)

func (o onRequestStarted) RequestStarted(ctx context.Context, _ fallback.RequestStart) context.Context {
	o.add("request_started")
	return ctx
}

func (o onAttemptStarted) AttemptStarted(ctx context.Context, _ fallback.AttemptStart) context.Context {
	o.add("attempt_started")
	return ctx
}

func (o onAttemptEnded) AttemptEnded(context.Context, fallback.AttemptEnd) { o.add("attempt_ended") }
func (o onTierSkipped) TierSkipped(context.Context, fallback.TierSkip)     { o.add("tier_skipped") }
func (o onLocalAnswered) LocalAnswered(context.Context, fallback.LocalAnswer) {
	o.add("local_answered")
}
func (o onRequestEnded) RequestEnded(context.Context, fallback.RequestEnd) { o.add("request_ended") }
func (o onFirstChunkReceived) FirstChunkReceived(context.Context, fallback.FirstChunk) {
	o.add("first_chunk_received")
}
func (o onChunkReceived) ChunkReceived(context.Context, fallback.NextChunk) { o.add("chunk_received") }
func (o onLateReplyReceived) LateReplyReceived(context.Context, fallback.LateReply) {
	o.add("late_reply")
}

// An observer that embeds NopObserver receives the events it implements,
// every one of them, and nothing else; the chain's context goes on through
// the methods it does not implement.
func TestObserversReceiveOnlyTheEventsTheyImplement(t *testing.T) {
	only := map[string]func(*tally) fallback.Observer{
		"request_started":      func(t *tally) fallback.Observer { return onRequestStarted{only{tally: t}} },
		"attempt_started":      func(t *tally) fallback.Observer { return onAttemptStarted{only{tally: t}} },
		"attempt_ended":        func(t *tally) fallback.Observer { return onAttemptEnded{only{tally: t}} },
		"tier_skipped":         func(t *tally) fallback.Observer { return onTierSkipped{only{tally: t}} },
		"local_answered":       func(t *tally) fallback.Observer { return onLocalAnswered{only{tally: t}} },
		"request_ended":        func(t *tally) fallback.Observer { return onRequestEnded{only{tally: t}} },
		"first_chunk_received": func(t *tally) fallback.Observer { return onFirstChunkReceived{only{tally: t}} },
		"chunk_received":       func(t *tally) fallback.Observer { return onChunkReceived{only{tally: t}} },
		"late_reply":           func(t *tally) fallback.Observer { return onLateReplyReceived{only{tally: t}} },
	}
	for name, observer := range only {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var got tally
				var all reported.Recorder
				everyEvent(t, fallback.Observers(observer(&got), &all))
				want := 0
				for _, n := range all.Names() {
					if n == name {
						want++
					}
				}
				require.Positive(t, want, "the requests make every kind of event")
				assert.Len(t, got.names(), want, "every %s", name)
				for _, n := range got.names() {
					assert.Equal(t, name, n)
				}
			})
		})
	}
}

// everyEvent runs requests that make every kind of event, observed by o:
// a skip (an open breaker), an attempt abandoned for ignoring its context
// whose reply comes late, a cache answer, and a stream of three chunks.
func everyEvent(t *testing.T, o fallback.Observer) {
	open := newBreaker(t, breaker.Config{Name: "lite"})
	open.ForceOpen()
	ignoring := fallback.Tier("pro", func(ctx context.Context, _ string) (string, error) {
		time.Sleep(time.Second) // ignores ctx
		fallback.Report(ctx, fallback.Reply{Usage: fallback.Usage{InputTokens: 7}, HasUsage: true})
		return "late", nil
	})
	c := newChain(t, fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{
			{Tier: newFake("lite", ok("x")), Breaker: open},
			{Tier: ignoring, TryTimeout: 100 * time.Millisecond, Retry: retry.Policy{MaxAttempts: 1}},
		},
		AbandonAfter: 10 * time.Millisecond,
		Cache:        &mapCache{m: map[string]string{"q": "cached"}},
		Observer:     o,
	})
	res, err := c.Do(context.Background(), "q")
	require.NoError(t, err)
	assert.Equal(t, "cached", res.Value)
	time.Sleep(2 * time.Second)
	synctest.Wait()

	pro := &streamFake{name: "pro", def: streamScript{chunks: words("a", "b", "c"), finishing: true}}
	sc := newStreamChain(t, fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: pro.tier()}}, Observer: o})
	text, err := collect(sc.Stream(context.Background(), "q"))
	require.NoError(t, err)
	assert.Equal(t, "abc", text)
}

// Observers feeds each observer's context to the next; an observer that
// does not implement RequestStarted or AttemptStarted passes the context
// on unchanged.
func TestObserversChainTheirContexts(t *testing.T) {
	var d decisions
	c := newChain(t, fallback.Config[string, string]{
		Stages:   stages(newFake("pro", ok("x"))),
		Observer: fallback.Observers(&d, fallback.NopObserver{}, onAttemptEnded{only{tally: &tally{}}}, nil),
	})
	_, err := c.Do(context.Background(), "q")
	require.NoError(t, err)
	assert.Equal(t, []string{
		"request_started",
		"attempt_started pro#1 ctx=span",
		"attempt_ended pro#1 ok retry=false",
		"request_ended answered=true tier=pro degraded=false calls=1",
	}, d.list)
}
