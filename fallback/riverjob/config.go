package riverjob

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/validate"
)

// Defaults applied to zero fields of Config.
const (
	defaultTenantBusySnooze = time.Second
	defaultQuotaSnooze      = time.Minute
	minStoreMargin          = time.Second
)

// Store keeps the results of completed jobs. The worker writes a result
// only after the chain's validators and Config.Validate accepted it, so a
// stored result is always a validated one; an invalid output is never
// stored. A store shared by every worker (a table in the queue's own
// database, say) also makes a job that runs again after a crash — a worker
// killed after Put, before River recorded the completion — complete
// without calling the chain. Keys are the jobs' idempotency keys (see
// Args.Key): give each job kind a store, or a table, of its own.
type Store[Out any] interface {
	// Has reports whether a result is stored under key.
	Has(ctx context.Context, key string) (bool, error)
	// Put stores out under key. A key that already has a result keeps the
	// first: Put must then return nil without replacing it.
	Put(ctx context.Context, key string, out Out) error
}

// Config configures a Worker.
type Config[In, Out any] struct {
	// Chain answers each job. Required. Its retries all happen inside one
	// job attempt: the worker never retries on top of them, it only
	// decides, once per attempt, what River does next.
	Chain *fallback.Chain[In, Out]
	// Store receives validated results. Required.
	Store Store[Out]
	// Validate checks an answer once more before it is stored, whichever
	// source gave it (a tier, the chain's cache or its default): the
	// business rules a result must meet to be kept. A rejection discards
	// the job as invalid output. nil accepts what the chain accepted.
	Validate validate.Validator[Out]
	// Ledger, if set, bills each job attempt's chain call to the job's
	// tenant and scenario: the attempt runs under a spend.Ticket
	// (Ledger.Begin, so no limit is checked; its cost still counts toward
	// the tenant's limits), with the job id as the request id. Attach the
	// same ledger to Chain (Ledger.Attach, or Ledger.Observer in the
	// chain's Config); without a ticket the ledger does not record a
	// request and counts it in Ledger.Untracked.
	Ledger *spend.Ledger

	// Tenants bounds each tenant's jobs in flight inside this worker
	// process (the key is Args.Tenant); nil means no per-tenant bound.
	// Queue-wide limits are River's (QueueConfig.MaxWorkers). A job whose
	// tenant is at its limit is snoozed for TenantBusySnooze, which does
	// not count as an attempt; give the group's bulkheads a MaxWait to
	// wait for a slot first.
	Tenants *bulkhead.Group
	// TenantBusySnooze is how long a job whose tenant is at its limit
	// sleeps. 0 means 1s.
	TenantBusySnooze time.Duration

	// Timeout is the job's timeout (River's Worker.Timeout): the chain's
	// total deadline plus the time to store the result. 0 means the
	// chain's Total plus a tenth (at least a second). Required when the
	// chain has no Total. The client's RescueStuckJobsAfter must be
	// longer.
	Timeout time.Duration
	// RetryPolicy is River's backoff for retried jobs; the worker
	// schedules a retry at the later of the server's retry-after and
	// this. Give it the client's own Config.RetryPolicy. nil means
	// River's default (attempt⁴ seconds, with jitter).
	RetryPolicy river.ClientRetryPolicy
	// QuotaSnooze is how long a job sleeps when a tier is out of quota
	// and nothing says when it resets (the chain's table does not park
	// the tier, and the server gave no retry-after). 0 means 1m.
	//
	// A tier whose 429 (without a retry-after) the chain parked, and
	// whose parking ran out before the attempt ended (a QuotaCooldown
	// shorter than the rest of the attempt), looks the same by then: give
	// a chain with a short QuotaCooldown a QuotaSnooze of the same scale.
	// A tier the attempt only skipped as parked never waits for it: its
	// parking ending during the attempt makes the job run again at once.
	QuotaSnooze time.Duration
}

// check reports every invalid field at once.
func (c *Config[In, Out]) check() error {
	var errs []error
	if c.Chain == nil {
		errs = append(errs, errors.New("a Chain is required"))
	}
	if c.Store == nil {
		errs = append(errs, errors.New("a Store is required"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"TenantBusySnooze", c.TenantBusySnooze}, {"Timeout", c.Timeout}, {"QuotaSnooze", c.QuotaSnooze}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("negative %s %v", d.name, d.v))
		}
	}
	if c.Chain != nil {
		total := c.Chain.Total()
		switch {
		case c.Timeout == 0 && total == 0:
			errs = append(errs, errors.New("a Timeout is required: the chain has no Total"))
		case c.Timeout > 0 && total > 0 && c.Timeout <= total:
			errs = append(errs, fmt.Errorf("Timeout %v must exceed the chain's Total %v, to leave time to store the result", c.Timeout, total))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("riverjob: invalid config: %w", err)
	}
	return nil
}

// timeout is the job's timeout.
func (c *Config[In, Out]) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	total := c.Chain.Total()
	return total + max(total/10, minStoreMargin)
}
