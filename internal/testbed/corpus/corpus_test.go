package corpus_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/internal/testbed/corpus"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCorpusLoads: every case parses, cites a public source, and the corpus
// is as large and as varied as the conformance tests need.
func TestCorpusLoads(t *testing.T) {
	cases, err := corpus.All()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, len(cases), 152)
	providers := map[string]int{}
	for _, c := range cases {
		providers[c.Provider]++
		assert.True(t, c.GeminiShaped() || c.OpenAIShaped() || c.AnthropicShaped(), "%s: provider %q has no SDK path", c.Name, c.Provider)
	}
	assert.GreaterOrEqual(t, len(providers), 13, "%v", providers)
	assert.GreaterOrEqual(t, providers["anthropic"], 25, "Anthropic's own responses and streams")
}
