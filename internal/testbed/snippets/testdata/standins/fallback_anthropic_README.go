// Stand-ins for fallback/anthropic/README.md's snippets.
package snippet

import "context"

var ctx = context.Background()

// key is the reader's Anthropic API key.
var key string
