package spend_test

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/cache"
	"github.com/tierguard/tierguard/fallback/spend"
)

// The README's pattern — Admit with an estimate — refuses before use
// reaches the limit (used + estimate would pass it). That first refusal
// has an event of its own (FirstRefusal), once, before the Refused event,
// saying where the meter stood; the limit's ThresholdReached waits for
// use to reach the limit, which it did not here (970 of 1000): before,
// it fired at the first refusal, when use was short of the limit.
func TestFirstRefusalIsNotTheLimitReached(t *testing.T) {
	l := newLedger(t, spend.Config{Prices: testPrices(t), Tenants: map[string]spend.Allowance{"acme": {DailyTokens: 1000}}})
	ev := watch(l)
	// Each request uses 97 tokens and is admitted with an estimate of 100.
	c := newChain(t, l, &tier{name: "pro", def: answer(47, 50)}, &tier{name: "flash"})
	normal := spend.Request{Tenant: "acme", Scenario: "support"}
	est := spend.Estimate{Tokens: 100}
	admitted := 0
	for range 20 {
		if _, err := do(t, l, c, normal, est); err == nil {
			admitted++
		}
	}
	assert.Equal(t, 10, admitted, "970 used: the 11th request's 100 would pass the limit")
	assert.Equal(t, int64(970), l.Use("acme")[spend.DailyTokens].Used)
	assert.Equal(t, []float64{0.7, 0.9}, ev.thresholds(), "use never reached the limit")

	ev.mu.Lock()
	var kinds []spend.EventKind
	for _, e := range ev.all {
		kinds = append(kinds, e.Kind)
	}
	require.Len(t, kinds, 2+1+10)
	assert.Equal(t, []spend.EventKind{spend.ThresholdReached, spend.ThresholdReached, spend.FirstRefusal, spend.Refused}, kinds[:4], "the first refusal's event comes before its Refused")
	first := ev.all[2]
	assert.Equal(t, 1.0, first.Threshold)
	assert.Equal(t, spend.DailyTokens, first.Meter)
	assert.Equal(t, "acme", first.Tenant)
	assert.Equal(t, int64(970), first.Used, "where the meter stood when the limit refused")
	assert.Equal(t, int64(1000), first.Limit)
	assert.False(t, first.ResetAt.IsZero())
	for _, e := range ev.all[3:] {
		assert.Equal(t, spend.Refused, e.Kind)
		assert.Equal(t, spend.LimitReached, e.Refusal)
		assert.Equal(t, 1.0, e.Threshold, "a refusal at the limit carries the limit's threshold")
	}
	ev.mu.Unlock()

	// A request whose estimate fits uses 97 tokens: use reaches the
	// limit (1067), and now the limit's event fires, once.
	_, err := do(t, l, c, normal, spend.Estimate{Tokens: 30})
	require.NoError(t, err)
	assert.Equal(t, []float64{0.7, 0.9, 1}, ev.thresholds())
	assert.Equal(t, 1, ev.count(spend.FirstRefusal))
}

// A shed request carries the shed threshold; a request refused at the
// limit the limit's. The first refusal and the limit reached by use are
// one event each per period.
func TestRefusalsCarryTheirThreshold(t *testing.T) {
	l := newLedger(t, spend.Config{Prices: testPrices(t), ShedAt: 0.8, Tenants: map[string]spend.Allowance{"acme": {DailyTokens: 1000}}})
	ev := watch(l)
	c := newChain(t, l, &tier{name: "pro", def: answer(50, 50)}, &tier{name: "flash"})
	for range 7 {
		_, err := do(t, l, c, spend.Request{Tenant: "acme"}, spend.Estimate{Tokens: 100})
		require.NoError(t, err)
	}
	_, err := do(t, l, c, spend.Request{Tenant: "acme", Priority: spend.Low}, spend.Estimate{Tokens: 100})
	require.ErrorIs(t, err, spend.ErrShed)
	_, err = do(t, l, c, spend.Request{Tenant: "acme"}, spend.Estimate{Tokens: 400})
	require.ErrorIs(t, err, spend.ErrLimitReached)
	// The limit is then reached by use: no second event.
	for range 3 {
		_, err := do(t, l, c, spend.Request{Tenant: "acme"}, spend.Estimate{Tokens: 100})
		require.NoError(t, err)
	}
	_, err = do(t, l, c, spend.Request{Tenant: "acme"}, spend.Estimate{})
	require.ErrorIs(t, err, spend.ErrLimitReached)

	ev.mu.Lock()
	defer ev.mu.Unlock()
	var got []string
	for _, e := range ev.all {
		switch e.Kind {
		case spend.Refused:
			got = append(got, e.Refusal.String()+"@"+fmtShare(e.Threshold))
		case spend.ThresholdReached:
			got = append(got, "reached@"+fmtShare(e.Threshold))
		case spend.FirstRefusal:
			got = append(got, "first_refusal@"+fmtShare(e.Threshold))
		}
	}
	assert.Equal(t, []string{"reached@0.7", "shed@0.8", "first_refusal@1", "limit_reached@1", "reached@0.9", "reached@1", "limit_reached@1"}, got)
}

