package benchcmp

import (
	"context"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/bulkhead"
)

// contender is one implementation under test: op runs one guarded call and
// reports whether it ended as the benchmark expects.
type contender struct {
	impl string
	op   func() bool
}

// bench runs every contender serially and under b.RunParallel, as
// <b>/mode=serial/impl=X and <b>/mode=parallel/impl=X (inside any
// sub-benchmark the caller is in). Each contender is built once, by mk,
// and shared by both modes. Besides sec/op (wall time) it reports
// cpu-ns/op, the process's CPU time per operation, which a busy machine
// inflates far less.
func bench(b *testing.B, mk func() []contender) {
	cs := mk()
	for _, mode := range []string{"serial", "parallel"} {
		b.Run("mode="+mode, func(b *testing.B) {
			for _, c := range cs {
				b.Run("impl="+c.impl, func(b *testing.B) { run(b, mode, c.op) })
			}
		})
	}
}

// run runs op b.N times, serially or under b.RunParallel (mode), and
// reports allocations and cpu-ns/op.
func run(b *testing.B, mode string, op func() bool) {
	b.ReportAllocs()
	start := cpuTime()
	if mode == "serial" {
		for b.Loop() {
			if !op() {
				b.Fatal("unexpected outcome")
			}
		}
	} else {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if !op() {
					b.Error("unexpected outcome")
					return
				}
			}
		})
	}
	if used := cpuTime() - start; used > 0 && b.N > 0 {
		b.ReportMetric(float64(used.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func ok(v string, err error) bool { return err == nil && v == Answer }

// breakerContenders are the success-path contenders of a breaker, with or
// without a rolling window.
func breakerContenders(window bool) []contender {
	tg := TierguardBreaker(window)
	tgx := TierguardBreaker(window)
	gb := GoBreaker(window)
	gb2 := GoBreakerTwoStep(window)
	fsExec := failsafe.With(FailsafeBreaker(window))
	fsPermit := FailsafeBreaker(window)
	ctx := context.Background()
	work := func(context.Context) (string, error) { return Work() }
	return []contender{
		{"tierguard", func() bool {
			tok, err := tg.Allow()
			if err != nil {
				return false
			}
			v, err := Work()
			tok.Report(err)
			return ok(v, err)
		}},
		{"tierguard-do", func() bool { return ok(breaker.Do(ctx, tgx, work)) }},
		{"gobreaker", func() bool { return ok(gb.Execute(Work)) }},
		{"gobreaker-twostep", func() bool {
			done, err := gb2.Allow()
			if err != nil {
				return false
			}
			v, err := Work()
			done(err)
			return ok(v, err)
		}},
		{"failsafe", func() bool { return ok(fsExec.Get(Work)) }},
		{"failsafe-permit", func() bool {
			if !fsPermit.TryAcquirePermit() {
				return false
			}
			v, err := Work()
			if err != nil {
				fsPermit.RecordError(err)
			} else {
				fsPermit.RecordResult(v)
			}
			return ok(v, err)
		}},
	}
}

// BenchmarkBreakerSuccess is the closed breaker's success path: a breaker
// that trips after 5 failures in a row.
func BenchmarkBreakerSuccess(b *testing.B) {
	bench(b, func() []contender { return breakerContenders(false) })
}

// BenchmarkBreakerWindow is the success path of a breaker that also trips
// on a failure ratio (50% of at least 20 calls) over a 60s rolling window.
func BenchmarkBreakerWindow(b *testing.B) {
	bench(b, func() []contender { return breakerContenders(true) })
}

// BenchmarkBreakerOpen is the rejection by an open breaker.
func BenchmarkBreakerOpen(b *testing.B) {
	bench(b, func() []contender {
		tg := TierguardBreaker(false)
		TripTierguard(tg)
		gb := GoBreaker(false)
		TripGoBreaker(gb)
		fsCB := FailsafeBreaker(false)
		TripFailsafe(fsCB)
		fsExec := failsafe.With(fsCB)
		ctx := context.Background()
		work := func(context.Context) (string, error) { return Work() }
		return []contender{
			{"tierguard", func() bool { _, err := tg.Allow(); return err != nil }},
			{"tierguard-do", func() bool { _, err := breaker.Do(ctx, tg, work); return err != nil }},
			{"gobreaker", func() bool { _, err := gb.Execute(Work); return err != nil }},
			{"failsafe", func() bool { _, err := fsExec.Get(Work); return err != nil }},
			{"failsafe-permit", func() bool { return !fsCB.TryAcquirePermit() }},
		}
	})
}

// BenchmarkBulkhead is taking and returning a free slot around Work.
func BenchmarkBulkhead(b *testing.B) {
	bench(b, func() []contender {
		ctx := context.Background()
		tg := TierguardBulkhead()
		tgRun := TierguardBulkhead()
		fs := FailsafeBulkhead()
		fsExec := failsafe.With(FailsafeBulkhead())
		work := func(context.Context) (string, error) { return Work() }
		return []contender{
			{"tierguard", func() bool {
				if tg.Acquire(ctx) != nil {
					return false
				}
				v, err := Work()
				tg.Release()
				return ok(v, err)
			}},
			{"tierguard-do", func() bool { return ok(bulkhead.Do(ctx, tgRun, work)) }},
			{"failsafe-permit", func() bool {
				if !fs.TryAcquirePermit() {
					return false
				}
				v, err := Work()
				fs.ReleasePermit()
				return ok(v, err)
			}},
			{"failsafe", func() bool { return ok(fsExec.Get(Work)) }},
		}
	})
}

// chainVariant is a request context and a per-try timeout.
type chainVariant struct {
	name     string
	deadline bool
	try      time.Duration
	total    time.Duration
}

var chainVariants = []chainVariant{
	{name: "ctx=background/try=none"},
	{name: "ctx=deadline/try=none", deadline: true},
	{name: "ctx=deadline/try=1s", deadline: true, try: TryTimeout},
	// The README's quick start: a Total and a TryTimeout, no caller
	// deadline.
	{name: "quickstart/total=10s/try=8s", total: 10 * time.Second, try: 8 * time.Second},
}

// chainBench runs the chain contenders for every variant. want is the
// expected answer.
func chainBench(b *testing.B, primaryOpen bool, want string) {
	for _, v := range chainVariants {
		b.Run(v.name, func(b *testing.B) {
			ctx := context.Background()
			if v.deadline {
				var cancel context.CancelFunc
				// The caller's context, made once: its cost is the caller's.
				ctx, cancel = context.WithTimeout(ctx, time.Hour)
				b.Cleanup(cancel)
			}
			bench(b, func() []contender {
				o := ChainOptions{PrimaryOpen: primaryOpen, TryTimeout: v.try, Total: v.total}
				tg := TierguardChain(o)
				fs := FailsafeChain(o, v.deadline)
				fsGet := func() (string, error) { return fs.Get(Work) }
				if v.deadline {
					// failsafe-go sees a request's context through
					// WithContext, which copies the executor.
					fsGet = func() (string, error) { return fs.WithContext(ctx).Get(Work) }
				}
				cs := []contender{
					{"tierguard", func() bool {
						res, err := tg.Do(ctx, "q")
						return err == nil && res.Value == want
					}},
					{"failsafe", func() bool { v, err := fsGet(); return err == nil && v == want }},
				}
				if !primaryOpen && v.total == 0 {
					floor := &HandRolled{}
					if v.deadline {
						floor.Until = time.Now().Add(time.Hour)
					}
					cs = append(cs, contender{"handrolled", func() bool { v, err := floor.Do(Work); return err == nil && v == want }})
				}
				if primaryOpen && !v.deadline && v.total == 0 {
					plain := FailsafeChainPlain(o)
					cs = append(cs, contender{"failsafe-plainfallback", func() bool {
						v, err := plain.Get(Work)
						return err == nil && v == want
					}})
				}
				return cs
			})
		})
	}
}

// BenchmarkChainSuccess is the whole chain's success path: one tier behind
// a bulkhead, a breaker and a retry policy, and a default answer.
func BenchmarkChainSuccess(b *testing.B) { chainBench(b, false, Answer) }

// BenchmarkChainFallback is the chain with its primary's breaker open: the
// answer comes from the second tier.
func BenchmarkChainFallback(b *testing.B) { chainBench(b, true, "second") }

// BenchmarkStreamFirstChunk is a three-chunk stream read through a
// StreamChain (bulkhead, breaker, retry, commit at the first chunk with
// content), against ranging over the tier's sequence directly.
func BenchmarkStreamFirstChunk(b *testing.B) {
	bench(b, func() []contender {
		chain := TierguardStreamChain()
		tier := StreamTier()
		return []contender{
			{"direct", func() bool {
				n := 0
				for _, err := range tier.Stream(context.Background(), "q") {
					if err != nil {
						return false
					}
					n++
				}
				return n == 3
			}},
			{"tierguard", func() bool {
				n := 0
				for _, err := range chain.Stream(context.Background(), "q").Chunks() {
					if err != nil {
						return false
					}
					n++
				}
				return n == 3
			}},
		}
	})
}
