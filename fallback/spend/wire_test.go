package spend_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/chaos"
	"github.com/tierguard/tierguard/fallback/pool"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// provider is a fake upstream's own books: each response it sends is
// billed here, as it is sent, and only then reported to the chain
// (fallback.Report), as an SDK adapter does. The ledger must agree with it
// to the token and to the nano.
type provider struct {
	prices *spend.Prices
	mu     sync.Mutex
	usage  fallback.Usage
	cost   spend.Amount
	sent   int
	calls  atomic.Int64
	tried  sync.Map // model/input → calls so far
}

func (p *provider) bill(ctx context.Context, model string, u fallback.Usage) {
	cost, ok := p.prices.Cost(model, "", u)
	if !ok {
		panic("unpriced model " + model)
	}
	p.mu.Lock()
	p.usage.InputTokens += u.InputTokens
	p.usage.OutputTokens += u.OutputTokens
	p.cost += cost
	p.sent++
	p.mu.Unlock()
	fallback.Report(ctx, fallback.Reply{Usage: u, HasUsage: true, Response: fallback.ResponseInfo{Model: model, FinishReason: "STOP"}})
}

func (p *provider) books() (fallback.Usage, spend.Amount, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.usage, p.cost, p.sent
}

// model is one deployment of a model at the fake provider. What a call
// does depends on the input's kind, the part before ":":
//
//	ok        answers at once
//	retry     fails with a 503 (unbilled) on its first call, then answers
//	invalid   answers "bad", which the validator rejects (billed)
//	slow      answers after 300 ms, or stops when cancelled (unbilled)
//	stubborn  answers after 300 ms even when cancelled (billed: a hedge
//	          loser the provider finished)
//	stuck     ignores its context and answers after a second (billed: an
//	          abandoned call)
//	cancel    like slow; the caller cancels at 30 ms
//	shared    answers after 50 ms; requests in pairs share one execution
//	blink     like shared, but one of the pair has left before it asks
//	limited   its first call gets a 429 with a 100 ms Retry-After
//	          (unbilled): the pool rotates to the other key, the first
//	          cools down, and the hedge finds no member while it does
type model struct {
	p     *provider
	name  string // the tier's name
	model string
	// primary is set on the first tier's deployments: only they misbehave;
	// the fallback answers every kind at once.
	primary bool
}

func (m *model) Name() string { return m.name }

func (m *model) Call(ctx context.Context, in string) (string, error) {
	m.p.calls.Add(1)
	kind, _, _ := strings.Cut(in, ":")
	v, _ := m.p.tried.LoadOrStore(m.model+"/"+in, new(atomic.Int64))
	n := int(v.(*atomic.Int64).Add(1))
	answer := fallback.Usage{InputTokens: 100 + int64(len(in)), OutputTokens: 10 + int64(n)}
	if !m.primary {
		m.p.bill(ctx, m.model, answer)
		return "answer", nil
	}
	wait := func(d time.Duration) error {
		select {
		case <-time.After(d):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	switch kind {
	case "retry":
		if n == 1 {
			return "", classify.Wrap(errors.New("503"), classify.Verdict{Class: classify.Transient, HTTPStatus: 503, Reason: "scripted"})
		}
	case "invalid":
		m.p.bill(ctx, m.model, answer)
		return "bad", nil
	case "slow", "cancel":
		if err := wait(300 * time.Millisecond); err != nil {
			return "", err
		}
	case "stubborn":
		time.Sleep(300 * time.Millisecond)
	case "stuck":
		time.Sleep(time.Second)
	case "shared", "blink":
		if err := wait(50 * time.Millisecond); err != nil {
			return "", err
		}
	case "limited":
		if n == 1 {
			return "", classify.Wrap(errors.New("429"), classify.Verdict{Class: classify.RateLimited, HTTPStatus: 429, RetryAfter: 100 * time.Millisecond, Reason: "scripted"})
		}
		if err := wait(80 * time.Millisecond); err != nil {
			return "", err
		}
	}
	m.p.bill(ctx, m.model, answer)
	return "answer", nil
}

var notBad = validate.Func[string](func(s string) error {
	if s == "bad" {
		return validate.Errorf("test", "scripted rejection")
	}
	return nil
})

// wireChain is pro, a pool of two keys hedged on each other, then flash,
// then a default answer, with AbandonAfter and shared executions.
func wireChain(t *testing.T, p *provider, wrap, keyed bool) *fallback.Chain[string, string] {
	t.Helper()
	thePool, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
		{Key: "key-1", Tier: &model{p: p, name: "pro-1", model: "pro", primary: true}},
		{Key: "key-2", Tier: &model{p: p, name: "pro-2", model: "pro", primary: true}},
	}})
	require.NoError(t, err)
	pro := fallback.Stage[string, string]{Tier: thePool, Model: "pro", TryTimeout: 200 * time.Millisecond, Validate: notBad,
		Retry: retry.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond},
		Hedge: fallback.Hedge{Delay: 50 * time.Millisecond, MaxExtra: 1}}
	if wrap {
		// A wrapped pool is a plain tier to the chain (no hedge on its
		// members), and its members' reports still reach the ledger.
		var sw chaos.Switch
		pro.Tier, pro.Hedge = chaos.Tier[string, string](thePool, &sw), fallback.Hedge{}
	}
	cfg := fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{
			pro,
			{Tier: &model{p: p, name: "flash", model: "flash"}, Model: "flash", Validate: notBad},
		},
		Total:        2 * time.Second,
		AbandonAfter: 20 * time.Millisecond,
		Default:      func(context.Context, string) (string, bool) { return "default", true },
	}
	if keyed {
		cfg.Key = func(in string) string {
			if kind, rest, _ := strings.Cut(in, ":"); kind == "shared" || kind == "blink" {
				return kind + rest[:len(rest)-1] // pairs: shared:12a, shared:12b
			}
			return ""
		}
	}
	c, err := fallback.New(cfg)
	require.NoError(t, err)
	return c
}

