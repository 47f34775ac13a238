package benchcmp

import (
	"context"
	"flag"
	"strconv"
	"sync"
	"testing"

	"github.com/failsafe-go/failsafe-go"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/spend"
)

var large = flag.Bool("benchcmp.large", false, "also run the group memory benchmarks at 10^6 keys")

// BenchmarkQuickStart is the README's quick start on its success path
// (pro answers), as the README prints it (TierguardQuickStart), against the
// same guards by hand (QuickStartFloor, with a context for the total and
// one per try, or with one deadline per try) and failsafe-go's equivalent
// (FailsafeQuick).
func BenchmarkQuickStart(b *testing.B) {
	bench(b, func() []contender {
		tg := TierguardQuickStart(QuickFuncs{})
		floor := NewQuickStartFloor(QuickFuncs{})
		lean := NewQuickStartFloor(QuickFuncs{})
		lean.OneDeadline = true
		fs := NewFailsafeQuick(QuickFuncs{})
		ctx := context.Background()
		return []contender{
			{"tierguard", func() bool {
				res, err := tg.Do(ctx, "q")
				return err == nil && res.Value == Answer
			}},
			{"floor", func() bool { return ok(floor.Do(ctx, "q")) }},
			{"floor-onedeadline", func() bool { return ok(lean.Do(ctx, "q")) }},
			{"failsafe", func() bool { return ok(fs.Get()) }},
		}
	})
}

// BenchmarkStream reads a three-chunk stream to its first chunk
// (read=first) or to its end (read=all): through a StreamChain (bulkhead,
// breaker, retry, commit at the first chunk with content), through
// failsafe-go around iter.Pull2 (FailsafeStream), and ranging over the
// tier's sequence directly.
func BenchmarkStream(b *testing.B) {
	for _, read := range []struct {
		name string
		want int
	}{{"first", 1}, {"all", 3}} {
		b.Run("read="+read.name, func(b *testing.B) {
			bench(b, func() []contender {
				tier := StreamTier()
				chain := TierguardStreamChain()
				fs := NewFailsafeStream(StreamTier())
				ctx := context.Background()
				count := func(seq func(func(string, error) bool)) bool {
					n := 0
					for _, err := range seq {
						if err != nil {
							return false
						}
						if n++; n == read.want {
							break
						}
					}
					return n == read.want
				}
				return []contender{
					{"direct", func() bool { return count(tier.Stream(ctx, "q")) }},
					{"tierguard", func() bool { return count(chain.Stream(ctx, "q").Chunks()) }},
					{"failsafe", func() bool { return count(fs.Stream(ctx, "q")) }},
				}
			})
		})
	}
}

// BenchmarkRateLimit is one admission by a rate limiter with room:
// tierguard's Allow and Take, golang.org/x/time/rate's Allow, failsafe-go's
// permit API (TryAcquirePermit) and its executor.
func BenchmarkRateLimit(b *testing.B) {
	bench(b, func() []contender {
		tg, tgTake := TierguardLimiter(BenchQuota), TierguardLimiter(BenchQuota)
		xr := XRateLimiter(BenchQuota)
		fs := FailsafeLimiter(BenchQuota)
		fsExec := failsafe.With(FailsafeLimiter(BenchQuota))
		return []contender{
			{"tierguard", func() bool { return tg.Allow(0) }},
			{"tierguard-take", func() bool {
				r := tgTake.Take(0)
				return r.OK() && !r.Retry() && r.Delay() == 0
			}},
			{"xrate", xr.Allow},
			{"failsafe-permit", fs.TryAcquirePermit},
			{"failsafe", func() bool { return ok(fsExec.Get(Work)) }},
		}
	})
}

// BenchmarkRateLimitChain is the chain's success path with its tier behind
// a rate limiter with room (ratelimit.Tier), against the same chain
// unlimited and failsafe-go's executor with its rate limiter innermost.
func BenchmarkRateLimitChain(b *testing.B) {
	bench(b, func() []contender {
		tg := TierguardLimitedChain(TierguardLimiter(BenchQuota))
		bare := TierguardLimitedChain(nil)
		fs := FailsafeLimitedChain(FailsafeLimiter(BenchQuota))
		ctx := context.Background()
		return []contender{
			{"tierguard", func() bool {
				res, err := tg.Do(ctx, "q")
				return err == nil && res.Value == Answer
			}},
			{"tierguard-unlimited", func() bool {
				res, err := bare.Do(ctx, "q")
				return err == nil && res.Value == Answer
			}},
			{"failsafe", func() bool { return ok(fs.Get(Work)) }},
		}
	})
}

