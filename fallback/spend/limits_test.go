package spend_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback/spend"
)

// events collects a ledger's events.
type events struct {
	mu  sync.Mutex
	all []spend.Event
}

func watch(l *spend.Ledger) *events {
	e := &events{}
	l.Observe(func(ev spend.Event) {
		e.mu.Lock()
		e.all = append(e.all, ev)
		e.mu.Unlock()
	})
	return e
}

func (e *events) thresholds() []float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []float64
	for _, ev := range e.all {
		if ev.Kind == spend.ThresholdReached {
			out = append(out, ev.Threshold)
		}
	}
	return out
}

func (e *events) count(k spend.EventKind) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.all {
		if ev.Kind == k {
			n++
		}
	}
	return n
}

// A daily token limit of 1000 with requests of 100 tokens: events at 70%,
// 90% and 100%, low-priority requests shed from 90%, every request refused
// at the limit with an error saying which limit and when it resets.
func TestThresholdsShedAndLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLedger(t, spend.Config{Prices: testPrices(t), Tenants: map[string]spend.Allowance{"acme": {DailyTokens: 1000}}})
		ev := watch(l)
		c := newChain(t, l, &tier{name: "pro", def: answer(50, 50)}, &tier{name: "flash"})
		normal := spend.Request{Tenant: "acme", Scenario: "support"}
		low := spend.Request{Tenant: "acme", Scenario: "batch", Priority: spend.Low}
		est := spend.Estimate{Tokens: 100}

		for i := range 7 {
			_, err := do(t, l, c, normal, est)
			require.NoError(t, err, "request %d", i)
		}
		assert.Equal(t, []float64{0.7}, ev.thresholds())
		// At 700 a low-priority request of 100 would reach 800: admitted.
		_, err := do(t, l, c, low, est)
		require.NoError(t, err)
		// At 800 it would reach 900 = 90%: shed. A normal one goes on.
		_, err = do(t, l, c, low, est)
		var le *spend.LimitError
		require.ErrorAs(t, err, &le)
		assert.ErrorIs(t, err, spend.ErrShed)
		assert.NotErrorIs(t, err, spend.ErrLimitReached)
		assert.Equal(t, spend.Shed, le.Refusal)
		assert.Equal(t, spend.DailyTokens, le.Meter)
		midnight := time.Date(2000, 1, 2, 0, 0, 0, 0, time.UTC) // the bubble starts at 2000-01-01 00:00 UTC
		assert.Equal(t, midnight, le.ResetAt)
		assert.Equal(t, "spend: low-priority request shed at 90% of the daily tokens limit (resets 2000-01-02T00:00:00Z)", err.Error())

		_, err = do(t, l, c, normal, est)
		require.NoError(t, err)
		assert.Equal(t, []float64{0.7, 0.9}, ev.thresholds())
		_, err = do(t, l, c, normal, est)
		require.NoError(t, err)
		assert.Equal(t, []float64{0.7, 0.9, 1}, ev.thresholds())

		// At the limit every request is refused, whatever its priority,
		// before any tier is called.
		calls := l.Totals("acme").Calls
		for _, r := range []spend.Request{normal, low} {
			_, err = do(t, l, c, r, spend.Estimate{})
			require.ErrorAs(t, err, &le)
			assert.ErrorIs(t, err, spend.ErrLimitReached)
			assert.Equal(t, spend.LimitReached, le.Refusal)
			assert.Equal(t, int64(1000), le.Used)
			assert.Equal(t, int64(1000), le.Limit)
			assert.Equal(t, "spend: daily tokens limit reached (resets 2000-01-02T00:00:00Z)", err.Error())
			assert.NotContains(t, err.Error(), "acme", "no tenant id in the error unless opted in")
		}
		assert.Equal(t, calls, l.Totals("acme").Calls)
		tot := l.Totals("acme")
		assert.Equal(t, int64(1), tot.Shed)
		assert.Equal(t, int64(2), tot.Refused)
		assert.Equal(t, 3, ev.count(spend.Refused))

		// The refusal classifies as a quota with a retry-after until the reset.
		v := le.Verdict()
		assert.Equal(t, classify.QuotaExhausted, v.Class)
		assert.Equal(t, 24*time.Hour, v.RetryAfter)
		assert.NotContains(t, v.Reason, "acme")
	})
}