// Billing at the wire: over a mixed run at 64 concurrent callers — plain
// calls, retries, fallbacks after invalid answers, a pool hedged on its
// members, hedge losers the provider finished, calls abandoned and billed
// late, shared executions, cancellations — the ledger's tokens and cost
// equal the provider's own count exactly, and so do its calls (with
// shared executions whose starter left before they began, and hedges that
// found their pool's other key cooling down); every request is counted
// once, and no failed request counts as answered.
func TestLedgerMatchesTheProvider(t *testing.T) {
	for _, tc := range []struct{ wrap, keyed bool }{{false, true}, {true, true}, {false, false}} {
		t.Run(fmt.Sprintf("wrapped_pool=%v/key=%v", tc.wrap, tc.keyed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := &provider{prices: testPrices(t)}
				l := newLedger(t, spend.Config{Prices: p.prices})
				c := wireChain(t, p, tc.wrap, tc.keyed)
				_, err := l.Attach(c)
				require.NoError(t, err)

				kinds := []string{"ok", "retry", "invalid", "slow", "stubborn", "stuck", "cancel", "shared", "blink", "limited"}
				const callers, each = 64, 8
				var answered, failed atomic.Int64
				var wg sync.WaitGroup
				for g := range callers {
					wg.Go(func() {
						for i := range each {
							kind := kinds[(g+i)%len(kinds)]
							in := fmt.Sprintf("%s:%d-%d", kind, g, i)
							if kind == "shared" || kind == "blink" {
								// The caller after g asks the same at the same time.
								in = fmt.Sprintf("%s:%d-%d%c", kind, g/2, i, 'a'+g%2)
							}
							tk, err := l.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{})
							require.NoError(t, err)
							ctx, cancel := context.WithCancel(tk)
							switch {
							case kind == "cancel":
								time.AfterFunc(30*time.Millisecond, cancel)
							case kind == "blink" && g%2 == 0:
								// Gone before the execution it starts has begun.
								cancel()
							}
							_, err = c.Do(ctx, in)
							cancel()
							tk.End()
							if err != nil {
								failed.Add(1)
							} else {
								answered.Add(1)
							}
						}
					})
				}
				wg.Wait()
				// Let the stuck and stubborn calls finish and report.
				time.Sleep(5 * time.Second)
				synctest.Wait()
				require.Zero(t, c.Stats().Stuck)

				usage, cost, sent := p.books()
				tot := l.Totals("acme")
				assert.Equal(t, usage.InputTokens, tot.Usage.InputTokens, "input tokens")
				assert.Equal(t, usage.OutputTokens, tot.Usage.OutputTokens, "output tokens")
				assert.Equal(t, cost, tot.Cost, "cost")
				assert.Equal(t, p.calls.Load(), tot.Calls, "calls: the provider's own count")
				assert.Positive(t, sent)
				assert.Equal(t, int64(callers*each), tot.Requests, "every request once")
				assert.Equal(t, answered.Load(), tot.Answered, "answered as the callers saw it")
				assert.Equal(t, failed.Load(), tot.Failed, "failed as the callers saw it")
				assert.Positive(t, failed.Load(), "the cancelled callers")
				assert.Zero(t, l.Untracked())
			})
		})
	}
}

