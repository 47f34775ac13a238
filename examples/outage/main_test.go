package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"slices"
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
	cfg.StreamClients = 3
	cfg.FirstChunk = 400 * time.Millisecond
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
			cfg.Metrics = catalog // one run with -metrics, one without
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
			pro, legacy, flash := tiers["pro"], tiers["legacy"], tiers["flash"]
			assert.Positive(t, pro.upstream.Requests)
			assert.Positive(t, pro.upstream.Outcomes["unavailable"], "the outage reached pro")
			assert.Equal(t, int(pro.upstream.Requests), pro.calls+pro.streamCalls, "the chains' trails and the server agree on pro's calls")
			assert.Equal(t, int(flash.upstream.Requests), flash.calls+flash.streamCalls, "the chains' trails and the server agree on flash's calls")

			st := sum.streams
			assert.Positive(t, st.streams)
			assert.Positive(t, st.byEnd[streamComplete], "streams complete")
			assert.Zero(t, st.byEnd[streamFailed], "the default answers when no tier can stream")
			assert.Positive(t, st.bySource[slices.Index(streamSources, "flash")], "streams fall back to flash before their first chunk")
			assert.Positive(t, st.ttfcP50)
			assert.LessOrEqual(t, st.ttfcP50, st.ttfcP95)
			assert.Positive(t, pro.streamCalls)
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

			// The ledger saw every unary request, priced what pro and flash
			// answered, and counted the outage's fallbacks.
			require.Len(t, sum.spend, len(tenants))
			var spent int64
			for _, r := range sum.spend {
				spent += r.Requests
				assert.Positive(t, r.Cost, r.tenant)
				assert.Positive(t, r.Fallbacks, r.tenant)
				assert.LessOrEqual(t, r.Valid, r.Answered, r.tenant)
				assert.Zero(t, r.Unpriced, "every model that answers has a price")
			}
			assert.Equal(t, int64(sum.requests), spent, "one ledger record per unary request")

			var out bytes.Buffer
			sum.print(&out)
			for _, s := range []string{"answers by source", "by phase", "streams:", "time to first chunk", "breaker transitions", "upstream calls", "per tier", "spend by tenant", "invariants hold"} {
				assert.Contains(t, out.String(), s)
			}
			if !catalog {
				assert.Nil(t, sum.metrics)
				assert.NotContains(t, out.String(), "metrics (otelx", "metrics only with -metrics")
				return
			}
			checkMetrics(t, sum, out.String())
		})
	}
}

// checkMetrics checks what -metrics collected and printed.
func checkMetrics(t *testing.T, sum *summary, printed string) {
	t.Helper()
	require.NotNil(t, sum.metrics)
	seen := map[string]bool{}
	for _, row := range sum.metrics.rows {
		op, _ := row.attrs.Value(opKey)
		seen[row.metric+" "+op.String()] = true
	}
	for _, want := range []string{
		"gen_ai.client.inference.duration (s) generate_content",
		"gen_ai.client.inference.time_to_first_chunk (s) generate_content",
		"gen_ai.client.inference.time_per_output_chunk (s) generate_content",
		"gen_ai.client.inference.usage.input_tokens ({token}) generate_content",
		"gen_ai.client.inference.operation.output_tokens ({token}) generate_content",
		"tierguard.requests ({request}) generate_content",
		"tierguard.breaker.state ({state}) ",
		"tierguard.breaker.transitions ({transition}) ",
		"tierguard.cost ({USD}) ",
	} {
		assert.True(t, seen[want], "%s not collected: %v", want, seen)
	}
	for _, row := range sum.metrics.rows {
		op, _ := row.attrs.Value(opKey)
		assert.NotEqual(t, "stream_generate_content", op.AsString(), "streams keep the operation name")
	}
	for _, s := range []string{"metrics (otelx", "gen_ai.client.inference.time_to_first_chunk (s)", "gen_ai.request.model, by tier:", "count "} {
		assert.Contains(t, printed, s)
	}
}

// Streams cut after their first chunk end incomplete, with no fallback and
// within their deadline.
func TestStreamsBreak(t *testing.T) {
	cfg := shortConfig()
	cfg.Duration = 600 * time.Millisecond
	cfg.Clients, cfg.StreamClients = 1, 2
	cfg.OutageLen, cfg.StormLen = 0, 0
	cfg.Malformed, cfg.Stall, cfg.NoFinish = 0, 0, 0
	cfg.StreamCuts = 1 // every pro answer is cut
	sum, err := run(context.Background(), cfg, nil)
	require.NoError(t, err)
	assert.Empty(t, sum.violations())
	st := sum.streams
	require.Positive(t, st.byEnd[streamIncomplete], "%+v", st)
	assert.Equal(t, st.byEnd[streamIncomplete], st.causes["connection cut"])
	assert.Zero(t, st.bySource[slices.Index(streamSources, "error")])
	assert.Positive(t, st.byEnd[streamComplete], "flash streams once pro's breaker opens")
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
	require.NoError(t, fs.Parse([]string{"-clients", "0", "-malformed", "1.5", "-deadline", "10ms", "-catalog=false",
		"-stream-clients", "-1", "-stream-cuts", "2", "-metrics"}))
	assert.False(t, cfg.Catalog)
	assert.True(t, cfg.Metrics)
	err := cfg.validate()
	require.Error(t, err)
	for _, s := range []string{"-clients", "-malformed", "-deadline", "-stream-clients", "-stream-cuts"} {
		assert.Contains(t, err.Error(), s)
	}
}

// A chaos drill forces pro's breaker open for its window: the transitions
// show it forced open and given back on time, flash answers meanwhile, and
// the run keeps its invariants.
func TestChaosDrill(t *testing.T) {
	cfg := shortConfig()
	cfg.Duration = 900 * time.Millisecond
	cfg.StreamClients = 0
	cfg.OutageLen, cfg.StormLen = 0, 0
	cfg.Malformed, cfg.Stall, cfg.NoFinish, cfg.StreamCuts = 0, 0, 0, 0
	cfg.DrillStart, cfg.DrillLen = 200*time.Millisecond, 400*time.Millisecond
	require.NoError(t, cfg.validate())
	sum, err := run(context.Background(), cfg, nil)
	require.NoError(t, err)
	assert.Empty(t, sum.violations())
	var forced, back *transition
	for i, tr := range sum.transitions {
		if tr.name == "pro" && tr.reason == "forced open" && forced == nil {
			forced = &sum.transitions[i]
		}
		if tr.name == "pro" && tr.reason == "reset" && back == nil {
			back = &sum.transitions[i]
		}
	}
	require.NotNil(t, forced, "%+v", sum.transitions)
	require.NotNil(t, back, "%+v", sum.transitions)
	assert.GreaterOrEqual(t, forced.at, cfg.DrillStart)
	assert.GreaterOrEqual(t, back.at, cfg.DrillStart+cfg.DrillLen)
	assert.Positive(t, sum.bySource[sourceIndex("pro")])
	assert.Positive(t, sum.bySource[sourceIndex("flash")], "flash answers while pro is forced open")

	bad := shortConfig()
	bad.DrillLen = -time.Second
	assert.ErrorContains(t, bad.validate(), "-drill-len")
}