// BenchmarkCacheExactHit is the lookup of a prompt cached as it is asked:
// tierguard's cache.Cache.Get (normalisation, scope, exact layer) against
// a sync.Map load, with and without the same normalisation.
func BenchmarkCacheExactHit(b *testing.B) {
	bench(b, func() []contender {
		tg := TierguardCache()
		b.Cleanup(func() { _ = tg.Close() })
		sm, smNorm := SyncMapCache(false), SyncMapCache(true)
		ctx := context.Background()
		return []contender{
			{"tierguard", func() bool {
				v, hit, found := tg.Get(ctx, CachePrompt)
				return found && v == Answer && hit == "exact"
			}},
			{"syncmap", func() bool { v, found := sm.Get(CachePrompt); return found && v == Answer }},
			{"syncmap-normalized", func() bool { v, found := smNorm.Get(CachePrompt); return found && v == Answer }},
		}
	})
}

// BenchmarkLedger is a request admitted against four limits and charged
// what its tier reported: tierguard's spend ledger attached to a one-tier
// chain (AdmitInto with a Ticket reused from a sync.Pool, or Admit, which allocates it; the
// chain's Do; End), against a hand-written budget (HandRolledBudget: an
// atomic add and compare per meter) around the same chain, unobserved
// (handrolled) and observed by an observer that does nothing
// (handrolled-observed, LedgerChainObserved). All include the chain: the
// ledger is fed by the chain it is attached to, which turns on the chain's
// observed path; tierguard less handrolled-observed is the ledger's own
// cost, handrolled-observed less handrolled the chain's for being
// observed.
func BenchmarkLedger(b *testing.B) {
	bench(b, func() []contender {
		l := TierguardLedger()
		c := LedgerChain()
		if _, err := l.Attach(c); err != nil {
			b.Fatal(err)
		}
		lAdmit := TierguardLedger()
		cAdmit := LedgerChain()
		if _, err := lAdmit.Attach(cAdmit); err != nil {
			b.Fatal(err)
		}
		hr := NewHandRolledBudget()
		bare := LedgerChain()
		hrObserved := NewHandRolledBudget()
		observed := LedgerChainObserved()
		ctx := context.Background()
		req := spend.Request{Tenant: LedgerTenant}
		est := spend.Estimate{Tokens: LedgerEstimateTokens, Cost: LedgerEstimateCost * spend.Nano}
		// A server reuses its per-request state: tickets come from a
		// pool, one per request in flight.
		tickets := sync.Pool{New: func() any { return new(spend.Ticket) }}
		return []contender{
			{"tierguard", func() bool {
				tk := tickets.Get().(*spend.Ticket)
				defer tickets.Put(tk)
				if l.AdmitInto(tk, ctx, req, est) != nil {
					return false
				}
				res, err := c.Do(tk, "q")
				tk.End()
				return err == nil && res.Value == Answer
			}},
			{"tierguard-admit", func() bool {
				tk, err := lAdmit.Admit(ctx, req, est)
				if err != nil {
					return false
				}
				res, err := cAdmit.Do(tk, "q")
				tk.End()
				return err == nil && res.Value == Answer
			}},
			{"handrolled", func() bool {
				if !hr.Admit(LedgerEstimateTokens, LedgerEstimateCost) {
					return false
				}
				res, err := bare.Do(ctx, "q")
				hr.Charge(LedgerEstimateTokens, LedgerEstimateCost, LedgerInputTokens, LedgerOutputTokens)
				return err == nil && res.Value == Answer
			}},
			{"handrolled-observed", func() bool {
				if !hrObserved.Admit(LedgerEstimateTokens, LedgerEstimateCost) {
					return false
				}
				res, err := observed.Do(ctx, "q")
				hrObserved.Charge(LedgerEstimateTokens, LedgerEstimateCost, LedgerInputTokens, LedgerOutputTokens)
				return err == nil && res.Value == Answer
			}},
		}
	})
}

