package chaos

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/internal/budget"
)

// Target is the chain a drill runs against. *fallback.Chain[In, Out]
// implements it.
type Target[In, Out any] interface {
	// Do answers one request.
	Do(ctx context.Context, in In) (fallback.Result[Out], error)
	// Observe adds an observer; Run watches every request the chain ends.
	Observe(fallback.Observer) (remove func())
	// Stages describes the stages, whose breakers and bulkheads Run
	// watches.
	Stages() []fallback.StageInfo
}

// Load is the traffic a drill sends: an open loop of RPS requests per
// second for Duration, at most Concurrency in flight. A request due while
// Concurrency are in flight is not sent, and counted in Report.Dropped: a
// chain that holds requests that long is itself the finding.
type Load struct {
	// RPS is the request rate. 0 sends nothing: Run then only watches the
	// chain's own traffic for Duration (a drill in production).
	RPS float64
	// Duration is how long the load (or the watch) lasts. Required.
	Duration time.Duration
	// Concurrency caps the requests in flight; required with RPS.
	Concurrency int
	// Timeout, when positive, is each request's context deadline; the
	// chain's Total applies too.
	Timeout time.Duration
}

// RunConfig configures a drill run.
type RunConfig[In any] struct {
	// Name labels the report.
	Name string
	// Load is the traffic to send.
	Load Load
	// Input returns the n-th request's input, from 0. Required with a load.
	Input func(n int) In
	// Context, when set, returns the n-th request's context, built on ctx:
	// labels for the drill's rules (Enroll, fallback.WithRequest) or
	// for your observers.
	Context func(ctx context.Context, n int) context.Context

	// Drill is the fault plan. Run starts it with the load (its Start is
	// the run's start; with neither End nor For it lasts the load's
	// Duration) and stops it when the load ends. Open entries may name a
	// stage's Tier instead of a Breaker. A drill without rules or breakers
	// to open measures the chain as it is.
	Drill Drill
	// Switch is the switch the chain's wrapped tiers read: the drill's
	// rules go there. Required when the drill has rules.
	Switch *Switch

	// Checks judge the report; Report.Passed says whether every one held.
	Checks []Check
}

// Run sends cfg's load through chain while cfg's drill runs, and reports
// the signals of every request the chain ended meanwhile — its own load's
// and any other traffic's — with each check's verdict. It returns when the
// load's Duration has passed and the requests it sent have ended. If ctx
// ends first, Run stops sending, waits for the requests in flight, and
// returns the report so far with ctx's error.
//
// Under testing/synctest the whole run happens in fake time: a ten-minute
// drill takes as long as the chain's own work.
func Run[In, Out any](ctx context.Context, chain Target[In, Out], cfg RunConfig[In]) (*Report, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	stages := chain.Stages()
	d := cfg.Drill
	d.Open = slices.Clone(d.Open)
	var errs []error
	for i := range d.Open {
		o := &d.Open[i]
		if o.Breaker != nil {
			continue
		}
		for _, s := range stages {
			if s.Tier == o.Tier {
				o.Breaker = s.Breaker
			}
		}
		if o.Breaker == nil {
			errs = append(errs, fmt.Errorf("Drill.Open[%d]: stage %q has no breaker", i, o.Tier))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("chaos: invalid run: %w", err)
	}

	c := newCollector(stages)
	defer c.close()
	remove := chain.Observe(c)
	defer remove()

	start := time.Now()
	c.begin(start)
	sw := cfg.Switch
	drilling := len(d.Rules) > 0 || len(d.Open) > 0
	if drilling {
		if sw == nil {
			// Breakers only: a switch of the run's own.
			sw = &Switch{}
		}
		d.Start = start
		if d.End.IsZero() && d.For == 0 {
			d.For = cfg.Load.Duration
		}
		if err := sw.Start(d); err != nil {
			return nil, err
		}
	}
	err := send(ctx, chain, &cfg, start, c)
	if drilling {
		sw.Stop()
	}
	rep := c.report(cfg.Name, start, time.Since(start))
	if drilling {
		rep.Rules = sw.Status().Rules
	}
	rep.judge(cfg.Checks)
	return rep, err
}

func (cfg *RunConfig[In]) check() error {
	var errs []error
	l := cfg.Load
	if l.Duration <= 0 {
		errs = append(errs, errors.New("Load.Duration must be positive"))
	}
	if l.Duration > MaxDrill {
		errs = append(errs, fmt.Errorf("Load.Duration %v exceeds MaxDrill (%v)", l.Duration, MaxDrill))
	}
	if l.RPS < 0 || math.IsNaN(l.RPS) || math.IsInf(l.RPS, 0) {
		errs = append(errs, fmt.Errorf("Load.RPS %v must be a finite rate ≥ 0", l.RPS))
	}
	if l.RPS > 0 && l.Concurrency < 1 {
		errs = append(errs, errors.New("Load.Concurrency must be at least 1 with a positive RPS"))
	}
	if l.RPS > 0 && cfg.Input == nil {
		errs = append(errs, errors.New("an Input function is required with a positive Load.RPS"))
	}
	if l.Timeout < 0 {
		errs = append(errs, errors.New("Load.Timeout must not be negative"))
	}
	if len(cfg.Drill.Rules) > 0 && cfg.Switch == nil {
		errs = append(errs, errors.New("Switch is required: the drill's rules reach the chain through the switch its tiers are wrapped with"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("chaos: invalid run: %w", err)
	}
	return nil
}

// send runs the load, or waits out the watch.
func send[In, Out any](ctx context.Context, chain Target[In, Out], cfg *RunConfig[In], start time.Time, c *collector) error {
	l := cfg.Load
	end := start.Add(l.Duration)
	if l.RPS == 0 {
		return budget.Sleep(ctx, time.Until(end))
	}
	base := context.WithoutCancel(ctx)
	slots := make(chan struct{}, l.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	for n := 0; ; n++ {
		// The n-th request is due at start + n/RPS, computed afresh each
		// time so that rounding does not drift.
		due := start.Add(time.Duration(float64(n) * float64(time.Second) / l.RPS))
		if !due.Before(end) {
			return nil
		}
		if err := budget.Sleep(ctx, time.Until(due)); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		select {
		case slots <- struct{}{}:
		default:
			c.drop()
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			rctx := base
			if cfg.Context != nil {
				rctx = cfg.Context(rctx, n)
			}
			if l.Timeout > 0 {
				var cancel context.CancelFunc
				rctx, cancel = context.WithTimeout(rctx, l.Timeout)
				defer cancel()
			}
			_, _ = chain.Do(rctx, cfg.Input(n))
		})
	}
}
