// Stand-ins for README.md's spend snippet.
package snippet

import (
	"context"
	"io"

	"github.com/tierguard/tierguard/fallback"
)

var ctx = context.Background()

type reply struct{ Text string }

var (
	file                            io.Reader
	proStage, flashStage, liteStage fallback.Stage[string, reply]
	tenant, scenario, in            string
	expectedUsage                   fallback.Usage
)
