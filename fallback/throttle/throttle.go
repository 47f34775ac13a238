package throttle

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
)

// ErrThrottled is the cause of a throttled call's *fallback.SkipError.
var ErrThrottled = errors.New("tierguard: throttled: the tier is refusing calls for overload")

// Config configures a Throttle.
type Config struct {
	// K is how many calls the throttle lets through for each the tier
	// accepted; 0 means 2. Lower throttles sooner: at K = 1.1 a tier that
	// refuses a tenth of its calls is already sent fewer.
	K float64
	// Window is how far back calls count; 0 means two minutes. It is
	// counted in eight steps, each dropped whole as it ages out.
	Window time.Duration
	// Rand returns a number in [0, 1) for each call; nil means
	// math/rand/v2's. Tests set it to decide which calls are throttled.
	Rand func() float64
}

const buckets = 8

// Throttle is client-side adaptive throttling for one tier: it keeps the
// calls it was asked to make (requests) and those the tier accepted
// (accepts) over a sliding window, and turns a call away locally with
// probability max(0, (requests − K·accepts) / (requests + 1)). A tier that
// refuses calls for overload (5xx, 529, timeouts, 429s) thus gets fewer of
// them in proportion, before a breaker would trip, and all of them again
// as it recovers and accepts. Requests count throttled calls too, which
// is what lets the rate fall back to zero once the tier accepts again.
//
// A Throttle is per process: pods sharing Redis each throttle on what
// they saw themselves. It is safe for concurrent use.
type Throttle struct {
	k      float64
	step   time.Duration
	random func() float64

	mu sync.Mutex
	// at is the step each bucket counts (its start, in steps since the
	// zero time); counts are requests and accepts, throttled the calls
	// turned away, over the whole life.
	at                 [buckets]int64
	requests, accepts  [buckets]uint64
	throttled, allowed uint64
}

// New returns a throttle, or an error naming every invalid field.
func New(cfg Config) (*Throttle, error) {
	var errs []error
	// Each message starts with the field it is about, as in the guards'
	// configs.
	invalid := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if cfg.K != 0 && !(cfg.K >= 1) {
		invalid("K must be at least 1, got %v", cfg.K)
	}
	if cfg.Window < 0 || (cfg.Window > 0 && cfg.Window < buckets) {
		invalid("Window must be 0 or at least %dns, got %v", buckets, cfg.Window)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("throttle: invalid config: %w", err)
	}
	t := &Throttle{k: cfg.K, step: cfg.Window / buckets, random: cfg.Rand}
	if t.k == 0 {
		t.k = 2
	}
	if t.step == 0 {
		t.step = 2 * time.Minute / buckets
	}
	if t.random == nil {
		t.random = rand.Float64
	}
	return t, nil
}

// bucket returns the index of now's bucket, emptying it if it counted an
// older step. t.mu must be held.
func (t *Throttle) bucket(now time.Time) int {
	at := now.UnixNano() / int64(t.step)
	i := int(at % buckets)
	if t.at[i] != at {
		t.at[i], t.requests[i], t.accepts[i] = at, 0, 0
	}
	return i
}

// sums returns the window's requests and accepts. t.mu must be held.
func (t *Throttle) sums(now time.Time) (req, acc float64) {
	at := now.UnixNano() / int64(t.step)
	for i := range buckets {
		if at-t.at[i] < buckets {
			req += float64(t.requests[i])
			acc += float64(t.accepts[i])
		}
	}
	return req, acc
}

// rate is the share of calls to turn away now:
// max(0, (requests − K·accepts) / (requests + 1)). t.mu must be held.
func (t *Throttle) rate(now time.Time) float64 {
	req, acc := t.sums(now)
	return max(0, (req-t.k*acc)/(req+1))
}

// Admit counts a call and says whether to make it.
func (t *Throttle) Admit() bool {
	now := time.Now()
	t.mu.Lock()
	p := t.rate(now)
	t.requests[t.bucket(now)]++
	admit := p == 0 || t.random() >= p
	if admit {
		t.allowed++
	} else {
		t.throttled++
	}
	t.mu.Unlock()
	return admit
}

// Done reports how an admitted call ended: v is its verdict, class OK for
// an answer. Anything but an overload signal or a 429 counts as accepted:
// a 400 was the tier working.
func (t *Throttle) Done(v classify.Verdict) {
	if bulkhead.SampleOf(v) == bulkhead.Overload || v.Class == classify.RateLimited {
		return
	}
	now := time.Now()
	t.mu.Lock()
	t.accepts[t.bucket(now)]++
	t.mu.Unlock()
}

