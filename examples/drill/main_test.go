package main

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func quick() config {
	return config{fault: "503", rate: 0.2, rps: 20, duration: time.Second, concurrency: 32, deadline: 2 * time.Second,
		seed: 1, minSuccess: 0.9, maxDefault: 0.5, maxOverrun: time.Second}
}

// The command's drills run end to end against the fake server: every
// request is sent and counted, the rule injects, and the report judges.
func TestDrills(t *testing.T) {
	rep, err := run(context.Background(), quick(), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 20, rep.Requests+rep.Dropped)
	require.Len(t, rep.Rules, 1)
	assert.Positive(t, rep.Rules[0].Injected)
	assert.Len(t, rep.Checks, 3)

	c := quick()
	c.fault, c.open = "none", time.Minute
	rep, err = run(context.Background(), c, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.ForcedOpens)
	assert.Zero(t, rep.Primary, "pro is skipped while forced open")

	c.fault = "nope"
	_, err = run(context.Background(), c, io.Discard)
	assert.ErrorContains(t, err, `unknown -fault "nope"`)
}
