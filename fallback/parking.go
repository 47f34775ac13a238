package fallback

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/internal/park"
)

// Defaults of CoolDown and Stage.MaxRetryWait.
const (
	defaultCoolCount    = 3
	defaultCoolShare    = 0.5
	defaultCoolWindow   = 10 * time.Second
	defaultMaxRetryWait = time.Second
)

// CoolDown decides when a 429 that carries a server delay (RetryInfo,
// Retry-After, retry-after-ms) takes its tier — or the pool member whose
// key got it — out of rotation for every request until the server's time
// (SkipRateLimited), rather than for the request that got it alone. One
// 429 proves little: a shared backend sheds a few calls of every project
// now and then, and a tier skipped by everyone for 20 s after each one
// pushes its traffic onto dearer fallbacks for nothing. So the delay holds
// across requests only on evidence that the quota is spent for every
// caller:
//
//   - the 429 names a per-minute quota (classify.Verdict.PerMinute): the
//     key's quota, shared by every caller, is gone until the minute turns
//     (CoolPerMinuteQuota);
//   - Count 429s with a delay within Window that are also at least Share
//     of the tier's calls in it: a storm, told apart from a handful of
//     429s among many answers (CoolStorm);
//   - the one call let through at the end of a cool-down gets a 429 again:
//     the evidence still holds (CoolProbe).
//
// Otherwise the delay is the request's own: it waits for it when it is no
// longer than Stage.MaxRetryWait and fits the budget, or moves to the next
// tier, while other requests keep calling the tier. A rate limiter on the
// tier (ratelimit.Tier, a pool member's Limiter) still throttles itself
// on every 429. The zero value applies the defaults.
type CoolDown struct {
	// Count is how many 429s with a delay within Window take the tier
	// out (with Share). 0 means 3. Lower reacts to a storm sooner, at the
	// price of sidelining a tier on a chance cluster; higher sends a storm
	// more calls (and breaker counts) before everyone stops.
	Count int
	// Share is the least share of the tier's calls within Window that
	// must have been 429s, within (0, 1]. 0 means 0.5. It keeps a busy
	// tier, whose few per cent of 429s add up to Count in any window,
	// in rotation; lower makes a busy tier cool sooner.
	Share float64
	// Window is how far back the evidence reaches, from the first 429
	// in it. 0 means 10s. Longer gathers 429s spread thin (and counts
	// longer: every call of the tier pays an atomic add while a window is
	// open).
	Window time.Duration
	// Off keeps every 429's delay within its request: no 429 takes the
	// tier out for others, whatever it says. The breaker, and the parking
	// of an exhausted quota, still do.
	Off bool
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c CoolDown) WithDefaults() CoolDown {
	c.Count = cmp.Or(c.Count, defaultCoolCount)
	c.Share = cmp.Or(c.Share, defaultCoolShare)
	c.Window = cmp.Or(c.Window, defaultCoolWindow)
	return c
}

// Validate reports settings that cannot work.
func (c CoolDown) Validate() error {
	var errs []error
	if c.Count < 0 {
		errs = append(errs, fmt.Errorf("negative CoolDown.Count %d", c.Count))
	}
	if !(c.Share >= 0 && c.Share <= 1) {
		errs = append(errs, fmt.Errorf("CoolDown.Share must be within [0, 1], got %v", c.Share))
	}
	if c.Window < 0 {
		errs = append(errs, fmt.Errorf("negative CoolDown.Window %v", c.Window))
	}
	return errors.Join(errs...)
}

// CoolRule says which evidence took a tier, or a pool member, out of
// rotation for every request after a 429 (see CoolDown).
type CoolRule uint8

const (
	// NotCooled: the 429 took nothing out; its delay was its request's.
	NotCooled CoolRule = 0
	// CoolPerMinuteQuota: the 429 named a per-minute quota.
	CoolPerMinuteQuota = CoolRule(park.ByQuota)
	// CoolStorm: CoolDown.Count 429s within CoolDown.Window, at least
	// CoolDown.Share of the tier's calls.
	CoolStorm = CoolRule(park.ByStorm)
	// CoolProbe: the call let through at the end of a cool-down got a 429
	// again.
	CoolProbe = CoolRule(park.ByProbe)
)

var coolRuleNames = [...]string{NotCooled: "not_cooled", CoolPerMinuteQuota: "per_minute_quota", CoolStorm: "storm", CoolProbe: "probe"}

// String names the rule.
func (r CoolRule) String() string { return name(coolRuleNames[:], r, "invalid_cool_rule") }

// Cooling says that a tier, or a pool member, is out of rotation for every
// request after a server's 429: by which rule, and until when. The zero
// value says it is not.
type Cooling struct {
	Rule  CoolRule
	Until time.Time
}

// coolDownOf is how long a 429 with a server delay keeps its tier (or
// member) out once the evidence says so: the delay, at most
// classify.LongRetryAfter — a longer one is a quota's, which the
// classifier parks as QuotaExhausted, so a longer RateLimited delay (a
// custom classifier's, a hostile header) is not believed beyond it.
// MaxQuotaCooldown bounds the parking of quotas, not this.
func coolDownOf(v classify.Verdict) time.Duration {
	return min(v.RetryAfter, classify.LongRetryAfter)
}

// cool takes st out for every request after a 429 with a server delay
// when the evidence says so, and says by which rule, until when; nil when
// it did not.
func (e *engine) cool(r *request, st *stage, v classify.Verdict) *Cooling {
	if st.coolDown.Off || v.Class != classify.RateLimited || v.RetryAfter <= 0 {
		return nil
	}
	c := st.coolDown
	rule := CoolRule(st.tally.Judge(e.epoch, v.PerMinute, r.probe != 0, c.Window, c.Count, c.Share))
	if rule == NotCooled || !st.parking.CoolDown(e.epoch, uint8(SkipRateLimited), uint8(rule), coolDownOf(v)) {
		return nil
	}
	until, _ := st.parking.Until(e.epoch)
	return &Cooling{Rule: rule, Until: until}
}

// cooling describes st's cool-down now, for a skip: the zero Cooling when
// it is parked for another reason, or not at all.
func (e *engine) cooling(st *stage) Cooling {
	rule := CoolRule(st.parking.Rule(e.epoch))
	if rule == NotCooled {
		return Cooling{}
	}
	until, _ := st.parking.Until(e.epoch)
	return Cooling{Rule: rule, Until: until}
}
