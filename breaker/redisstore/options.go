package redisstore

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"
)

// Defaults applied to zero fields of Options.
const (
	DefaultPrefix        = "tierguard:breaker:"
	DefaultRequestBound  = 5 * time.Millisecond
	DefaultOpTimeout     = time.Second
	DefaultPollInterval  = time.Second
	DefaultFlushInterval = 200 * time.Millisecond
	DefaultQueueSize     = 1024
	DefaultStateTTL      = 24 * time.Hour
	DefaultLeaseDuration = 30 * time.Second
)

// Options configures a Store. The zero value is a working configuration.
type Options struct {
	// Prefix starts every key and the channel name; DefaultPrefix when
	// empty. It must be printable and hold no '{', '}' or space: the braces
	// are reserved for the cluster hash tag of each breaker's keys. Use one
	// prefix per environment (or per service) that must not share
	// breakers.
	Prefix string

	// RequestBound is the longest a request waits on Redis. Only TryProbe
	// (a half-open breaker asking for a fleet-wide probe permit) ever
	// waits; past the bound it answers true, falling back to the local
	// probe limit. DefaultRequestBound when zero. Size it at two or three
	// times Redis's p99 round trip: it is paid at most once per probe, and
	// once per outage (a timed-out store is marked unhealthy and later
	// probes do not wait until the next successful poll). It is also how
	// long Redis may take to answer a permit request before the request
	// expires (a late grant would be a lease nobody returns), and Close
	// returns within twice RequestBound.
	RequestBound time.Duration

	// OpTimeout bounds each background Redis operation (publishing a
	// transition, a batch of counts, a poll) through its context.
	// go-redis honours context deadlines only with
	// redis.Options.ContextTimeoutEnabled; otherwise its ReadTimeout and
	// WriteTimeout bound them. No request ever waits on these operations.
	// It is also the life of a proposed transition or a batch of counts:
	// Redis ignores one it runs more than OpTimeout after it was sent
	// (after a pause, say), whatever the client's timeouts.
	// DefaultOpTimeout when zero.
	OpTimeout time.Duration

	// PollInterval is how often the store reads the shared state of every
	// breaker it holds: the safety net for publications missed while
	// subscribed (or while Redis was away), the health check that lets
	// TryProbe use Redis again, and the moment local trips made while Redis
	// was unreachable are re-published. It bounds the delay with which a
	// process sees another's change when a message is lost.
	// DefaultPollInterval when zero.
	PollInterval time.Duration

	// FlushInterval is how often counted outcomes are sent to the fleet's
	// window, in one batch per breaker. It applies only when fleet
	// thresholds are enabled (FleetFailures, FleetFailureRatio).
	// DefaultFlushInterval when zero.
	FlushInterval time.Duration

	// QueueSize bounds the queue of transitions and probe releases waiting
	// to be written. When it is full the newest entry is dropped and
	// counted in Stats.Dropped; a dropped trip is re-published by the next
	// poll, a dropped release expires with its lease. DefaultQueueSize
	// when zero.
	QueueSize int

	// StateTTL is how long a breaker's shared state outlives its last
	// write (an open state lives for its cooldown plus this), so that the
	// keys of breakers nobody uses any more expire. DefaultStateTTL when
	// zero.
	StateTTL time.Duration

	// LeaseDuration is how long a fleet-wide probe permit lasts if its
	// holder never returns it (the process died). Set it above the longest
	// a probe call may take (the per-try timeout), or a second probe may
	// start while the first is still running. DefaultLeaseDuration when
	// zero.
	LeaseDuration time.Duration

	// FleetProbes is how many half-open probes may be in flight at once
	// across all processes. 0 means each breaker's own HalfOpenProbes, so
	// that the fleet probes as gently as one process would.
	FleetProbes int

	// FleetFailures trips every process's breaker when this many counted
	// failures fall within the breaker's Window across the fleet, so that
	// a fleet trips on failures no single process sees enough of (say 30
	// fleet-wide where each of 10 pods sees 3). 0 disables it.
	FleetFailures int
	// FleetFailureRatio trips every process's breaker when the fleet's
	// failure ratio over the breaker's Window reaches this share of at
	// least FleetMinCalls calls. 0 means the breaker's own FailureRatio;
	// a negative value disables it.
	FleetFailureRatio float64
	// FleetMinCalls is the least number of fleet-wide calls in the window
	// before FleetFailureRatio may trip. 0 means the breaker's MinCalls.
	FleetMinCalls int

	// OnError, when set, is called with every failed Redis operation, from
	// the store's own goroutines (never from a request). It must not
	// block. Errors are counted in Stats.Errors either way. The errors
	// name breakers by their hashed id only.
	OnError func(error)
}

func (o Options) normalize() (Options, error) {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	check(validPrefix(o.Prefix), "Prefix must be at most 128 printable characters without '{', '}' or spaces, got %q", o.Prefix)
	check(o.RequestBound >= 0, "RequestBound must not be negative, got %v", o.RequestBound)
	check(o.OpTimeout >= 0, "OpTimeout must not be negative, got %v", o.OpTimeout)
	check(o.PollInterval >= 0, "PollInterval must not be negative, got %v", o.PollInterval)
	check(o.FlushInterval >= 0, "FlushInterval must not be negative, got %v", o.FlushInterval)
	check(o.QueueSize >= 0, "QueueSize must not be negative, got %d", o.QueueSize)
	check(o.StateTTL >= 0, "StateTTL must not be negative, got %v", o.StateTTL)
	check(o.LeaseDuration >= 0, "LeaseDuration must not be negative, got %v", o.LeaseDuration)
	check(o.FleetProbes >= 0, "FleetProbes must not be negative, got %d", o.FleetProbes)
	check(o.FleetFailures >= 0, "FleetFailures must not be negative, got %d", o.FleetFailures)
	check(!math.IsNaN(o.FleetFailureRatio) && o.FleetFailureRatio <= 1, "FleetFailureRatio must be at most 1, got %v", o.FleetFailureRatio)
	check(o.FleetMinCalls >= 0, "FleetMinCalls must not be negative, got %d", o.FleetMinCalls)
	if err := errors.Join(errs...); err != nil {
		return o, fmt.Errorf("redisstore: invalid options: %w", err)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.RequestBound, DefaultRequestBound)
	def(&o.OpTimeout, DefaultOpTimeout)
	def(&o.PollInterval, DefaultPollInterval)
	def(&o.FlushInterval, DefaultFlushInterval)
	def(&o.StateTTL, DefaultStateTTL)
	def(&o.LeaseDuration, DefaultLeaseDuration)
	if o.QueueSize == 0 {
		o.QueueSize = DefaultQueueSize
	}
	return o, nil
}

func validPrefix(p string) bool {
	if len(p) > 128 {
		return false
	}
	return !strings.ContainsFunc(p, func(r rune) bool {
		return r == '{' || r == '}' || unicode.IsSpace(r) || !unicode.IsPrint(r)
	})
}
