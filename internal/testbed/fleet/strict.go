package fleet

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/fallback/spend/redisspend"
)

// strictTier is the upstream of the strict tenants' calls: it holds each
// call for Config.Hold, so that a pod's callers are truly in flight
// together, then bills it. It goes through neither the breaker nor the
// limiter: the strict bursts measure the spend limits alone.
type strictTier struct{ p *pod }

func (strictTier) Name() string { return "pro" }

func (t strictTier) Call(ctx context.Context, c call) (reply, error) {
	f := t.p.f
	n := f.held.Add(1)
	defer f.held.Add(-1)
	raise(&f.peakHeld, n)
	tm := time.NewTimer(f.cfg.Hold)
	select {
	case <-tm.C:
	case <-ctx.Done():
		tm.Stop()
		return reply{}, ctx.Err()
	}
	t.p.bill(ctx, c, 1)
	return reply{}, nil
}

// raise sets *peak to n when n is larger.
func raise(peak *atomic.Int64, n int64) {
	for {
		p := peak.Load()
		if n <= p || peak.CompareAndSwap(p, n) {
			return
		}
	}
}

// strictRequest is one request of a strict tenant's caller: the strict
// ledger (one reservation in Redis), then the strict chain.
func (p *pod) strictRequest(tenant string, est int64) error {
	f := p.f
	f.strictRequests.Add(1)
	f.ask(tenant)
	raise(&f.peakInFlight, p.inflight.Add(1))
	defer p.inflight.Add(-1)
	c := call{tenant: tenant, asked: time.Now(), watched: f.watched(tenant)}
	tk, err := p.sledger.Admit(context.Background(), spend.Request{Tenant: tenant}, spend.Estimate{Tokens: est})
	if err != nil {
		return err
	}
	defer tk.End()
	_, err = p.schain.Do(tk, c)
	return err
}

// refusedPause is how long a strict caller waits after a refusal before
// it asks again, in the outages (64 callers a pod asking again at once
// would only spin).
const refusedPause = 100 * time.Millisecond

// strictCallers runs Config.InFlight callers per pod for a strict tenant,
// each with one request in flight at a time. With untilRefused each
// caller stops at its first refusal (the limit binds: a healthy burst is
// over when every caller met it); otherwise the callers go on, pausing
// after refusals, until stop is closed.
func (f *fleet) strictCallers(tenant string, est int64, untilRefused bool, stop <-chan struct{}) (wait func()) {
	var wg sync.WaitGroup
	n := len(f.pods) * f.cfg.InFlight
	for _, p := range f.pods {
		for j := range f.cfg.InFlight {
			wg.Go(func() {
				// The callers start spread over one Hold, as requests
				// arrive: 3,200 reservations at the same instant would
				// queue in Redis for longer than any timeout.
				t := time.NewTimer(time.Duration(j*len(f.pods)+p.i) * f.cfg.Hold / time.Duration(n))
				select {
				case <-stop:
					t.Stop()
					return
				case <-t.C:
				}
				for {
					select {
					case <-stop:
						return
					default:
					}
					err := p.strictRequest(tenant, est)
					if err == nil {
						continue
					}
					if untilRefused {
						return
					}
					t := time.NewTimer(refusedPause)
					select {
					case <-stop:
						t.Stop()
						return
					case <-t.C:
					}
				}
			})
		}
	}
	return wg.Wait
}

// burst runs a strict tenant's callers with Redis healthy until every
// one of them met the limit (Settle bounds it: a burst that needs it is
// an error).
func (f *fleet) burst(rep *Report, tp tenantPlan) error {
	f.peakInFlight.Store(0)
	f.peakHeld.Store(0)
	f.reserveMax.Store(0)
	f.reserveSlow.Store(0)
	f.reserveErrs.Store(0)
	fails := f.storeFails[1].Load()
	stop := make(chan struct{})
	wait := f.strictCallers(tp.name, tp.estimate, true, stop)
	done := make(chan struct{})
	go func() { wait(); close(done) }()
	t := time.NewTimer(f.cfg.Settle)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		close(stop)
		<-done
		return errors.New("the strict callers did not all meet the limit")
	}
	rep.Bursts = append(rep.Bursts, BurstReport{Tenant: tp.name, PeakInFlight: int(f.peakInFlight.Load()),
		PeakHeld: int(f.peakHeld.Load()), StoreFailures: f.storeFails[1].Load() - fails,
		ReserveMax: time.Duration(f.reserveMax.Load()), ReserveSlow: f.reserveSlow.Load(), ReserveErrors: f.reserveErrs.Load()})
	if e := f.firstReserveErr.Load(); e != nil {
		f.cfg.logf("%s: first reservation error: %v", tp.name, *e)
	}
	return nil
}

// watched is a pod's spend store as its ledger sees it: it records, for
// the tenants billed in the outages, the pod's views of the fleet's
// figures, from which the outages' bounds are computed.
type watched struct {
	*redisspend.Store
	w *watch
}

