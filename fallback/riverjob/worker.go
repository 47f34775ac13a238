package riverjob

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"
	"go.opentelemetry.io/otel/attribute"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/otelx"
)

// Event is one job attempt's outcome, as observers see it.
type Event struct {
	// JobID and Kind name the job.
	JobID int64
	Kind  string
	// Report is the attempt's outcome.
	Report Report
}

// Worker is a River worker that answers each job with a tierguard chain
// and lets the chain's class table decide, once per attempt, what River
// does next (see Outcome). Register it with river.AddWorker. It is safe
// for concurrent use.
type Worker[A JobArgs[In], In, Out any] struct {
	river.WorkerDefaults[A]

	cfg     Config[In, Out]
	timeout time.Duration
	policy  river.ClientRetryPolicy
	hints   retryHints

	obsMu     sync.Mutex
	observers atomic.Pointer[[]*func(Event)]
}

// NewWorker returns a worker for the job args type A, or an error naming
// every invalid field of cfg. In and Out are inferred from cfg:
//
//	w, err := riverjob.NewWorker[ExtractArgs](cfg)
func NewWorker[A JobArgs[In], In, Out any](cfg Config[In, Out]) (*Worker[A, In, Out], error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	w := &Worker[A, In, Out]{cfg: cfg, timeout: cfg.timeout(), policy: cfg.RetryPolicy}
	if w.policy == nil {
		w.policy = &river.DefaultClientRetryPolicy{}
	}
	w.cfg.TenantBusySnooze = cmp.Or(cfg.TenantBusySnooze, defaultTenantBusySnooze)
	w.cfg.QuotaSnooze = cmp.Or(cfg.QuotaSnooze, defaultQuotaSnooze)
	return w, nil
}

// Timeout is the job's timeout: the chain's total deadline and the time to
// store the result (Config.Timeout).
func (w *Worker[A, In, Out]) Timeout(*river.Job[A]) time.Duration { return w.timeout }

// NextRetry schedules a retried job at the later of the retry-after its
// failed attempt was asked to wait and River's backoff
// (Config.RetryPolicy). An attempt that asked for no wait leaves the
// client's policy in charge.
func (w *Worker[A, In, Out]) NextRetry(job *river.Job[A]) time.Time {
	wait, ok := w.hints.take(job.ID)
	if !ok {
		return time.Time{}
	}
	at := w.policy.NextRetry(job.JobRow)
	if earliest := time.Now().Add(wait); earliest.After(at) {
		at = earliest
	}
	return at
}

// Observe calls fn with every attempt's outcome, on the goroutine that
// worked the job, until the returned function is called. fn must be quick.
func (w *Worker[A, In, Out]) Observe(fn func(Event)) (remove func()) {
	p := &fn
	w.obsMu.Lock()
	defer w.obsMu.Unlock()
	var next []*func(Event)
	if old := w.observers.Load(); old != nil {
		next = append(next, *old...)
	}
	next = append(next, p)
	w.observers.Store(&next)
	return func() {
		w.obsMu.Lock()
		defer w.obsMu.Unlock()
		old := w.observers.Load()
		if old == nil {
			return
		}
		next := make([]*func(Event), 0, len(*old))
		for _, q := range *old {
			if q != p {
				next = append(next, q)
			}
		}
		w.observers.Store(&next)
	}
}

// Work answers the job with the chain, stores a validated answer, and
// returns what tells River the job's fate: nil (completed), an error
// (retried, or discarded after the last attempt), river.JobSnooze
// (snoozed) or river.JobCancel (discarded at once). The report is recorded
// as the job's output (river.RecordOutput).
func (w *Worker[A, In, Out]) Work(ctx context.Context, job *river.Job[A]) error {
	req := job.Args.Request()
	ctx = w.labels(ctx, job, req)
	rep := Report{Attempt: job.Attempt}
	key := req.Key
	if key == "" {
		// Not the id alone: SQLite reuses the ids of deleted rows.
		key = "river-job-" + strconv.FormatInt(job.ID, 10) + "-" + strconv.FormatInt(job.CreatedAt.UnixNano(), 10)
	}

	stored, err := w.cfg.Store.Has(ctx, key)
	if err != nil {
		return w.storeFailed(ctx, job, rep, err)
	}
	if stored {
		rep.Outcome, rep.Why = Completed, WhyAlreadyStored
		return w.finish(ctx, job, rep, nil)
	}

	if w.cfg.Tenants != nil {
		b := w.cfg.Tenants.Get(req.Tenant)
		if err := b.Acquire(ctx); err != nil {
			if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return w.interrupted(ctx, job, rep)
			}
			rep.Outcome, rep.Why, rep.Wait = Snoozed, WhyTenantBusy, jitter(w.cfg.TenantBusySnooze)
			rep.Cause = classify.Verdict{Class: classify.Rejected, Reason: "tenant bulkhead full"}
			return w.finish(ctx, job, rep, err)
		}
		defer b.Release()
	}

	res, err := w.do(ctx, job, req)
	rep.UpstreamCalls = res.UpstreamCalls
	if err == nil {
		if v := w.cfg.Validate; v != nil {
			if verr := v.Validate(res.Value); verr != nil {
				rep.Outcome, rep.Why, rep.Cause = Discarded, WhyRejectedOutput, classify.Classify(verr)
				if rep.Cause.Class != classify.InvalidOutput {
					// A custom validator's own error: its text may quote the
					// answer, so only the class and a fixed reason are kept.
					rep.Cause = classify.Verdict{Class: classify.InvalidOutput, Reason: "rejected by the worker's validator"}
				}
				return w.finish(ctx, job, rep, verr)
			}
		}
		if err := w.cfg.Store.Put(ctx, key, res.Value); err != nil {
			return w.storeFailed(ctx, job, rep, err)
		}
		rep.Outcome, rep.Why = Completed, WhyAnswered
		rep.Source, rep.Tier, rep.Degraded = res.Source, res.Tier, res.Degraded
		return w.finish(ctx, job, rep, nil)
	}
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(ctxErr, context.DeadlineExceeded) {
		return w.interrupted(ctx, job, rep)
	}
	rep.Outcome, rep.Why, rep.Wait = decide(err, w.cfg.Chain, time.Now(), w.cfg.QuotaSnooze)
	rep.Cause = verdictOf(err)
	rep.Tiers = tiersOf(err)
	if rep.Outcome == Snoozed {
		rep.Wait = jitter(rep.Wait)
	}
	return w.finish(ctx, job, rep, err)
}

