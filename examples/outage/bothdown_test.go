package main

import (
	"bytes"
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConceptEmbedderPlacesTheFAQs(t *testing.T) {
	sim := func(a, b string) float64 {
		ea, _ := conceptEmbedder(context.Background(), a)
		eb, _ := conceptEmbedder(context.Background(), b)
		var d, na, nb float64
		for i := range ea.Vector {
			d += float64(ea.Vector[i]) * float64(eb.Vector[i])
			na += float64(ea.Vector[i]) * float64(ea.Vector[i])
			nb += float64(eb.Vector[i]) * float64(eb.Vector[i])
		}
		return d / (math.Sqrt(na) * math.Sqrt(nb))
	}
	for _, f := range faqs {
		for _, p := range f.paraphrase {
			assert.GreaterOrEqual(t, sim(f.canonical, p), 0.95, "%q ~ %q", f.canonical, p)
		}
		for _, l := range f.loose {
			s := sim(f.canonical, l)
			assert.True(t, s >= 0.86 && s < 0.95, "%q ~ %q: %v, want simplified", f.canonical, l, s)
		}
		for _, u := range unknown {
			assert.Less(t, sim(f.canonical, u), 0.86, "%q ~ %q", f.canonical, u)
		}
		for _, g := range faqs {
			if g.canonical != f.canonical {
				assert.Less(t, sim(f.canonical, g.canonical), 0.86)
			}
		}
	}
}

func TestBothModelsDown(t *testing.T) {
	cfg := shortConfig()
	cfg.Clients = 4
	sum, err := runBothDown(context.Background(), cfg, 400*time.Millisecond)
	require.NoError(t, err)
	assert.Positive(t, sum.requests)
	assert.Zero(t, sum.byKind["error"], "every request is answered")
	assert.Zero(t, sum.byKind["tier"], "no model answers")
	for _, k := range []string{"exact", "template", "semantic", "simplified", "default"} {
		assert.Positive(t, sum.byKind[k], k)
	}
	assert.Less(t, sum.upstream, int64(sum.requests), "the open breakers spare the models")
	assert.NotEmpty(t, sum.example[0], "a simplified answer to show")
	var out bytes.Buffer
	sum.print(&out)
	for _, want := range []string{"both models down", "exact", "template", "semantic", "simplified", "default", "[approximate]"} {
		assert.Contains(t, out.String(), want)
	}
}
