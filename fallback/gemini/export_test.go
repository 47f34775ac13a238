package gemini

// ReplyOf and SamplingOf expose what a response and a request config
// report to the chain, for the tests of the breakdowns the chain carries.
var (
	ReplyOf    = reply
	SamplingOf = sampling
)
