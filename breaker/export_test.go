package breaker

// Generation exposes a breaker's generation number to the tests.
func Generation(b *Breaker) uint64 { return b.generation() }

// ApplyShared applies s as the breaker's Store would.
func ApplyShared(b *Breaker, s Shared) { b.applyShared(s) }

// The defaults, for the tests.
const (
	DefaultConsecutiveFailures = defaultConsecutiveFailures
	DefaultCooldown            = defaultCooldown
	DefaultWindow              = defaultWindow
	DefaultMinCalls            = defaultMinCalls
	DefaultSlowCallRatio       = defaultSlowCallRatio
	DefaultHalfOpenProbes      = defaultHalfOpenProbes
	DefaultProbeSuccesses      = defaultProbeSuccesses
	DefaultMaxHalfOpenWait     = defaultMaxHalfOpenWait
)
