package benchcmp

import (
	"context"
	"errors"
	"iter"
	"maps"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	fscb "github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/sony/gobreaker/v2"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/cache"
	"github.com/tierguard/tierguard/fallback/spend"
)

// The one goroutine left running is not ours: go.opencensus.io, which
// the genai SDK of the loopback benchmark pulls in, starts a worker at
// init that never stops.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// TestContenders runs each benchmark's contenders once: they must end as
// the benchmark expects, or it would measure something else.
func TestContenders(t *testing.T) {
	for _, window := range []bool{false, true} {
		for _, c := range breakerContenders(window) {
			if !c.op() {
				t.Errorf("breaker (window %v) %s: unexpected outcome", window, c.impl)
			}
		}
	}
}

func TestBreakersTripAlike(t *testing.T) {
	tg := TierguardBreaker(false)
	TripTierguard(tg)
	if _, err := tg.Allow(); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("tierguard: %v", err)
	}
	gb := GoBreaker(false)
	TripGoBreaker(gb)
	if _, err := gb.Execute(Work); !errors.Is(err, gobreaker.ErrOpenState) {
		t.Fatalf("gobreaker: %v", err)
	}
	fs := FailsafeBreaker(false)
	TripFailsafe(fs)
	if _, err := failsafe.With(fs).Get(Work); !errors.Is(err, fscb.ErrOpen) {
		t.Fatalf("failsafe: %v", err)
	}

	// The window variants trip on the ratio too: 10 successes, then two
	// failures for every success (never 5 in a row) until the ratio
	// reaches 50%.
	tgw := TierguardBreaker(true)
	gbw := GoBreaker(true)
	fsw := FailsafeBreaker(true)
	for i := range 60 {
		var err error
		if i >= 10 && i%3 != 0 {
			err = ErrBoom
		}
		if tok, aerr := tgw.Allow(); aerr == nil {
			tok.Report(err)
		}
		_, _ = gbw.Execute(func() (string, error) { return "", err })
		if fsw.TryAcquirePermit() {
			fsw.RecordError(err)
		}
	}
	if tgw.State() != breaker.Open || gbw.State() != gobreaker.StateOpen || !fsw.IsOpen() {
		t.Fatalf("window breakers: tierguard %v, gobreaker %v, failsafe %v", tgw.State(), gbw.State(), fsw.State())
	}
}

func TestChains(t *testing.T) {
	deadline, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for _, v := range chainVariants {
		ctx := context.Background()
		if v.deadline {
			ctx = deadline
		}
		for _, open := range []bool{false, true} {
			o := ChainOptions{PrimaryOpen: open, TryTimeout: v.try}
			want, tier := Answer, "pro"
			if open {
				want, tier = "second", "flash"
			}
			res, err := TierguardChain(o).Do(ctx, "q")
			if err != nil || res.Value != want || res.Tier != tier || res.UpstreamCalls != 1 {
				t.Errorf("%s open=%v: tierguard %+v, %v", v.name, open, res, err)
			}
			fs := FailsafeChain(o, v.deadline)
			if v.deadline {
				fs = fs.WithContext(ctx)
			}
			// The second executor must run Work's counterpart exactly once,
			// and the primary never when open.
			calls := 0
			got, err := fs.Get(func() (string, error) { calls++; return Work() })
			wantCalls := 1
			if open {
				wantCalls = 0
			}
			if err != nil || got != want || calls != wantCalls {
				t.Errorf("%s open=%v: failsafe %q, %v, %d primary calls", v.name, open, got, err, calls)
			}
			if open {
				if got, err := FailsafeChainPlain(o).Get(Work); err != nil || got != want {
					t.Errorf("%s: failsafe plain fallback %q, %v", v.name, got, err)
				}
			}
		}
	}
}

