// Package attach keeps the values that several users of one guard share
// through it — the state otelx keeps per breaker or bulkhead, so that a
// guard watched by several chains is counted once — each counted by its
// holders and let go with the last. It is what the Attach methods of
// package breaker and package bulkhead are built on.
package attach