func fmtShare(f float64) string {
	switch f {
	case 0.7:
		return "0.7"
	case 0.8:
		return "0.8"
	case 0.9:
		return "0.9"
	case 1:
		return "1"
	}
	return "other"
}

// A refusal that is not about a threshold (an unknown tenant) carries
// none.
func TestUnknownTenantRefusalHasNoThreshold(t *testing.T) {
	l := newLedger(t, spend.Config{Tenants: map[string]spend.Allowance{"acme": {}}, RefuseUnknown: true})
	ev := watch(l)
	_, err := l.Admit(context.Background(), spend.Request{Tenant: "mallory"}, spend.Estimate{})
	require.ErrorIs(t, err, spend.ErrUnknownTenant)
	require.Len(t, ev.all, 1)
	assert.Zero(t, ev.all[0].Threshold)
}

// One request that takes four limited meters past every threshold at
// once reports all twelve events (the last four were dropped before).
func TestEveryThresholdOfEveryMeterIsReported(t *testing.T) {
	l := newLedger(t, spend.Config{Prices: testPrices(t), Tenants: map[string]spend.Allowance{
		"acme": {DailyTokens: 100, MonthlyTokens: 100, DailyCost: 1, MonthlyCost: 1},
	}})
	ev := watch(l)
	c := newChain(t, l, &tier{name: "pro", def: answer(500, 500)}, &tier{name: "flash"})
	_, err := do(t, l, c, spend.Request{Tenant: "acme"}, spend.Estimate{})
	require.NoError(t, err)
	assert.Equal(t, []float64{0.7, 0.9, 1, 0.7, 0.9, 1, 0.7, 0.9, 1, 0.7, 0.9, 1}, ev.thresholds())
}

// A soft threshold fires at the first use whose float value reaches the
// threshold's share of the limit, at every scale: the ledger compares
// uses as integers against the next level due, and that level must never
// pass a use the float comparison counts as reached.
func TestSoftThresholdAtItsExactUse(t *testing.T) {
	for _, limit := range []int64{1000, 1 << 40, 1 << 62, math.MaxInt64} {
		x := 0.7 * float64(limit)
		at := int64(x)
		for _, d := range []int64{-1100, -1024, -600, -513, -512, -300, -257, -256, -255, -2, -1, 0, 1, 2} {
			used := at + d
			if used <= 0 || used >= limit {
				continue
			}
			l := newLedger(t, spend.Config{Tenants: map[string]spend.Allowance{"acme": {DailyTokens: limit}}})
			var fired []float64
			remove := l.Observe(func(e spend.Event) {
				if e.Kind == spend.ThresholdReached && e.Meter == spend.DailyTokens {
					fired = append(fired, e.Threshold)
				}
			})
			l.RecordEmbedding(fallback.WithRequest(context.Background(), fallback.Request{Tenant: "acme"}),
				cache.EmbeddingUsage{Model: "m", Usage: fallback.Usage{InputTokens: used}, HasUsage: true})
			remove()
			if float64(used) >= x {
				assert.Contains(t, fired, 0.7, "limit %d, use %d", limit, used)
			} else {
				assert.Empty(t, fired, "limit %d, use %d", limit, used)
			}
		}
	}
}
