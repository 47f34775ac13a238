package redisspend_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/chaos"
	"github.com/tierguard/tierguard/fallback/pool"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/fallback/spend/redisspend"
)

// streamProvider is a fake provider's books for streams: a stream is
// billed when its last chunk, which carries the usage, is sent.
type streamProvider struct {
	mu     sync.Mutex
	tokens int64
	cost   spend.Amount
	calls  atomic.Int64
	tried  sync.Map // input → streams so far
}

// text is one chunk of a stream.
type text struct{ s, finish string }

func inspectText(c text) fallback.ChunkInfo {
	return fallback.ChunkInfo{Text: c.s, FinishReason: c.finish}
}

// key streams for one API key. By the input's kind:
//
//	ok       three chunks at once
//	slow     the first stream of an input sends nothing for 200 ms (the
//	         hedge on the other key wins), or stops when cancelled
//	limited  the first stream of an input gets a 429 (the pool moves it
//	         to the other key)
//	leave    the consumer stops after the first chunk (unbilled)
func (p *streamProvider) key(name string) fallback.StreamTier[string, text] {
	return fallback.StreamTierFunc(name, func(ctx context.Context, in string) iter.Seq2[text, error] {
		return func(yield func(text, error) bool) {
			p.calls.Add(1)
			v, _ := p.tried.LoadOrStore(in, new(atomic.Int64))
			n := v.(*atomic.Int64).Add(1)
			kind, _, _ := strings.Cut(in, ":")
			switch {
			case kind == "slow" && n == 1:
				select {
				case <-time.After(200 * time.Millisecond):
				case <-ctx.Done():
					yield(text{}, ctx.Err())
					return
				}
			case kind == "limited" && n == 1:
				yield(text{}, classify.Wrap(errors.New("429"), classify.Verdict{Class: classify.RateLimited, HTTPStatus: 429, RetryAfter: time.Second, Reason: "scripted"}))
				return
			}
			for _, s := range []string{"a", "b"} {
				if !yield(text{s: s}, nil) {
					return
				}
			}
			u := fallback.Usage{InputTokens: 50 + int64(len(in)), OutputTokens: 7}
			cost, ok := prices.Cost("pro", "", u)
			if !ok {
				panic("unpriced")
			}
			p.mu.Lock()
			p.tokens += u.InputTokens + u.OutputTokens
			p.cost += cost
			p.mu.Unlock()
			fallback.Report(ctx, fallback.Reply{Usage: u, HasUsage: true})
			yield(text{s: "c", finish: "STOP"}, nil)
		}
	}, inspectText)
}

// streamPod is one pod: its ledger, sharing the tenant's figures through
// Redis, and its stream chain over a hedged pool of the provider's two
// keys, wrapped in a chaos switch that is off.
type streamPod struct {
	ledger *spend.Ledger
	chain  *fallback.StreamChain[string, text]
}

func newStreamPod(t *testing.T, addr, prefix string, p *streamProvider) *streamPod {
	t.Helper()
	store, err := redisspend.New(newClient(t, addr), redisspend.Options{Prefix: prefix})
	require.NoError(t, err)
	l, err := spend.New(spend.Config{Prices: prices, Store: store, SyncInterval: 20 * time.Millisecond, SyncTimeout: 500 * time.Millisecond})
	require.NoError(t, err)
	off := &fallback.CoolDown{Off: true}
	keys, err := pool.NewStream(pool.StreamConfig[string, text]{Name: "pro", Members: []pool.StreamMember[string, text]{
		{Key: "key-a", Tier: p.key("pro-a"), CoolDown: off}, {Key: "key-b", Tier: p.key("pro-b"), CoolDown: off},
	}})
	require.NoError(t, err)
	var sw chaos.Switch
	c, err := fallback.NewStream(fallback.StreamConfig[string, text]{
		Stages: []fallback.StreamStage[string, text]{{Tier: chaos.StreamTier(keys, &sw), Model: "pro",
			Hedge: fallback.Hedge{Delay: 20 * time.Millisecond, MaxExtra: 1}}},
		Total:        10 * time.Second,
		AbandonAfter: time.Second,
	})
	require.NoError(t, err)
	_, err = l.Attach(c)
	require.NoError(t, err)
	return &streamPod{ledger: l, chain: c}
}

// Two pods share a tenant's figures through one redis-server, each
// streaming through a hedged pool of two keys, 32 concurrent streams a
// pod: plain streams, slow first streams their hedge beats, 429s the pool
// moves to the other key, consumers that leave. Once both ledgers have
// flushed, the fleet's tokens and cost in Redis are exactly what the
// provider billed, and each pod's calls are what the provider served it.
func TestTwoPodsStreamingThroughHedgedPoolsBillExactly(t *testing.T) {
	addr := sharedAddr(t)
	pfx := prefix(t)
	var provs [2]streamProvider
	pods := [2]*streamPod{newStreamPod(t, addr, pfx, &provs[0]), newStreamPod(t, addr, pfx, &provs[1])}
	kinds := []string{"ok", "slow", "limited", "leave"}
	var wg sync.WaitGroup
	var answered, hedgeWins atomic.Int64
	for g := range 64 {
		pod := pods[g%2]
		wg.Go(func() {
			for i := range 8 {
				kind := kinds[(g+i)%len(kinds)]
				tk, err := pod.ledger.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{})
				if !assert.NoError(t, err) {
					return
				}
				s := pod.chain.Stream(tk, fmt.Sprintf("%s:%d-%d", kind, g, i))
				var serr error
				for ch, err := range s.Chunks() {
					if serr = err; err != nil || kind == "leave" && ch.s == "a" {
						break
					}
				}
				tk.End()
				assert.NoError(t, serr)
				if serr == nil {
					answered.Add(1)
				}
				for _, a := range s.Result().Attempts() {
					if a.Hedge && a.Verdict.Class == classify.OK {
						hedgeWins.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	// A hedge that lost settles its calls when its stream returns, after
	// its request ended: each pod's ledger must come to the provider's
	// own count of its streams (however long a loaded machine takes),
	// and then it is flushed.
	for i, pod := range pods {
		assert.Eventually(t, func() bool { return pod.ledger.Totals("acme").Calls == provs[i].calls.Load() }, 10*time.Second, 5*time.Millisecond,
			"pod %d's calls: what the provider served it (%d), counted %d", i, provs[i].calls.Load(), pod.ledger.Totals("acme").Calls)
		require.NoError(t, pod.ledger.Close())
	}
	var tokens int64
	var cost spend.Amount
	for i := range provs {
		tokens += provs[i].tokens
		cost += provs[i].cost
	}
	tok, c := fleet(t, newStore(t, addr, pfx))
	assert.Equal(t, tokens, tok, "the fleet's tokens in Redis")
	assert.Equal(t, cost, c, "the fleet's cost in Redis")
	assert.Positive(t, tokens)
	assert.EqualValues(t, 64*8, answered.Load())
	assert.Positive(t, hedgeWins.Load(), "slow first streams lost to their hedges")
}