// A request whose estimate would take a meter past its limit is refused,
// and so is every request once the meter is full.
func TestEstimatePastTheLimit(t *testing.T) {
	l := newLedger(t, spend.Config{Prices: testPrices(t), Tenants: map[string]spend.Allowance{"acme": {DailyCost: amt("1")}}, TenantInErrors: true})
	_, err := l.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{Cost: amt("1.5")})
	var le *spend.LimitError
	require.ErrorAs(t, err, &le)
	assert.Equal(t, spend.DailyCost, le.Meter)
	assert.Contains(t, err.Error(), `spend: daily cost limit reached for tenant "acme" (resets `, "the tenant opted in")
	tk, err := l.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{Cost: amt("1")})
	require.NoError(t, err)
	// The estimate is reserved while the request runs.
	_, err = l.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{Cost: 1})
	require.ErrorIs(t, err, spend.ErrLimitReached)
	tk.End() // ended without using anything: the reservation goes
	tk2, err := l.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{Cost: 1})
	require.NoError(t, err)
	tk2.End()
}

// An estimate is reserved at admission and replaced by the real usage
// when the request ends.
func TestReconcileAfterEstimate(t *testing.T) {
	l := newLedger(t, spend.Config{Prices: testPrices(t), Tenants: map[string]spend.Allowance{"acme": {DailyTokens: 10_000, MonthlyCost: amt("10")}}})
	pro := &tier{name: "pro", def: answer(300, 200)}
	c := newChain(t, l, pro, &tier{name: "flash"})
	tk, err := l.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{Tokens: 4000, Cost: amt("0.5")})
	require.NoError(t, err)
	use := l.Use("acme")
	assert.Equal(t, int64(0), use[spend.DailyTokens].Used)
	assert.Equal(t, int64(4000), use[spend.DailyTokens].Reserved)
	assert.Equal(t, int64(amt("0.5")), use[spend.MonthlyCost].Reserved)

	_, err = c.Do(tk, "q")
	require.NoError(t, err)
	use = l.Use("acme")
	assert.Equal(t, int64(500), use[spend.DailyTokens].Used, "the real usage replaced the estimate")
	assert.Equal(t, int64(0), use[spend.DailyTokens].Reserved)
	assert.Equal(t, int64(perM(300, proIn)+perM(200, proOut)), use[spend.MonthlyCost].Used)
	assert.Equal(t, int64(0), use[spend.MonthlyCost].Reserved)
	assert.InDelta(t, 0.05, use[spend.DailyTokens].Utilization(), 1e-9)

	// An underestimate counts in full: the estimate is a reservation, not
	// a cap.
	tk, err = l.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{Tokens: 1})
	require.NoError(t, err)
	_, err = c.Do(tk, "q")
	require.NoError(t, err)
	assert.Equal(t, int64(1000), l.Use("acme")[spend.DailyTokens].Used)
}

// Limits reset at the period's boundary, in the ledger's location: the
// daily ones at midnight, the monthly ones on the first.
func TestPeriodReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tokyo := time.FixedZone("JST", 9*3600)
		l := newLedger(t, spend.Config{Location: tokyo, Tenants: map[string]spend.Allowance{"acme": {DailyTokens: 100, MonthlyTokens: 250}}})
		ev := watch(l)
		c := newChain(t, l, &tier{name: "pro", def: answer(50, 50)}, &tier{name: "flash"})
		req := spend.Request{Tenant: "acme"}
		// The bubble starts at 2000-01-01 09:00 in Tokyo.
		_, err := do(t, l, c, req, spend.Estimate{})
		require.NoError(t, err)
		_, err = do(t, l, c, req, spend.Estimate{})
		var le *spend.LimitError
		require.ErrorAs(t, err, &le)
		assert.Equal(t, time.Date(2000, 1, 2, 0, 0, 0, 0, tokyo), le.ResetAt)

		time.Sleep(time.Until(le.ResetAt) - time.Nanosecond)
		_, err = do(t, l, c, req, spend.Estimate{})
		require.ErrorIs(t, err, spend.ErrLimitReached, "a nanosecond before midnight")
		// The ledger's timer moves the day on at midnight; the same
		// instant may still count in the old day.
		time.Sleep(time.Millisecond)
		_, err = do(t, l, c, req, spend.Estimate{})
		require.NoError(t, err, "after midnight")
		assert.Equal(t, int64(100), l.Use("acme")[spend.DailyTokens].Used)
		assert.Equal(t, int64(200), l.Use("acme")[spend.MonthlyTokens].Used)

		// The next day the monthly limit refuses half-way through.
		time.Sleep(24 * time.Hour)
		_, err = do(t, l, c, req, spend.Estimate{Tokens: 100})
		require.ErrorAs(t, err, &le)
		assert.Equal(t, spend.MonthlyTokens, le.Meter)
		assert.Equal(t, time.Date(2000, 2, 1, 0, 0, 0, 0, tokyo), le.ResetAt)
		_, err = do(t, l, c, req, spend.Estimate{Tokens: 50})
		require.NoError(t, err)
		_, err = do(t, l, c, req, spend.Estimate{})
		require.ErrorIs(t, err, spend.ErrLimitReached)

		// Thresholds are reported again in the new period.
		before := len(ev.thresholds())
		time.Sleep(time.Until(time.Date(2000, 2, 1, 0, 0, 0, 0, tokyo)) + time.Millisecond)
		_, err = do(t, l, c, req, spend.Estimate{})
		require.NoError(t, err)
		u := l.Use("acme")
		assert.Equal(t, int64(100), u[spend.MonthlyTokens].Used)
		assert.Equal(t, time.Date(2000, 3, 1, 0, 0, 0, 0, tokyo), u[spend.MonthlyTokens].ResetAt)
		assert.Greater(t, len(ev.thresholds()), before)
	})
}