// TestTryTimeoutReachesTheTier checks that the per-try timeout variants give
// the tier a context that ends within TryTimeout. tierguard's carries the
// deadline; failsafe-go's timeout policy cancels a child context from a
// timer, so its context is cancellable but carries no deadline.
func TestTryTimeoutReachesTheTier(t *testing.T) {
	within := func(ctx context.Context) bool {
		d, ok := ctx.Deadline()
		return ok && time.Until(d) <= TryTimeout
	}
	var tgOK bool
	c, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{{
		Tier: fallback.Tier("pro", func(ctx context.Context, _ string) (string, error) {
			tgOK = within(ctx)
			return Answer, nil
		}),
		TryTimeout: TryTimeout,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(context.Background(), "q"); err != nil || !tgOK {
		t.Fatalf("tierguard: per-try deadline not seen (%v)", err)
	}
	var fsOK bool
	fs := FailsafeChain(ChainOptions{TryTimeout: TryTimeout}, false)
	if _, err := fs.GetWithExecution(func(e failsafe.Execution[string]) (string, error) {
		fsOK = e.Context().Done() != nil
		return Answer, nil
	}); err != nil || !fsOK {
		t.Fatalf("failsafe: per-try deadline not seen (%v)", err)
	}
}

// quickCases are the quick start's paths: pro answers; pro fails, or
// answers empty, and flash answers; both fail and the default answers.
var quickCases = []struct {
	name string
	f    QuickFuncs
	want string
}{
	{"success", QuickFuncs{}, Answer},
	{"pro-fails", QuickFuncs{Pro: failing, Flash: second}, "second"},
	{"pro-empty", QuickFuncs{Pro: empty, Flash: second}, "second"},
	{"both-fail", QuickFuncs{Pro: failing, Flash: failing}, QuickDefault},
}

func failing(context.Context, string) (string, error) { return "", ErrBoom }
func empty(context.Context, string) (string, error)   { return " ", nil }
func second(context.Context, string) (string, error)  { return Second() }

func TestQuickStart(t *testing.T) {
	ctx := context.Background()
	for _, tc := range quickCases {
		res, err := TierguardQuickStart(tc.f).Do(ctx, "q")
		if err != nil || res.Value != tc.want {
			t.Errorf("%s: tierguard %q, %v", tc.name, res.Value, err)
		}
		for _, one := range []bool{false, true} {
			floor := NewQuickStartFloor(tc.f)
			floor.OneDeadline = one
			if got, err := floor.Do(ctx, "q"); err != nil || got != tc.want {
				t.Errorf("%s: floor (one deadline %v) %q, %v", tc.name, one, got, err)
			}
		}
		if got, err := NewFailsafeQuick(tc.f).Get(); err != nil || got != tc.want {
			t.Errorf("%s: failsafe %q, %v", tc.name, got, err)
		}
	}
}

// TestQuickStartDeadlines checks that pro's attempts see the per-try
// timeout (tierguard and the floor: a deadline within 8s — tierguard's may
// be nearer, as it keeps a reserve of the total for flash; failsafe-go: a
// cancellable context) and flash's its own.
func TestQuickStartDeadlines(t *testing.T) {
	within := func(limit time.Duration, seen *bool) func(context.Context, string) (string, error) {
		return func(ctx context.Context, _ string) (string, error) {
			d, ok := ctx.Deadline()
			*seen = ok && time.Until(d) <= limit && time.Until(d) > 0
			return Answer, nil
		}
	}
	var pro, flash bool
	f := QuickFuncs{Pro: within(QuickProTry, &pro)}
	if _, err := TierguardQuickStart(f).Do(context.Background(), "q"); err != nil || !pro {
		t.Errorf("tierguard: pro's deadline not seen (%v)", err)
	}
	for _, one := range []bool{false, true} {
		pro, flash = false, false
		floor := NewQuickStartFloor(f)
		floor.OneDeadline = one
		if _, err := floor.Do(context.Background(), "q"); err != nil || !pro {
			t.Errorf("floor (one deadline %v): pro's deadline not seen (%v)", one, err)
		}
		floor = NewQuickStartFloor(QuickFuncs{Pro: failing, Flash: within(QuickFlashTry, &flash)})
		floor.OneDeadline = one
		if _, err := floor.Do(context.Background(), "q"); err != nil || !flash {
			t.Errorf("floor (one deadline %v): flash's deadline not seen (%v)", one, err)
		}
	}
	var done bool
	f = QuickFuncs{Pro: func(ctx context.Context, _ string) (string, error) { done = ctx.Done() != nil; return Answer, nil }}
	if _, err := NewFailsafeQuick(f).Get(); err != nil || !done {
		t.Errorf("failsafe: pro's context not cancellable (%v)", err)
	}
}

// TestQuickStartBreakers checks that pro's breaker opens after failures in
// every contender, and that the answer then comes from flash without
// calling pro.
func TestQuickStartBreakers(t *testing.T) {
	calls := 0
	f := QuickFuncs{Pro: func(context.Context, string) (string, error) { calls++; return "", ErrBoom }, Flash: second}
	floor := NewQuickStartFloor(f)
	fs := NewFailsafeQuick(f)
	for range TripAfter {
		_, _ = floor.Do(context.Background(), "q")
		_, _ = fs.Get()
	}
	if floor.Breaker().State() != breaker.Open || !fs.Breaker.IsOpen() {
		t.Fatalf("breakers: floor %v, failsafe %v", floor.Breaker().State(), fs.Breaker.State())
	}
	calls = 0
	if got, err := floor.Do(context.Background(), "q"); got != "second" || err != nil || calls != 0 {
		t.Errorf("floor, open: %q, %v, %d pro calls", got, err, calls)
	}
	if got, err := fs.Get(); got != "second" || err != nil || calls != 0 {
		t.Errorf("failsafe, open: %q, %v, %d pro calls", got, err, calls)
	}
}

func TestStreams(t *testing.T) {
	ctx := context.Background()
	collect := func(seq func(func(string, error) bool), n int) (string, error) {
		var s string
		for c, err := range seq {
			if err != nil {
				return s, err
			}
			if s += c; len(s) == n {
				break
			}
		}
		return s, nil
	}
	for _, n := range []int{1, 3} {
		want := "ok."[:n]
		if got, err := collect(StreamTier().Stream(ctx, "q"), n); got != want || err != nil {
			t.Errorf("direct, %d chunks: %q, %v", n, got, err)
		}
		if got, err := collect(TierguardStreamChain().Stream(ctx, "q").Chunks(), n); got != want || err != nil {
			t.Errorf("tierguard, %d chunks: %q, %v", n, got, err)
		}
		if got, err := collect(NewFailsafeStream(StreamTier()).Stream(ctx, "q"), n); got != want || err != nil {
			t.Errorf("failsafe, %d chunks: %q, %v", n, got, err)
		}
	}
	// failsafe-go retries a stream that fails before its first chunk.
	starts := 0
	flaky := fallback.StreamTierFunc("pro", func(ctx context.Context, in string) iter.Seq2[string, error] {
		starts++
		if starts == 1 {
			return func(yield func(string, error) bool) { yield("", ErrBoom) }
		}
		return StreamTier().Stream(ctx, in)
	}, func(c string) fallback.ChunkInfo { return fallback.ChunkInfo{Text: c} })
	if got, err := collect(NewFailsafeStream(flaky).Stream(ctx, "q"), 3); got != "ok." || err != nil || starts != 2 {
		t.Errorf("failsafe, a failed start: %q, %v, %d starts", got, err, starts)
	}
}

func TestRateLimiters(t *testing.T) {
	// With room, every contender admits a long run of calls.
	tg, xr, fs := TierguardLimiter(BenchQuota), XRateLimiter(BenchQuota), FailsafeLimiter(BenchQuota)
	for i := range 100_000 {
		if !tg.Allow(0) || !xr.Allow() || !fs.TryAcquirePermit() {
			t.Fatalf("call %d refused", i)
		}
	}
	// Spent, each refuses: tierguard and x/time/rate after their burst,
	// failsafe-go's bursty limiter after the period's quota.
	small := RateQuota{Requests: 10, Per: time.Minute, Burst: 2}
	count := func(allow func() bool) int {
		n := 0
		for range 20 {
			if allow() {
				n++
			}
		}
		return n
	}
	tgs := TierguardLimiter(small)
	if n := count(func() bool { return tgs.Allow(0) }); n != small.Burst {
		t.Errorf("tierguard admitted %d of 20, want %d", n, small.Burst)
	}
	tgt := TierguardLimiter(small)
	if n := count(func() bool { r := tgt.Take(0); return r.OK() && !r.Retry() }); n != small.Burst {
		t.Errorf("tierguard Take admitted %d of 20, want %d", n, small.Burst)
	}
	if n := count(XRateLimiter(small).Allow); n != small.Burst {
		t.Errorf("x/time/rate admitted %d of 20, want %d", n, small.Burst)
	}
	if n := count(FailsafeLimiter(small).TryAcquirePermit); n != small.Requests {
		t.Errorf("failsafe admitted %d of 20, want %d", n, small.Requests)
	}
	fsExec := failsafe.With(FailsafeLimiter(small))
	if n := count(func() bool { _, err := fsExec.Get(Work); return err == nil }); n != small.Requests {
		t.Errorf("failsafe executor admitted %d of 20, want %d", n, small.Requests)
	}
}

func TestRateLimitedChains(t *testing.T) {
	ctx := context.Background()
	for _, c := range []*fallback.Chain[string, string]{TierguardLimitedChain(TierguardLimiter(BenchQuota)), TierguardLimitedChain(nil)} {
		if res, err := c.Do(ctx, "q"); err != nil || res.Value != Answer || res.UpstreamCalls != 1 {
			t.Errorf("tierguard with room: %+v, %v", res, err)
		}
	}
	if got, err := FailsafeLimitedChain(FailsafeLimiter(BenchQuota)).Get(Work); err != nil || got != Answer {
		t.Errorf("failsafe with room: %q, %v", got, err)
	}
	// A spent limiter: the tier is skipped, the default answers.
	one := RateQuota{Requests: 2, Per: time.Hour, Burst: 1}
	tg := TierguardLimitedChain(TierguardLimiter(one))
	_, _ = tg.Do(ctx, "q")
	if res, err := tg.Do(ctx, "q"); err != nil || res.Value != "default" || res.UpstreamCalls != 0 {
		t.Errorf("tierguard spent: %+v, %v", res, err)
	}
	fs := FailsafeLimitedChain(FailsafeLimiter(RateQuota{Requests: 1, Per: time.Hour}))
	_, _ = fs.Get(Work)
	calls := 0
	if got, err := fs.Get(func() (string, error) { calls++; return Work() }); err != nil || got != "default" || calls != 0 {
		t.Errorf("failsafe spent: %q, %v, %d calls", got, err, calls)
	}
}

func TestCaches(t *testing.T) {
	ctx := context.Background()
	tg := TierguardCache()
	defer func() { _ = tg.Close() }()
	if v, hit, found := tg.Get(ctx, CachePrompt); !found || v != Answer || hit != cache.HitExact {
		t.Errorf("tierguard: %q, %q, %v", v, hit, found)
	}
	if _, _, found := tg.Get(ctx, "why is the sea blue?"); found {
		t.Error("tierguard: a miss hit")
	}
	sm, smNorm := SyncMapCache(false), SyncMapCache(true)
	if v, found := sm.Get(CachePrompt); !found || v != Answer {
		t.Errorf("syncmap: %q, %v", v, found)
	}
	if _, found := sm.Get("  Why is the SKY blue? "); found {
		t.Error("syncmap: normalizes")
	}
	for _, q := range []string{CachePrompt, "  Why is the SKY blue? "} {
		if v, found := smNorm.Get(q); !found || v != Answer {
			t.Errorf("syncmap-normalized %q: %q, %v", q, v, found)
		}
		if v, _, found := tg.Get(ctx, q); !found || v != Answer {
			t.Errorf("tierguard %q: %q, %v", q, v, found)
		}
	}
}

// TestLedgers checks that the ledger and the hand-rolled budget charge a
// request the same tokens and cost, and that the budget refuses past its
// limit.
func TestLedgers(t *testing.T) {
	l := TierguardLedger()
	c := LedgerChain()
	if _, err := l.Attach(c); err != nil {
		t.Fatal(err)
	}
	est := spend.Estimate{Tokens: LedgerEstimateTokens, Cost: LedgerEstimateCost * spend.Nano}
	tk, err := l.Admit(context.Background(), spend.Request{Tenant: LedgerTenant}, est)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.Do(tk, "q"); err != nil || res.Value != Answer {
		t.Fatalf("chain: %+v, %v", res, err)
	}
	tk.End()
	const tokens, cost = LedgerInputTokens + LedgerOutputTokens, LedgerInputTokens*LedgerInputPrice + LedgerOutputTokens*LedgerOutputPrice
	tot := l.Totals(LedgerTenant)
	if tot.Requests != 1 || tot.Usage.InputTokens+tot.Usage.OutputTokens != tokens || tot.Cost != cost*spend.Nano {
		t.Errorf("ledger: %d requests, %+v, cost %v", tot.Requests, tot.Usage, tot.Cost)
	}
	hr := NewHandRolledBudget()
	if !hr.Admit(LedgerEstimateTokens, LedgerEstimateCost) {
		t.Fatal("budget refused")
	}
	hr.Charge(LedgerEstimateTokens, LedgerEstimateCost, LedgerInputTokens, LedgerOutputTokens)
	if gotT, gotC := hr.Used(); gotT != tokens || gotC != cost {
		t.Errorf("budget: %d tokens, cost %d", gotT, gotC)
	}
	hr.limit[3] = cost + LedgerEstimateCost - 1 // the month's cost
	if hr.Admit(LedgerEstimateTokens, LedgerEstimateCost) {
		t.Error("budget admitted past its limit")
	}
	if gotT, gotC := hr.Used(); gotT != tokens || gotC != cost {
		t.Errorf("budget after a refusal: %d tokens, cost %d", gotT, gotC)
	}
}

// point is one data point a request moved: its instrument, its attributes
// and its count (histograms) or value (sums).
type point struct {
	name, attrs string
	n           int64
}

// requestPoints runs do once and returns the data points of the five
// instruments otelx updates on a first-try success that it moved (and the
// active requests' point, which goes up and down).
func requestPoints(t *testing.T, r *sdkmetric.ManualReader, do func()) map[point]bool {
	t.Helper()
	do()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[point]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if p.Value != 0 || m.Name == "tierguard.active_requests" {
						got[point{m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), p.Value}] = true
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					got[point{m.Name, p.Attributes.Encoded(attribute.DefaultEncoder()), int64(p.Count)}] = true
				}
			}
		}
	}
	// The guards' observable instruments are read at collection, not
	// per request.
	for p := range got {
		if strings.HasPrefix(p.name, "tierguard.bulkhead.") || strings.HasPrefix(p.name, "tierguard.breaker.") {
			delete(got, p)
		}
	}
	return got
}

