package spend_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// reply is a fake tier's answer: its text and the tokens it was billed.
type reply struct {
	Text  string
	Usage fallback.Usage
}

// step is one scripted call of a fake tier.
type step struct {
	out reply
	err error
}

// tier is a scripted tier reporting usage: it answers with the next step,
// then with its default.
type tier struct {
	name  string
	mu    sync.Mutex
	steps []step
	def   step
	calls int
}

func (f *tier) Name() string { return f.name }

func (f *tier) Call(ctx context.Context, _ string) (reply, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	s := f.def
	if len(f.steps) > 0 {
		s, f.steps = f.steps[0], f.steps[1:]
	}
	if s.out.Usage != (fallback.Usage{}) {
		fallback.Report(ctx, fallback.Reply{Usage: s.out.Usage, HasUsage: true})
	}
	return s.out, s.err
}

func (f *tier) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func answer(in, out int64) step {
	return step{out: reply{Text: `{"ok":true}`, Usage: fallback.Usage{InputTokens: in, OutputTokens: out}}}
}

// malformed is an answer the validator rejects, billed all the same.
func malformed(in, out int64) step {
	return step{out: reply{Text: "not json", Usage: fallback.Usage{InputTokens: in, OutputTokens: out}}}
}

func failure(c classify.Class) step {
	return step{err: classify.Wrap(errors.New("upstream "+c.String()), classify.Verdict{Class: c, Reason: "scripted"})}
}

var validJSON = validate.Field(func(r reply) string { return r.Text }, validate.JSON())

// newChain builds pro → flash over fake tiers: pro with its models'
// prices, two attempts on transient and rate-limited failures, no wait.
func newChain(t testing.TB, l *spend.Ledger, pro, flash *tier, groups ...string) *fallback.Chain[string, reply] {
	t.Helper()
	c, err := fallback.New(fallback.Config[string, reply]{Stages: []fallback.Stage[string, reply]{
		{Tier: pro, Model: "pro", Validate: validJSON, Retry: retry.Policy{MaxAttempts: 2, BaseDelay: 1, MaxDelay: 1}},
		{Tier: flash, Model: "flash", Validate: validJSON, Retry: retry.Policy{MaxAttempts: 1}},
	}})
	require.NoError(t, err)
	if l != nil {
		_, err = l.Attach(c, groups...)
		require.NoError(t, err)
	}
	return c
}

func newLedger(t testing.TB, cfg spend.Config) *spend.Ledger {
	t.Helper()
	l, err := spend.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	return l
}

// do admits a request for tenant with estimate est and runs it.
func do(t testing.TB, l *spend.Ledger, c *fallback.Chain[string, reply], req spend.Request, est spend.Estimate) (fallback.Result[reply], error) {
	t.Helper()
	tk, err := l.Admit(context.Background(), req, est)
	if err != nil {
		return fallback.Result[reply]{}, err
	}
	defer tk.End()
	return c.Do(tk, "q")
}

// blockingTier signals when it is called and answers when released.
type blockingTier struct {
	started chan struct{}
	release chan struct{}
	out     reply
}

func (b *blockingTier) Name() string { return "slow" }

func (b *blockingTier) Call(ctx context.Context, _ string) (reply, error) {
	close(b.started)
	<-b.release
	fallback.Report(ctx, fallback.Reply{Usage: b.out.Usage, HasUsage: true})
	return b.out, nil
}

func newSlowChain(t testing.TB, l *spend.Ledger, b *blockingTier) *fallback.Chain[string, reply] {
	t.Helper()
	c, err := fallback.New(fallback.Config[string, reply]{Stages: []fallback.Stage[string, reply]{{Tier: b, Model: "pro"}}})
	require.NoError(t, err)
	_, err = l.Attach(c)
	require.NoError(t, err)
	return c
}

type chainT = *fallback.Chain[string, reply]