// A pool of keys bills what its members answered: the members' reports
// reach the ledger through the pool.
func TestPoolTrafficIsBilled(t *testing.T) {
	p := &provider{prices: testPrices(t)}
	l := newLedger(t, spend.Config{Prices: p.prices})
	thePool, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
		{Key: "key-1", Tier: &model{p: p, name: "pro-1", model: "pro"}},
		{Key: "key-2", Tier: &model{p: p, name: "pro-2", model: "pro"}},
	}})
	require.NoError(t, err)
	c, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: thePool, Model: "pro"}}})
	require.NoError(t, err)
	_, err = l.Attach(c)
	require.NoError(t, err)
	for i := range 10 {
		tk, err := l.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{})
		require.NoError(t, err)
		_, err = c.Do(tk, fmt.Sprintf("ok:%d", i))
		require.NoError(t, err)
		tk.End()
	}
	usage, cost, sent := p.books()
	require.Equal(t, 10, sent)
	tot := l.Totals("acme")
	assert.Equal(t, usage, tot.Usage)
	assert.Equal(t, cost, tot.Cost)
	assert.Zero(t, tot.Unpriced)
	assert.Equal(t, int64(10), tot.Valid)
}

// The request that started a shared execution and left before it ended
// is recorded as it ended for its caller — not answered — while the
// execution's calls are still its cost, and the caller who waited is
// answered.
func TestSharedStarterWhoGivesUpIsNotAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &provider{prices: testPrices(t)}
		l := newLedger(t, spend.Config{Prices: p.prices})
		slow := fallback.Tier("pro", func(ctx context.Context, in string) (string, error) {
			select {
			case <-time.After(500 * time.Millisecond):
			case <-ctx.Done():
				return "", ctx.Err()
			}
			p.bill(ctx, "pro", fallback.Usage{InputTokens: 1000, OutputTokens: 100})
			return "answer", nil
		})
		c, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{Tier: slow, Model: "pro"}},
			Key: func(in string) string { return in }})
		require.NoError(t, err)
		_, err = l.Attach(c)
		require.NoError(t, err)
		var records []*spend.Record
		var mu sync.Mutex
		l.ObserveRecords(func(r *spend.Record) {
			mu.Lock()
			defer mu.Unlock()
			rec := *r
			records = append(records, &rec)
		})

		starter, err := l.Admit(context.Background(), spend.Request{Tenant: "acme", ID: "starter"}, spend.Estimate{})
		require.NoError(t, err)
		// The starter's caller goes away at 100 ms (a deadline would be
		// the execution's too).
		ctx, cancel := context.WithCancel(starter)
		defer cancel()
		time.AfterFunc(100*time.Millisecond, cancel)
		done := make(chan error)
		go func() {
			_, err := c.Do(ctx, "same question")
			starter.End()
			done <- err
		}()
		synctest.Wait()
		waiter, err := l.Admit(context.Background(), spend.Request{Tenant: "acme", ID: "waiter"}, spend.Estimate{})
		require.NoError(t, err)
		res, err := c.Do(waiter, "same question")
		require.NoError(t, err)
		assert.True(t, res.Shared)
		waiter.End()
		require.Error(t, <-done, "the starter gave up at 100 ms")
		synctest.Wait()

		tot := l.Totals("acme")
		assert.Equal(t, int64(2), tot.Requests)
		assert.Equal(t, int64(1), tot.Answered, "the waiter")
		assert.Equal(t, int64(1), tot.Failed, "the starter")
		usage, cost, _ := p.books()
		assert.Equal(t, usage, tot.Usage, "billed once")
		assert.Equal(t, cost, tot.Cost)
		mu.Lock()
		defer mu.Unlock()
		byID := map[string]*spend.Record{}
		for _, r := range records {
			byID[r.Request.ID] = r
		}
		require.Contains(t, byID, "starter")
		assert.False(t, byID["starter"].Answered)
		assert.False(t, byID["starter"].Valid)
		assert.Equal(t, 1, byID["starter"].Calls, "the execution's call is the starter's cost")
		require.Contains(t, byID, "waiter")
		assert.True(t, byID["waiter"].Answered)
	})
}