// TestOtelFloor checks that the floor records what otelx records for a
// first-try success: the same instruments, attributes and counts.
func TestOtelFloor(t *testing.T) {
	mp, r := SDKMeterProvider()
	defer func() { _ = mp.Shutdown(context.Background()) }()
	c, inst := OtelChain(mp)
	defer func() { _ = inst.Close() }()
	want := requestPoints(t, r, func() {
		if res, err := c.Do(context.Background(), "q"); err != nil || res.Value != Answer {
			t.Fatalf("chain: %+v, %v", res, err)
		}
	})
	fmp, fr := SDKMeterProvider()
	defer func() { _ = fmp.Shutdown(context.Background()) }()
	floor, err := NewOtelFloor(fmp)
	if err != nil {
		t.Fatal(err)
	}
	got := requestPoints(t, fr, func() {
		bare, _ := OtelChain(nil)
		if v, err := floor.Do(context.Background(), Unobserved(context.Background(), bare)); err != nil || v != Answer {
			t.Fatalf("floor: %q, %v", v, err)
		}
	})
	if len(want) != 5 || !maps.Equal(got, want) {
		t.Errorf("floor recorded %v\notelx recorded %v", got, want)
	}
}

func TestGroups(t *testing.T) {
	const n = 4
	keys := GroupKeys(n + 1)
	type group struct {
		name string
		get  func(string) any
	}
	tgb, tgh, tgl := TierguardBreakerGroup(n), TierguardBulkheadGroup(n), TierguardLimiterGroup(BenchQuota, n)
	gb, sem, xr := GoBreakerGroup(), SemaphoreGroup(), XRateGroup(BenchQuota)
	groups := []group{
		{"tierguard breaker", func(k string) any { return tgb.Get(k) }},
		{"tierguard bulkhead", func(k string) any { return tgh.Get(k) }},
		{"tierguard ratelimit", func(k string) any { return tgl.Get(k) }},
		{"gobreaker-syncmap", func(k string) any { return gb.Get(k) }},
		{"chan-syncmap", func(k string) any { return reflect.ValueOf(sem.Get(k)).Pointer() }},
		{"xrate-syncmap", func(k string) any { return xr.Get(k) }},
	}
	for _, g := range groups {
		seen := map[any]bool{}
		for _, k := range keys[:n] {
			m := g.get(k)
			if g.get(k) != m {
				t.Errorf("%s: two members for %s", g.name, k)
			}
			seen[m] = true
		}
		if len(seen) != n {
			t.Errorf("%s: %d members for %d keys", g.name, len(seen), n)
		}
	}
	// Members are apart: one key's open breaker or full bulkhead leaves
	// another's alone.
	TripTierguard(tgb.Get(keys[0]))
	TripGoBreaker(gb.Get(keys[0]))
	if tgb.Get(keys[1]).State() != breaker.Closed || gb.Get(keys[1]).State() != gobreaker.StateClosed {
		t.Error("breakers: one key's trip reached another")
	}
	for range Slots {
		if !tgh.Get(keys[0]).TryAcquire() || !sem.Get(keys[0]).TryAcquire() {
			t.Fatal("bulkheads: a free slot refused")
		}
	}
	if tgh.Get(keys[0]).TryAcquire() || sem.Get(keys[0]).TryAcquire() {
		t.Error("bulkheads: a full bulkhead admitted")
	}
	if !tgh.Get(keys[1]).TryAcquire() || !sem.Get(keys[1]).TryAcquire() {
		t.Error("bulkheads: one key's full bulkhead reached another")
	}
	// tierguard's groups are bounded: a key past the bound shares the
	// overflow member; the sync.Map floors grow.
	if tgb.Get(keys[n]) != tgb.Get("another") || tgh.Get(keys[n]) != tgh.Get("another") || tgl.Get(keys[n]) != tgl.Get("another") {
		t.Error("tierguard: keys past the bound do not share the overflow member")
	}
	if gb.Get(keys[n]) == gb.Get("another") {
		t.Error("gobreaker-syncmap: bounded")
	}
}

// TestBytesPerKey checks that the memory measure sees what is kept.
func TestBytesPerKey(t *testing.T) {
	keys := GroupKeys(1000)
	held := make(map[string][]byte, len(keys))
	if got := BytesPerKey(keys, func(k string) { held[k] = make([]byte, 1024) }); got < 1024 || got > 2048 {
		t.Errorf("%.0f B/key for 1 KiB per key", got)
	}
	runtime.KeepAlive(held)
}
