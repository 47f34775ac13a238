package classify

import "fmt"

// Route says where a request goes after a tier failed with a class.
type Route uint8

const (
	// RouteNextTier moves on to the next tier, and after the last tier to the
	// cache and the default answer.
	RouteNextTier Route = iota
	// RouteLocal skips the remaining tiers and answers from the cache or the
	// default if they can; used when no upstream call can fit any more.
	RouteLocal
	// RouteFailClosed returns the error to the caller at once: no other tier,
	// no cache, no default. Switching models must not hide a configuration
	// error or route around a policy decision.
	RouteFailClosed
)

// String returns the route's name.
func (r Route) String() string {
	switch r {
	case RouteNextTier:
		return "next_tier"
	case RouteLocal:
		return "local"
	case RouteFailClosed:
		return "fail_closed"
	}
	return "invalid_route"
}

// Park says whether a failure takes its tier (or its model) out of rotation
// for later requests, so that they skip it without an upstream call.
type Park uint8

const (
	// ParkNone leaves the tier in rotation.
	ParkNone Park = iota
	// ParkQuota parks the tier until its quota is likely back: for the
	// chain's quota cooldown or the verdict's RetryAfter, whichever is
	// longer.
	ParkQuota
	// ParkRetired marks the model the failure names (Verdict.Model, else
	// the model the call used) retired: calls for that model are skipped
	// until the catalog lists it again or a recheck interval passes. Other
	// models served by the same tier are not affected.
	ParkRetired
)

// String returns the park's name.
func (p Park) String() string {
	switch p {
	case ParkNone:
		return "none"
	case ParkQuota:
		return "quota"
	case ParkRetired:
		return "retired"
	}
	return "invalid_park"
}

// Action is what the chain does with a failure of one class: its whole
// behaviour is this one row.
type Action struct {
	// Retry allows another attempt on the same tier (within the retry
	// policy's attempts, its budget and the deadline).
	Retry bool
	// BreakerFailure counts the failure toward tripping the tier's circuit
	// breaker. Classes that say nothing about the upstream's health (a bad
	// request, a rejected output, the caller's cancel) do not count.
	BreakerFailure bool
	// Route is where the request goes once this tier is given up.
	Route Route
	// Park takes the tier or its model out of rotation for later requests.
	Park Park
}

// Table maps every class to its action. The zero Table routes every class to
// the next tier without retrying, counting or parking; start from
// DefaultTable and override what you need. Table is a small value: copy it
// freely.
type Table struct {
	actions [numClasses]Action
}

var defaultTable = Table{actions: [numClasses]Action{
	OK:                {},
	Transient:         {Retry: true, BreakerFailure: true, Route: RouteNextTier},
	RateLimited:       {Retry: true, BreakerFailure: true, Route: RouteNextTier},
	QuotaExhausted:    {Route: RouteNextTier, Park: ParkQuota},
	Retired:           {Route: RouteNextTier, Park: ParkRetired},
	ContextTooLong:    {Route: RouteNextTier},
	InvalidRequest:    {Route: RouteFailClosed},
	Auth:              {Route: RouteFailClosed},
	Safety:            {Route: RouteFailClosed},
	InvalidOutput:     {Route: RouteNextTier},
	Canceled:          {Route: RouteFailClosed},
	DeadlineExhausted: {Route: RouteLocal},
	Rejected:          {Route: RouteNextTier},
	Unknown:           {BreakerFailure: true, Route: RouteNextTier},
}}

// DefaultTable returns the default class table: the one the README's class
// table shows.
func DefaultTable() Table { return defaultTable }

// Action returns the action for class c. An out-of-range class gets Unknown's
// action.
func (t Table) Action(c Class) Action {
	if int(c) >= numClasses {
		c = Unknown
	}
	return t.actions[c]
}

// With returns a copy of t in which class c has action a. It panics on an
// out-of-range class, route or park, which can only come from a programming
// error.
func (t Table) With(c Class, a Action) Table {
	if int(c) >= numClasses {
		panic(fmt.Sprintf("classify: Table.With: invalid class %d", c))
	}
	if a.Route > RouteFailClosed {
		panic(fmt.Sprintf("classify: Table.With: invalid route %d", a.Route))
	}
	if a.Park > ParkRetired {
		panic(fmt.Sprintf("classify: Table.With: invalid park %d", a.Park))
	}
	t.actions[c] = a
	return t
}
