package hedge_test

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/internal/hedge"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Over a run, hedges stay within the share of attempts plus the bank,
// whoever asks for them and however many at once.
func TestBudgetBoundsHedgesToTheShareOfAttemptsPlusTheBank(t *testing.T) {
	var b hedge.Budget
	b.Init(0.1)
	var mu sync.Mutex
	taken := 0
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 100 {
				b.Attempted()
				if b.Take(1) {
					mu.Lock()
					taken++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, taken, 6400/10+hedge.Bank)
	assert.GreaterOrEqual(t, taken, 6400/10, "every earned hedge can be spent")
}

func TestBudgetStartsFullAndRefunds(t *testing.T) {
	var b hedge.Budget
	b.Init(0)
	for range hedge.Bank {
		assert.True(t, b.Take(1))
	}
	assert.False(t, b.Take(1), "a share of 0 earns nothing back")
	b.Refund()
	assert.False(t, b.Take(2), "least is how many must be banked")
	assert.True(t, b.Take(1))
}

// The estimate settles near the asked quantile of what it observes.
func TestQuantileSettlesNearItsQuantile(t *testing.T) {
	var q hedge.Quantile
	q.Init(0.9, time.Millisecond)
	d, ok := q.Delay()
	assert.True(t, ok)
	assert.Equal(t, time.Millisecond, d, "the floor until something is observed")
	rng := rand.New(rand.NewPCG(1, 2))
	seen := make([]time.Duration, 0, 20000)
	for range cap(seen) {
		x := time.Duration(rng.ExpFloat64() * float64(100*time.Millisecond))
		seen = append(seen, x)
		q.Observe(x)
	}
	slices.Sort(seen)
	want := seen[len(seen)*9/10]
	got, _ := q.Delay()
	assert.InEpsilon(t, float64(want), float64(got), 0.25, "p90 %v, estimate %v", want, got)
}

func TestQuantileWithoutQuantileOrFloorNeverHedges(t *testing.T) {
	var q hedge.Quantile
	q.Init(0, 0)
	q.Observe(time.Second)
	_, ok := q.Delay()
	assert.False(t, ok)
}
