package classify

// The delay parsers, for the tests.
var (
	ParseRetryAfter       = parseRetryAfter
	ParseRetryDelay       = parseRetryDelay
	ParseRetryAfterMillis = parseRetryAfterMillis
)
