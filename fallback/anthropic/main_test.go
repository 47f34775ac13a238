package anthropic_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test closes its server and the idle connections of its transport,
// so no goroutine may outlive the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
