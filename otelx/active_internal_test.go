package otelx

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
)

// Past maxActiveSeries label sets, a new set's requests count in the
// overflow series; a known set keeps its own.
func TestActiveSeriesOverflow(t *testing.T) {
	var s activeSet
	first := s.get(attribute.NewSet(attribute.Int("n", 0)))
	for n := 1; n < maxActiveSeries; n++ {
		s.get(attribute.NewSet(attribute.Int("n", n)))
	}
	over := s.get(attribute.NewSet(attribute.Int("n", maxActiveSeries)))
	require.NotNil(t, over)
	assert.Same(t, s.over, over)
	assert.Same(t, over, s.get(attribute.NewSet(attribute.Int("n", maxActiveSeries+1))), "one overflow series")
	assert.Same(t, first, s.get(attribute.NewSet(attribute.Int("n", 0))), "a known set keeps its series")
	n := 0
	s.series.Range(func(_, _ any) bool { n++; return true })
	assert.Equal(t, maxActiveSeries+1, n, "every set, and the overflow")
}
