package fallback_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/internal/testbed/reported"
)

// TestObservedPanicEndsTheRequestOnce pins the observed path's unwinding:
// Do recovers only when a request did not end, so a tier's panic still
// ends it once (with the panic), and a panic raised after it ended (by
// an observer's RequestEnded) reaches the caller without a second end.
func TestObservedPanicEndsTheRequestOnce(t *testing.T) {
	t.Run("tier", func(t *testing.T) {
		var obs reported.Recorder
		c := newChain(t, fallback.Config[string, string]{Observer: &obs, Stages: stages(fallback.Tier("pro",
			func(context.Context, string) (string, error) { panic("boom") }))})
		assert.PanicsWithValue(t, "boom", func() { _, _ = c.Do(context.Background(), "q") })
		assertEndedByPanic(t, &obs, "boom")
	})
	t.Run("observer", func(t *testing.T) {
		obs := &panicOnEnd{}
		c := newChain(t, fallback.Config[string, string]{Observer: obs, Stages: stages(okTier("pro"))})
		func() {
			defer func() {
				p := recover()
				err, _ := p.(error)
				assert.ErrorIs(t, err, errEndPanic, "the observer's own panic, unchanged")
			}()
			_, _ = c.Do(context.Background(), "q")
		}()
		assert.Equal(t, 1, obs.ends, "RequestEnded once")
	})
}

// assertEndedByPanic asserts that obs saw one request end, unanswered,
// with a PanicError holding value.
func assertEndedByPanic(t *testing.T, obs *reported.Recorder, value any) {
	t.Helper()
	ends := reported.Of[fallback.RequestEnd](obs)
	require.Len(t, ends, 1)
	var pe *fallback.PanicError
	require.ErrorAs(t, ends[0].Err, &pe)
	assert.Equal(t, value, pe.Value)
	assert.False(t, ends[0].Answered)
}

var errEndPanic = errors.New("observer panicked")

// panicOnEnd panics in RequestEnded.
type panicOnEnd struct {
	fallback.NopObserver
	ends int
}

func (p *panicOnEnd) RequestEnded(context.Context, fallback.RequestEnd) {
	p.ends++
	panic(errEndPanic)
}
