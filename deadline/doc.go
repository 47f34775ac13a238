// Package deadline divides one request's time among its attempts.
//
// A Budget is the earlier of the request context's deadline and an optional
// total the chain sets. Every attempt gets min(per-try cap, remaining −
// reserve), where the reserve keeps enough time for later tiers to make one
// meaningful attempt. When less than a minimum useful attempt is left, no
// attempt starts and the caller gets an error matching ErrExhausted, so it
// can answer from a cache or a default instead of starting a call that
// cannot finish.
//
// The package reads the clock only when a decision needs it and creates a
// new context only when the attempt must end before the request's own
// context does; the common case of a single tier under a context deadline
// costs one clock read and no allocation.
package deadline