// storeFailed retries an attempt whose store could not be read or
// written: the answer, if any, is lost, and the next attempt asks again.
func (w *Worker[A, In, Out]) storeFailed(ctx context.Context, job *river.Job[A], rep Report, err error) error {
	rep.Outcome, rep.Why = Retried, WhyStoreFailed
	rep.Cause = classify.Verdict{Class: classify.Unknown, Reason: "result store failed"}
	return w.finish(ctx, job, rep, err)
}

// interrupted hands a cancelled attempt back to River, which tells a soft
// stop (the job becomes available again, the attempt not counted) from a
// cancel.
func (w *Worker[A, In, Out]) interrupted(ctx context.Context, job *river.Job[A], rep Report) error {
	rep.Outcome, rep.Why = Interrupted, WhyInterrupted
	rep.Cause = classify.Verdict{Class: classify.Canceled, Reason: "job context cancelled"}
	return w.finish(ctx, job, rep, ctx.Err())
}

// finish records the report, tells the observers, and returns what River
// needs to hear.
func (w *Worker[A, In, Out]) finish(ctx context.Context, job *river.Job[A], rep Report, cause error) error {
	if rep.Outcome == Retried && job.Attempt >= job.MaxAttempts {
		rep.Outcome, rep.Why = Discarded, WhyExhausted
	}
	// RecordOutput fails only outside a River work context or for a value
	// that does not encode; the report reaches observers and the job's
	// error either way.
	_ = river.RecordOutput(ctx, rep)
	if obs := w.observers.Load(); obs != nil {
		ev := Event{JobID: job.ID, Kind: job.Kind, Report: rep}
		for _, fn := range *obs {
			(*fn)(ev)
		}
	}
	switch rep.Outcome {
	case Completed:
		return nil
	case Snoozed:
		return river.JobSnooze(rep.Wait)
	case Retried:
		if rep.Wait > 0 {
			w.hints.put(job.ID, rep.Wait)
		}
		return &Error{Report: rep, Err: cause}
	case Discarded:
		if rep.Why == WhyExhausted {
			// River discards a job whose last attempt failed.
			return &Error{Report: rep, Err: cause}
		}
		return river.JobCancel(&Error{Report: rep, Err: cause})
	}
	return &Error{Report: rep, Err: cause}
}

// do runs the chain for the attempt, under a ticket of the ledger if the
// worker has one.
func (w *Worker[A, In, Out]) do(ctx context.Context, job *river.Job[A], req Args[In]) (fallback.Result[Out], error) {
	if l := w.cfg.Ledger; l != nil {
		t := l.Begin(ctx, spend.Request{ID: strconv.FormatInt(job.ID, 10), Tenant: req.Tenant, Scenario: req.Scenario})
		defer t.End()
		ctx = t
	}
	return w.cfg.Chain.Do(ctx, req.Input)
}

// labels makes the attempt a request of its own: its fallback.Request has
// the job id as its id and the job's tenant and scenario (the cache's
// scope, the chain's labels; otelx shows the tenant only with its
// TenantLabels option), and otelx sees the job's kind and attempt.
func (w *Worker[A, In, Out]) labels(ctx context.Context, job *river.Job[A], req Args[In]) context.Context {
	ctx = fallback.WithRequest(ctx, fallback.Request{ID: strconv.FormatInt(job.ID, 10), Tenant: req.Tenant, Scenario: req.Scenario})
	return otelx.WithAttributes(ctx, attribute.String("river.job.kind", job.Kind), attribute.Int("river.job.attempt", job.Attempt))
}

// jitter spreads jobs that would all wake at once (a quota reset) over a
// tenth of their wait.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d + rand.N(d/10+1)
}

// retryHints carries a failed attempt's retry-after from Work to
// NextRetry, which River calls right after Work returns, on the same
// goroutine, with the same job.
type retryHints struct {
	mu sync.Mutex
	m  map[int64]hint
}

type hint struct {
	wait time.Duration
	at   time.Time
}

// maxHints bounds the hints kept for attempts whose NextRetry never came
// (an ErrorHandler cancelled the job); older ones are dropped.
const maxHints = 4096

func (h *retryHints) put(id int64, wait time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[int64]hint{}
	}
	now := time.Now()
	if len(h.m) >= maxHints {
		for k, v := range h.m {
			if now.Sub(v.at) > time.Minute || len(h.m) >= maxHints {
				delete(h.m, k)
			}
		}
	}
	h.m[id] = hint{wait: wait, at: now}
}

func (h *retryHints) take(id int64) (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.m[id]
	if ok {
		delete(h.m, id)
	}
	return v.wait, ok
}
