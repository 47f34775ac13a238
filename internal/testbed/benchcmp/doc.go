// Package benchcmp measures tierguard's overhead side by side with
// github.com/failsafe-go/failsafe-go, github.com/sony/gobreaker/v2,
// golang.org/x/time/rate, the OpenTelemetry SDK used by hand, and the
// floors a careful engineer would write without a library (the overhead
// scenario). It is a nested module so that the root module never depends
// on any of them.
//
// Every contender wraps the same function, Work, which returns a string at
// once: what is measured is the guard, not the call. Each benchmark is named
// Benchmark<What>[/<variant>]/mode=<serial|parallel>[/<variant>]/impl=<contender>,
// so that benchstat can put the contenders side by side:
//
//	go test -run '^$' -bench . -benchmem -count 6 . > new.txt
//	benchstat -col /impl new.txt
//
// The group benchmarks also report B/key, the heap a group holds per idle
// key (HeapAlloc after a collection, before and after filling it); they
// run at 10^4 keys, and at 10^6 too with -benchcmp.large.
//
// The contenders, and the path of each library that is measured (its
// idiomatic fast path, built once and reused):
//
//	Breaker, Bulkhead, Chain*, StreamFirstChunk
//	impl=tierguard          breaker: Allow + Token.Report; bulkhead: Acquire + Release;
//	                        chain: (*fallback.Chain).Do
//	impl=tierguard-do       breaker.Do(ctx, b, fn)
//	impl=tierguard-do       bulkhead.Do(ctx, b, fn)
//	impl=gobreaker          (*gobreaker.CircuitBreaker).Execute(fn)
//	impl=gobreaker-twostep  (*gobreaker.TwoStepCircuitBreaker).Allow, then done(err)
//	impl=failsafe           policy objects driven through failsafe.With(...).Get(fn)
//	impl=failsafe-permit    breaker: TryAcquirePermit + RecordResult/RecordError;
//	                        bulkhead: TryAcquirePermit + ReleasePermit
//	impl=handrolled         the chain's floor (HandRolled)
//	impl=direct             ranging over the stream tier's sequence
//
//	QuickStart (the README's quick start, success path)
//	impl=tierguard          TierguardQuickStart: the README's chain as printed
//	impl=floor              QuickStartFloor: context.WithTimeout for the total and each
//	                        try, tierguard's breaker (Allow/Done) and bulkhead
//	                        (TryAcquire/Release), the validator's call
//	impl=floor-onedeadline  the same with one context.WithDeadline per try
//	impl=failsafe           FailsafeQuick: timeout, fallback, bulkhead, breaker,
//	                        retry, timeout; flash in an executor of its own
//
//	Stream (read=first: to the first chunk; read=all: three chunks)
//	impl=direct             ranging over the tier's sequence
//	impl=tierguard          (*fallback.StreamChain).Stream(...).Chunks()
//	impl=failsafe           FailsafeStream: the executor around iter.Pull2 up to
//	                        the first chunk
//
//	RateLimit (an admission with room), RateLimitChain
//	impl=tierguard          (*ratelimit.Limiter).Allow; chain: ratelimit.Tier in a stage
//	impl=tierguard-take     (*ratelimit.Limiter).Take
//	impl=tierguard-unlimited the same chain without a limiter
//	impl=xrate              (*rate.Limiter).Allow
//	impl=failsafe-permit    failsafe-go's bursty RateLimiter.TryAcquirePermit
//	impl=failsafe           the same through failsafe.With(...).Get(fn); chain: the
//	                        chain's policies with the rate limiter innermost
//
//	CacheExactHit
//	impl=tierguard          (*cache.Cache).Get of an exact entry
//	impl=syncmap            sync.Map Load of the prompt
//	impl=syncmap-normalized the same after cache.NormalizeText
//
//	Ledger (admitted against four limits, charged the tier's usage)
//	impl=tierguard          spend.Ledger.AdmitInto (Ticket from a sync.Pool), an attached
//	                        chain's Do, Ticket.End
//	impl=tierguard-admit    the same with Ledger.Admit
//	impl=handrolled         HandRolledBudget (atomic add and compare per meter)
//	                        around the same chain, unobserved
//
//	Otel (metrics on the OpenTelemetry SDK, manual reader, tracing off)
//	impl=tierguard          a chain instrumented by otelx.Instrument
//	impl=otel-floor         OtelFloor: otelx's measurements of a first-try
//	                        success, by hand, around the same chain, unobserved
//	impl=tierguard-uninstrumented  the same chain without otelx
//
//	Production (one request through the stack the README's "A production
//	stack" builds, on an in-memory tier; labels=none|tenant)
//	impl=tierguard          Production: the ledger's Admit with the route's estimate,
//	                        the router's route, a pool of two rate-limited keys
//	                        behind a bulkhead, a breaker, retries, the validator and
//	                        a TryTimeout, the cache's write-back, otelx on the
//	                        SDK's MeterProvider and TracerProvider (a batch span
//	                        processor) with a JSON slog handler at Info, and the
//	                        ledger's metrics
//	impl=floor              ProdFloor: the same work by hand on the same SDKs (the
//	                        same spans, measurements and log decisions)
//	impl=failsafe           ProdFloor with failsafe-go's policies for its guards
//
//	ProductionPieces (the stack with pieces left out: ProdOptions.Without)
//
//	ProductionGenai (the same over a loopback server through the genai SDK;
//	cpu-ns/op is the process's CPU per request)
//	impl=direct             client.Models.GenerateContent alone
//	impl=direct-deadline    the same with the route's deadline on the context
//	impl=tierguard          Production with gemini.NewTier keys
//	impl=tierguard-notraces the same with otelx's traces off
//	impl=floor              ProdFloor around the direct call
//
//	GroupBreaker, GroupBulkhead, GroupRateLimit (Get of an existing key, B/key)
//	impl=tierguard          breaker.Group, bulkhead.Group, ratelimit.Group
//	impl=gobreaker-syncmap  gobreaker breakers in a sync.Map (SyncMapGroup)
//	impl=chan-syncmap       channel semaphores in a sync.Map
//	impl=xrate-syncmap      x/time/rate limiters in a sync.Map
//
//	Adaptive (a free slot around Work, the limit far from binding)
//	impl=tierguard-static          BenchmarkBulkhead's fixed bulkhead
//	impl=tierguard-adaptive        an adaptive bulkhead (bulkhead.Adaptive)
//	impl=tierguard-adaptive-record the same, each call reported to Record
//	impl=failsafe-adaptive         failsafe-go's adaptivelimiter:
//	                               TryAcquirePermit, Permit.Record
//
// The constructors below build each contender with equivalent settings;
// contenders_test.go checks that each behaves as its benchmark claims (an
// open breaker rejects, a fallback answers from the second tier, a spent
// limiter refuses, the floor records what otelx records, ...).
package benchcmp