func (s watched) Sync(ctx context.Context, shares []spend.Share) error {
	err := s.Store.Sync(ctx, shares)
	pods := s.Store.Pods()
	for i := range shares {
		if sh := &shares[i]; sh.Synced && sh.Period == spend.Daily {
			s.w.view(sh.Tenant, sh.FleetTokens, sh.Tokens, sh.FleetReserved.Tokens, pods)
		}
	}
	return err
}

func (s watched) Reserve(ctx context.Context, r *spend.Reservation) error {
	began := time.Now()
	err := s.Store.Reserve(ctx, r)
	took := time.Since(began)
	raise(&s.w.f.reserveMax, int64(took))
	if took > s.w.f.cfg.reserveTimeout()/2 {
		s.w.f.reserveSlow.Add(1)
	}
	if err != nil {
		s.w.f.reserveErrs.Add(1)
		if s.w.f.firstReserveErr.Load() == nil {
			e := err
			s.w.f.firstReserveErr.CompareAndSwap(nil, &e)
		}
	}
	if err == nil {
		m := spend.DailyTokens
		s.w.view(r.Tenant, r.Fleet[m], r.Mine[m], r.FleetReserved[m], s.Store.Pods())
	}
	return err
}

// watch is what one ledger's store and events tell of the outages'
// tenants: the ledger's views of their figures, its spends, and when its
// store failed and recovered.
type watch struct {
	f       *fleet
	tenants map[string]bool

	mu     sync.Mutex
	views  map[string][]view
	spends map[string][]spent
	states []stateChange
}

// view is one exchange's figures of a tenant's day: the fleet's stored
// use, this process's part of it, and the fleet's reservations.
type view struct {
	at                    time.Time
	fleet, mine, reserved int64
	pods                  int
}

// spent is one billed call: when its Admit was asked, and its tokens.
type spent struct {
	asked  time.Time
	tokens int64
}

type stateChange struct {
	at     time.Time
	failed bool
}

func newWatch(f *fleet, tenants map[string]bool) *watch {
	return &watch{f: f, tenants: tenants, views: map[string][]view{}, spends: map[string][]spent{}}
}

func (w *watch) view(tenant string, fleet, mine, reserved int64, pods int) {
	if !w.tenants[tenant] {
		return
	}
	w.mu.Lock()
	w.views[tenant] = append(w.views[tenant], view{at: time.Now(), fleet: fleet, mine: mine, reserved: reserved, pods: pods})
	w.mu.Unlock()
}

func (w *watch) billed(tenant string, asked time.Time, tokens int64) {
	w.mu.Lock()
	w.spends[tenant] = append(w.spends[tenant], spent{asked: asked, tokens: tokens})
	w.mu.Unlock()
}

func (w *watch) state(failed bool) {
	w.mu.Lock()
	w.states = append(w.states, stateChange{at: time.Now(), failed: failed})
	w.mu.Unlock()
}

// podBound is one pod's part of an outage's bound on a tenant's spend.
type podBound struct {
	// viewed is false when the pod never saw the tenant's figures (it
	// then keeps to no share: its whole spend counts).
	viewed bool
	// synced is the pod's own figure in Redis at its last view, share
	// what it may spend beyond it once it knows Redis is away, early
	// what it spent beyond it on requests asked before it knew (or
	// before its last view, when that came later).
	synced, share, early int64
	// total is what the pod spent on the tenant's requests asked before
	// Redis came back.
	total int64
}

// bound returns the pod's part of the bound on the tenant's spend over
// an outage from from to back: see Report.Tenants.
func (w *watch) bound(tenant string, limit int64, from, back time.Time) podBound {
	w.mu.Lock()
	defer w.mu.Unlock()
	var b podBound
	for _, s := range w.spends[tenant] {
		if s.asked.Before(back) {
			b.total += s.tokens
		}
	}
	var last view
	for _, v := range w.views[tenant] {
		if v.at.Before(back) {
			last, b.viewed = v, true
		}
	}
	if !b.viewed {
		return b
	}
	// knew is when the ledger last began to count the store as away
	// (its first failure after a success), if it still did at the
	// outage's start or began after it.
	var knew time.Time
	failing := false
	for _, s := range w.states {
		if !s.at.Before(back) {
			break
		}
		switch {
		case s.failed && !failing:
			failing, knew = true, s.at
		case !s.failed:
			failing = false
			if s.at.Before(from) {
				knew = time.Time{}
			}
		}
	}
	cut := back // never knew: every request was decided as with Redis up
	if !knew.IsZero() {
		cut = knew
		if last.at.After(cut) {
			cut = last.at
		}
	}
	fleet := max(last.fleet, last.mine)
	b.synced = last.mine
	b.share = max(limit-fleet-max(last.reserved, 0), 0) / int64(max(last.pods, 1))
	for _, s := range w.spends[tenant] {
		if s.asked.Before(cut) {
			b.early += s.tokens
		}
	}
	b.early = max(b.early-b.synced, 0)
	return b
}