// BenchmarkOtel is a request's metrics on the OpenTelemetry SDK (a manual
// reader, tracing off): a one-tier chain instrumented by otelx, against
// the same measurements written by hand around the same chain not
// observed (OtelFloor) and observed by a do-nothing observer, and that
// chain not instrumented and observed by the do-nothing observer alone.
func BenchmarkOtel(b *testing.B) {
	bench(b, func() []contender {
		mp, _ := SDKMeterProvider()
		b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
		tg, inst := OtelChain(mp)
		b.Cleanup(func() { _ = inst.Close() })
		bare, _ := OtelChain(nil)
		floorMP, _ := SDKMeterProvider()
		b.Cleanup(func() { _ = floorMP.Shutdown(context.Background()) })
		floor, err := NewOtelFloor(floorMP)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		floorChain, _ := OtelChain(nil)
		floored := Unobserved(ctx, floorChain)
		// The floor around the chain observed by an observer that does
		// nothing: what any observer costs the chain (its clock reads per
		// attempt, the attempt's call record, the events), with the same
		// measurements by hand. otelx against it is otelx's own cost.
		nopChain, _ := OtelChain(nil)
		nopChain.Observe(fallback.NopObserver{})
		observedFloor := Unobserved(ctx, nopChain)
		return []contender{
			{"tierguard", func() bool {
				res, err := tg.Do(ctx, "q")
				return err == nil && res.Value == Answer
			}},
			{"otel-floor", func() bool {
				v, err := floor.Do(ctx, floored)
				return err == nil && v == Answer
			}},
			{"otel-floor-observed", func() bool {
				v, err := floor.Do(ctx, observedFloor)
				return err == nil && v == Answer
			}},
			{"tierguard-uninstrumented", func() bool {
				res, err := bare.Do(ctx, "q")
				return err == nil && res.Value == Answer
			}},
			{"tierguard-nop-observed", func() bool {
				res, err := nopChain.Do(ctx, "q")
				return err == nil && res.Value == Answer
			}},
		}
	})
}

// groupContender is a group's Get on an existing key, and the bytes its
// group holds per idle key.
type groupContender struct {
	impl        string
	get         func(key string)
	bytesPerKey float64
}

// benchGroups runs, for 10^4 keys (and 10^6 with -benchcmp.large), each
// group made by mk: it fills the group with that many idle keys, measuring
// the heap they hold (BytesPerKey, reported as B/key), then times Get on
// one existing key, serially and in parallel.
func benchGroups(b *testing.B, mk func(keys int) []groupContender) {
	sizes := []int{10_000}
	if *large {
		sizes = append(sizes, 1_000_000)
	}
	for _, n := range sizes {
		b.Run("keys="+strconv.Itoa(n), func(b *testing.B) {
			keys := GroupKeys(n)
			cs := mk(n)
			for i := range cs {
				cs[i].bytesPerKey = BytesPerKey(keys, cs[i].get)
			}
			key := keys[n/2]
			for _, mode := range []string{"serial", "parallel"} {
				b.Run("mode="+mode, func(b *testing.B) {
					for _, c := range cs {
						b.Run("impl="+c.impl, func(b *testing.B) {
							run(b, mode, func() bool { c.get(key); return true })
							b.ReportMetric(c.bytesPerKey, "B/key")
						})
					}
				})
			}
		})
	}
}

// BenchmarkGroupBreaker is breaker.Group against gobreaker breakers in a
// sync.Map.
func BenchmarkGroupBreaker(b *testing.B) {
	benchGroups(b, func(n int) []groupContender {
		tg, gb := TierguardBreakerGroup(n), GoBreakerGroup()
		return []groupContender{
			{impl: "tierguard", get: func(k string) { tg.Get(k) }},
			{impl: "gobreaker-syncmap", get: func(k string) { gb.Get(k) }},
		}
	})
}

// BenchmarkGroupBulkhead is bulkhead.Group against channel semaphores in a
// sync.Map.
func BenchmarkGroupBulkhead(b *testing.B) {
	benchGroups(b, func(n int) []groupContender {
		tg, sem := TierguardBulkheadGroup(n), SemaphoreGroup()
		return []groupContender{
			{impl: "tierguard", get: func(k string) { tg.Get(k) }},
			{impl: "chan-syncmap", get: func(k string) { sem.Get(k) }},
		}
	})
}

// BenchmarkGroupRateLimit is ratelimit.Group against x/time/rate limiters
// in a sync.Map.
func BenchmarkGroupRateLimit(b *testing.B) {
	benchGroups(b, func(n int) []groupContender {
		tg, xr := TierguardLimiterGroup(BenchQuota, n), XRateGroup(BenchQuota)
		return []groupContender{
			{impl: "tierguard", get: func(k string) { tg.Get(k) }},
			{impl: "xrate-syncmap", get: func(k string) { xr.Get(k) }},
		}
	})
}
