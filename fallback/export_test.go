package fallback

// The defaults, for the tests.
const (
	DefaultMinAttempt       = defaultMinAttempt
	DefaultQuotaCooldown    = defaultQuotaCooldown
	DefaultMaxQuotaCooldown = defaultMaxQuotaCooldown
	DefaultRetiredRecheck   = defaultRetiredRecheck
)

// AsInvalidOutput exposes the chain's wrapping of validator errors.
var AsInvalidOutput = asInvalidOutput