// Stats is a snapshot of a throttle's figures.
type Stats struct {
	// Requests and Accepts are the window's counts; Probability, the
	// share of calls it turns away now.
	Requests, Accepts uint64
	Probability       float64
	// Allowed and Throttled count the calls admitted and turned away
	// since the throttle was made.
	Allowed, Throttled uint64
}

// Stats returns the throttle's figures now.
func (t *Throttle) Stats() Stats {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	req, acc := t.sums(now)
	return Stats{Requests: uint64(req), Accepts: uint64(acc), Probability: t.rate(now),
		Allowed: t.allowed, Throttled: t.throttled}
}

// skip is the error a throttled call returns: the chain passes the tier
// over (fallback.SkipThrottled) to the next tier, the cache or the
// default, as it does a full bulkhead.
func skip(ctx context.Context, tier string) error {
	fallback.RecordOf(ctx).CountCalls()
	return &fallback.SkipError{Tier: tier, Skip: fallback.SkipThrottled, Cause: ErrThrottled}
}

// verdict classifies a call's error with the chain's rules.
func verdict(ctx context.Context, err error) classify.Verdict {
	if err == nil {
		return classify.Verdict{}
	}
	if c := fallback.RecordOf(ctx).Rules().Classifier; c != nil {
		return c.Classify(err)
	}
	return classify.Classify(err)
}

// Tier returns t behind th: each call is first admitted by th, or
// skipped as fallback.SkipThrottled without an upstream call. Tier panics
// when t or th is nil: a configuration error.
func Tier[In, Out any](t fallback.ModelTier[In, Out], th *Throttle) fallback.ModelTier[In, Out] {
	if t == nil || th == nil {
		panic("throttle: Tier of a nil tier or throttle")
	}
	return &tier[In, Out]{t: t, th: th}
}

type tier[In, Out any] struct {
	t  fallback.ModelTier[In, Out]
	th *Throttle
}

func (d *tier[In, Out]) Name() string { return d.t.Name() }

// Unwrap returns the throttled tier, for what the chain reads of it.
func (d *tier[In, Out]) Unwrap() any { return d.t }

func (d *tier[In, Out]) Call(ctx context.Context, in In) (Out, error) {
	if !d.th.Admit() {
		var zero Out
		return zero, skip(ctx, d.t.Name())
	}
	out, err := d.t.Call(ctx, in)
	d.th.Done(verdict(ctx, err))
	return out, err
}

// StreamTier returns t behind th, as Tier does for a unary tier: each
// attempt to start a stream is admitted or skipped, and the stream's end
// (or the error before its first chunk) says whether it was accepted.
func StreamTier[In, Chunk any](t fallback.StreamTier[In, Chunk], th *Throttle) fallback.StreamTier[In, Chunk] {
	if t == nil || th == nil {
		panic("throttle: StreamTier of a nil tier or throttle")
	}
	return &stream[In, Chunk]{t: t, th: th}
}

type stream[In, Chunk any] struct {
	t  fallback.StreamTier[In, Chunk]
	th *Throttle
}

func (d *stream[In, Chunk]) Name() string                       { return d.t.Name() }
func (d *stream[In, Chunk]) Unwrap() any                        { return d.t }
func (d *stream[In, Chunk]) Inspect(c Chunk) fallback.ChunkInfo { return d.t.Inspect(c) }

func (d *stream[In, Chunk]) Stream(ctx context.Context, in In) iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		if !d.th.Admit() {
			var zero Chunk
			yield(zero, skip(ctx, d.t.Name()))
			return
		}
		var last error
		defer func() { d.th.Done(verdict(ctx, last)) }()
		for c, err := range d.t.Stream(ctx, in) {
			last = err
			if !yield(c, err) {
				return
			}
		}
	}
}

// Feed returns an observer that reports each upstream call a chain
// makes to its stage's bulkhead (bulkhead.Bulkhead.Record), so that an
// adaptive bulkhead learns its limit from the calls it guards: their
// latencies, and their verdicts as overload signals or not. A fixed
// bulkhead ignores the reports. Pass it as fallback.Config.Observer (or among fallback.Observers)
// with the others; it serves stream chains as it serves unary ones.
func Feed() fallback.Observer { return feed{} }

type feed struct{ fallback.NopObserver }

func (feed) AttemptEnded(_ context.Context, e fallback.AttemptEnd) {
	if e.Stage != nil && e.Stage.Bulkhead != nil {
		e.Stage.Bulkhead.Record(e.Latency, bulkhead.SampleOf(e.Verdict))
	}
}
