package gemini

import "io"

// ReplyOf and SamplingOf expose what a response and a request config
// report to the chain, for the tests of the breakdowns the chain carries.
var (
	ReplyOf    = reply
	SamplingOf = sampling
)

// SSEFilter is the filter the transport puts on an event stream's body.
func SSEFilter(body io.ReadCloser) io.ReadCloser { return newSSEFilter(body) }
