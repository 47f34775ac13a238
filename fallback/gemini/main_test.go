package gemini_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test closes its fake server and the idle connections of its
// transport, so no goroutine may outlive the tests. The one exception is
// not ours: go.opencensus.io, which genai pulls in through
// cloud.google.com/go/auth, starts a worker goroutine in an init function.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}
