// Package benchcmp measures tierguard's overhead side by side with
// github.com/failsafe-go/failsafe-go and github.com/sony/gobreaker/v2
// (the overhead scenario). It is a nested module so that the root module
// never depends on either.
//
// Every contender wraps the same function, Work, which returns a string at
// once: what is measured is the guard, not the call. Each benchmark is named
// Benchmark<What>/mode=<serial|parallel>[/<variant>]/impl=<contender>, so
// that benchstat can put the contenders side by side:
//
//	go test -run '^$' -bench . -benchmem -count 6 . > new.txt
//	benchstat -col /impl new.txt
//
// The contenders, and the path of each library that is measured (its
// idiomatic fast path, built once and reused):
//
//	impl=tierguard          breaker: Allow + Token.Report; bulkhead: Acquire + Release;
//	                        chain: (*fallback.Chain).Do
//	impl=tierguard-do       breaker.Do(ctx, b, fn)
//	impl=tierguard-do       bulkhead.Do(ctx, b, fn)
//	impl=gobreaker          (*gobreaker.CircuitBreaker).Execute(fn)
//	impl=gobreaker-twostep  (*gobreaker.TwoStepCircuitBreaker).Allow, then done(err)
//	impl=failsafe           policy objects driven through failsafe.With(...).Get(fn)
//	impl=failsafe-permit    breaker: TryAcquirePermit + RecordResult/RecordError;
//	                        bulkhead: TryAcquirePermit + ReleasePermit
//
// The constructors below build each contender with equivalent settings;
// contenders_test.go checks that each behaves as its benchmark claims (an
// open breaker rejects, a fallback answers from the second tier, ...).
package benchcmp
