// Package hedge holds the two figures a hedged tier keeps across
// requests: the budget that bounds hedges to a share of its attempts, and
// the running quantile of its latency that says when to hedge.
package hedge