// A request admitted before midnight and ending after it counts in the
// new day; its reservation leaves with the old one.
func TestReservationAcrossMidnight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLedger(t, spend.Config{Tenants: map[string]spend.Allowance{"acme": {DailyTokens: 1000}}})
		time.Sleep(24*time.Hour - time.Second)
		started := make(chan struct{})
		release := make(chan struct{})
		slow := &blockingTier{started: started, release: release, out: answer(100, 100).out}
		chain := newSlowChain(t, l, slow)
		tk, err := l.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{Tokens: 900})
		require.NoError(t, err)
		done := make(chan error)
		go func() {
			_, err := chain.Do(tk, "q")
			done <- err
		}()
		<-started
		assert.Equal(t, int64(900), l.Use("acme")[spend.DailyTokens].Reserved)
		time.Sleep(2 * time.Second)
		assert.Equal(t, int64(0), l.Use("acme")[spend.DailyTokens].Reserved, "a new day reserves nothing yet")
		close(release)
		require.NoError(t, <-done)
		u := l.Use("acme")[spend.DailyTokens]
		assert.Equal(t, int64(200), u.Used)
		assert.Equal(t, int64(0), u.Reserved)
	})
}

// An unknown tenant gets Default, or a refusal with RefuseUnknown; tenants
// past MaxTenants share the overflow account.
func TestUnknownTenants(t *testing.T) {
	l := newLedger(t, spend.Config{Default: spend.Allowance{DailyTokens: 10}, MaxTenants: 2})
	for _, name := range []string{"a", "b", "c", "d"} {
		tk, err := l.Admit(context.Background(), spend.Request{Tenant: name}, spend.Estimate{Tokens: 6})
		if name == "d" {
			require.ErrorIs(t, err, spend.ErrLimitReached, "c's reservation fills the overflow account d shares")
			continue
		}
		require.NoError(t, err, name)
		defer tk.End()
	}
	assert.Equal(t, []string{"a", "b"}, l.Tenants())
	assert.Equal(t, int64(1), l.OverflowTotals().Refused)

	strict := newLedger(t, spend.Config{Tenants: map[string]spend.Allowance{"acme": {}}, RefuseUnknown: true})
	_, err := strict.Admit(context.Background(), spend.Request{Tenant: "mallory"}, spend.Estimate{})
	require.ErrorIs(t, err, spend.ErrUnknownTenant)
	var le *spend.LimitError
	require.True(t, errors.As(err, &le))
	assert.Equal(t, classify.Auth, le.Verdict().Class)
	assert.False(t, strings.Contains(err.Error(), "mallory"))
	tk, err := strict.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{})
	require.NoError(t, err)
	tk.End()
}

func TestConfigErrors(t *testing.T) {
	_, err := spend.New(spend.Config{
		Tenants:      map[string]spend.Allowance{"a": {DailyTokens: -1}},
		Thresholds:   []float64{0, 1.5},
		ShedAt:       -1,
		MaxTenants:   -1,
		SyncInterval: time.Second,
	})
	require.Error(t, err)
	for _, want := range []string{`Tenants["a"]: limits must not be negative`, "Thresholds must lie in (0, 1), got 0", "got 1.5", "ShedAt", "MaxTenants", "need a Store"} {
		assert.Contains(t, err.Error(), want)
	}
}
