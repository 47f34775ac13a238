package oaicompat

// UsageOf and SamplingOf expose what a response's usage and a request's
// parameters report to the chain, for the tests of the breakdowns the
// chain carries.
var (
	UsageOf    = usage
	SamplingOf = sampling
)
