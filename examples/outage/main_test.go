package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/fallback"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// shortConfig is the story compressed into about a second. Its invariants
// are generous: on a loaded two-core machine under -race the scheduler, not
// the library, decides how late a goroutine wakes.
func shortConfig() config {
	cfg := defaultConfig()
	cfg.Clients = 8
	cfg.Duration = 1200 * time.Millisecond
	cfg.Deadline = time.Second
	cfg.Think = 5 * time.Millisecond
	cfg.OutageStart, cfg.OutageLen = 150*time.Millisecond, 500*time.Millisecond
	cfg.StormStart, cfg.StormLen = 800*time.Millisecond, 250*time.Millisecond
	cfg.StormRetry = 200 * time.Millisecond
	cfg.Malformed = 0.05
	cfg.Stall = 0.01
	cfg.Cooldown = 200 * time.Millisecond
	cfg.Slack = 500 * time.Millisecond
	cfg.Progress = false
	return cfg
}

func TestRunShort(t *testing.T) {
	for _, catalog := range []bool{true, false} {
		name := "catalog"
		if !catalog {
			name = "no_catalog"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := shortConfig()
			cfg.Catalog = catalog
			require.NoError(t, cfg.validate())
			var progress bytes.Buffer
			sum, err := run(context.Background(), cfg, &progress)
			require.NoError(t, err)

			assert.Empty(t, sum.violations())
			assert.Positive(t, sum.requests)
			assert.Equal(t, sum.requests, sum.answered, "the default answer leaves no request unanswered")
			assert.Positive(t, sum.bySource[sourceIndex("pro")], "pro answers while healthy")
			assert.Positive(t, sum.bySource[sourceIndex("flash")], "flash answers while pro is down")
			assert.Zero(t, sum.bySource[sourceIndex("legacy")], "the retired model never answers")

			tiers := map[string]tierRow{}
			for _, tr := range sum.tiers {
				tiers[tr.name] = tr
			}
			pro, legacy := tiers["pro"], tiers["legacy"]
			assert.Positive(t, pro.upstream.Requests)
			assert.Positive(t, pro.upstream.Outcomes["unavailable"], "the outage reached pro")
			assert.Equal(t, int(pro.upstream.Requests), pro.calls, "the chain's trails and the server agree on pro's calls")
			if catalog {
				assert.Zero(t, legacy.upstream.Requests, "the catalog skips the retired model without a call")
			} else {
				assert.Positive(t, legacy.upstream.Requests, "without a catalog the retired model answers 404 once...")
				assert.LessOrEqual(t, legacy.upstream.Requests, int64(cfg.Clients), "...and is then parked")
			}
			assert.Positive(t, legacy.skips[fallback.SkipRetired])

			opened := false
			for _, tr := range sum.transitions {
				if tr.name == "pro" && tr.from == breaker.Closed && tr.to == breaker.Open {
					opened = true
				}
			}
			assert.True(t, opened, "pro's breaker opens during the outage: %v", sum.transitions)
			assert.Contains(t, progress.String(), "pro outage", "the phase changes are announced")

			var out bytes.Buffer
			sum.print(&out)
			for _, s := range []string{"answers by source", "by phase", "breaker transitions", "upstream calls", "per tier", "invariants hold"} {
				assert.Contains(t, out.String(), s)
			}
		})
	}
}

func TestViolations(t *testing.T) {
	cfg := defaultConfig()
	s := &summary{cfg: cfg, requests: 100, answered: 100}
	assert.Empty(t, s.violations())

	s.overrun = cfg.Slack + time.Millisecond
	s.answered = 98
	v := s.violations()
	require.Len(t, v, 2)
	assert.Contains(t, v[0], "after its deadline")
	assert.Contains(t, v[1], "98.00% of requests answered")

	var out bytes.Buffer
	s.bySource = make([]int, len(sources))
	s.print(&out)
	assert.Contains(t, out.String(), "INVARIANT BROKEN")

	assert.Equal(t, []string{"no request was made"}, (&summary{cfg: cfg}).violations())
}

func TestPhases(t *testing.T) {
	cfg := defaultConfig()
	ps := phases(cfg)
	var labels []string
	for _, p := range ps {
		labels = append(labels, p.label)
	}
	assert.Equal(t, []string{"healthy", "pro 503 outage", "healthy", "pro 429 storm", "healthy"}, labels)
	assert.Equal(t, cfg.OutageStart, ps[1].from)
	assert.Equal(t, cfg.Duration, ps[len(ps)-1].to)
	assert.Equal(t, 1, phaseAt(ps, cfg.OutageStart))
	assert.Equal(t, len(ps)-1, phaseAt(ps, cfg.Duration+time.Second))

	cfg.StormStart = cfg.OutageStart + cfg.OutageLen - time.Second // overlapping windows
	labels = labels[:0]
	for _, p := range phases(cfg) {
		labels = append(labels, p.label)
	}
	assert.Equal(t, []string{"healthy", "pro 503 outage", "pro 503 outage + 429 storm", "pro 429 storm", "healthy"}, labels)

	cfg.OutageLen, cfg.StormLen = 0, 0
	assert.Equal(t, []phase{{label: "healthy", from: 0, to: cfg.Duration}}, phases(cfg))
}

func TestConfig(t *testing.T) {
	cfg := defaultConfig()
	require.NoError(t, cfg.validate())

	fs := flag.NewFlagSet("outage", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.register(fs)
	require.NoError(t, fs.Parse([]string{"-clients", "0", "-malformed", "1.5", "-deadline", "10ms", "-catalog=false"}))
	assert.False(t, cfg.Catalog)
	err := cfg.validate()
	require.Error(t, err)
	for _, s := range []string{"-clients", "-malformed", "-deadline"} {
		assert.Contains(t, err.Error(), s)
	}
}
