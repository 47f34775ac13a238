package deadline

import "time"

// Fits exposes the budget's retry check, which retry and the chain use
// directly, to the fuzz test.
func (b Budget) Fits(wait time.Duration, t Try) bool { return b.b.Fits(wait, t.internal()) }