// event takes in one of a pod's ledgers' events.
func (f *fleet) event(p *pod, strict bool, e spend.Event) {
	mode := 0
	if strict {
		mode = 1
	}
	switch e.Kind {
	case spend.StoreFailed:
		f.storeFails[mode].Add(1)
		p.watches[mode].state(true)
	case spend.StoreRecovered:
		p.watches[mode].state(false)
	case spend.Refused:
		if e.Refusal == spend.LimitReached {
			if _, ok := f.refused.Load(e.Tenant); !ok {
				f.refused.Store(e.Tenant, true)
			}
		}
	case spend.ThresholdReached, spend.FirstRefusal:
		f.amu.Lock()
		f.alerts[alertKey{tenant: e.Tenant, name: alertName(e)}]++
		f.amu.Unlock()
	}
}

// alertKey names one alert of one tenant: "0.7", "0.9", "1" (the limit
// reached by use) or "first refusal".
type alertKey struct{ tenant, name string }

func alertName(e spend.Event) string {
	if e.Kind == spend.FirstRefusal {
		return "first refusal"
	}
	return strconv.FormatFloat(e.Threshold, 'g', -1, 64)
}

// alertNames are the alerts in the order they are reported.
var alertNames = []string{"0.7", "0.9", "1", "first refusal"}

// wantAlerts are the alerts a tenant's period must have raised once
// across the fleet: each threshold its billed use reached, and the first
// refusal when its limit refused a request.
func wantAlerts(used, limit int64, refused bool) []string {
	var want []string
	for _, th := range []float64{0.7, 0.9, 1} {
		if float64(used) >= th*float64(limit) {
			want = append(want, strconv.FormatFloat(th, 'g', -1, 64))
		}
	}
	if refused {
		want = append(want, "first refusal")
	}
	return want
}

// tenantReports fills Report.Tenants, once every ledger is closed.
func (f *fleet) tenantReports(rep *Report, raw *redis.Client) {
	f.amu.Lock()
	defer f.amu.Unlock()
	for _, tp := range f.plans()[1:] {
		var used int64
		if v, ok := f.used.Load(tp.name); ok {
			used = v.(*atomic.Int64).Load()
		}
		var asked int64
		if v, ok := f.asked.Load(tp.name); ok {
			asked = v.(*atomic.Int64).Load()
		}
		tr := TenantReport{Name: tp.name, Requests: asked, Phase: tp.phase, FailClosed: tp.failClosed, Limit: tp.limit, Used: used,
			Strict: tp.strict, Estimate: tokensPerCall, Alerts: map[string]int{}}
		if tp.strict {
			tr.Estimate = tp.estimate
			tr.Shortfall = used / tokensPerCall * (tokensPerCall - tp.estimate)
		}
		pre := f.prefix + "spend:"
		if tp.strict {
			pre = f.prefix + "spend-strict:"
		}
		if rs, err := redisspend.New(raw, redisspend.Options{Prefix: pre}); err == nil {
			now := time.Now()
			y, m, d := now.UTC().Date()
			if tot, err := rs.Totals(context.Background(), tp.name, spend.Daily, int64(y)*10000+int64(m)*100+int64(d)); err == nil {
				tr.RedisTokens, tr.RedisReserved = tot.Tokens, tot.ReservedTokens
			}
		}
		_, refused := f.refused.Load(tp.name)
		tr.WantAlerts = wantAlerts(used, tp.limit, refused)
		for _, a := range alertNames {
			if n := f.alerts[alertKey{tenant: tp.name, name: a}]; n > 0 {
				tr.Alerts[a] = n
			}
		}
		if out, ok := f.outs[tp.phase]; ok && tp.watched() {
			mode := 0
			if tp.strict {
				mode = 1
			}
			var sumSynced, sumShare, away int64
			for _, p := range f.pods {
				b := p.watches[mode].bound(tp.name, tp.limit, out[0], out[1])
				tr.Outage += b.total
				if !b.viewed {
					tr.Bound += b.total
					tr.Detection += b.total
					away += b.total
					continue
				}
				tr.Bound += b.synced + max(b.share, b.early)
				away += max(b.share, b.early)
				sumSynced += b.synced
				sumShare += b.share
				tr.Detection += max(b.early-b.share, 0)
			}
			tr.Views = sumSynced + sumShare - tp.limit
			tr.Final = tr.Bound
			switch {
			case tp.strict && tp.phase == "restart":
				// Redis came back empty: until every pod has sent its
				// figure again, reservations count only those sent.
				tr.Final = tr.Bound + tp.limit
			case tp.strict:
				// Redis kept the figures the pods sent before the
				// outage, but not what they spent on their shares until
				// they send it: the first pods back may reserve it again.
				tr.Final = max(tr.Bound, tp.limit+away)
			}
		}
		rep.Tenants = append(rep.Tenants, tr)
	}
}

// ask counts a request made for the tenant.
func (f *fleet) ask(tenant string) {
	v, ok := f.asked.Load(tenant)
	if !ok {
		v, _ = f.asked.LoadOrStore(tenant, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(1)
}
