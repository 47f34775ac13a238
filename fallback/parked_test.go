package fallback_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
)

func TestParkedUntil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		perDay := classify.Wrap(errors.New("429 per day"), classify.Verdict{Class: classify.QuotaExhausted, RetryAfter: 45 * time.Second})
		pro := newFake("pro", ok("deep"), step{err: perDay})
		c := newChain(t, fallback.Config[string, string]{
			Stages: stages(pro, newFake("flash", ok("quick"))), QuotaCooldown: 30 * time.Second, Total: 5 * time.Second,
		})
		assert.Equal(t, 5*time.Second, c.Total())
		until, why := c.ParkedUntil(0)
		assert.True(t, until.IsZero())
		assert.Equal(t, fallback.NotSkipped, why)

		start := time.Now()
		_, err := c.Do(context.Background(), "q")
		assert.NoError(t, err)
		until, why = c.ParkedUntil(0)
		assert.Equal(t, fallback.SkipQuota, why)
		assert.Equal(t, start.Add(45*time.Second), until, "the server's retry-after outlasts the cooldown")
		until, why = c.ParkedUntil(1)
		assert.True(t, until.IsZero(), "flash answered: not parked")
		assert.Equal(t, fallback.NotSkipped, why)

		time.Sleep(45 * time.Second)
		until, why = c.ParkedUntil(0)
		assert.True(t, until.IsZero(), "the parking has ended")
		assert.Equal(t, fallback.NotSkipped, why)

		for _, i := range []int{-1, 2} {
			until, why = c.ParkedUntil(i)
			assert.True(t, until.IsZero())
			assert.Equal(t, fallback.NotSkipped, why)
		}
	})
}
