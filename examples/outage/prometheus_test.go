package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/otelx"
	"github.com/tierguard/tierguard/retry"
)

// promScrape is the scrape interval of the test's Prometheus: short, so
// that a run of a couple of seconds is seen several times.
const promScrape = 250 * time.Millisecond

// prom is a Prometheus server the test started.
type prom struct {
	url string
	hc  *http.Client
}

// startPrometheus starts /usr/bin/prometheus on a free loopback port, with
// a temporary storage directory and a config that scrapes target, and
// waits until it is ready. The test's cleanup stops it.
func startPrometheus(t *testing.T, bin, target string) *prom {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: %s
  scrape_timeout: %s
scrape_configs:
  - job_name: outage
    static_configs:
      - targets: [%q]
`, promScrape, promScrape, target)
	cfgFile := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(cfgFile, []byte(cfg), 0o644))
	port := freePort(t)
	cmd := exec.Command(bin, "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:"+strconv.Itoa(port), "--log.level=warn")
	var logs syncWriter
	cmd.Stdout, cmd.Stderr = &logs, &logs
	startProcess(t, cmd)
	p := &prom{url: "http://127.0.0.1:" + strconv.Itoa(port), hc: &http.Client{Timeout: 5 * time.Second}}
	t.Cleanup(p.hc.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, poll(ctx, 100*time.Millisecond, func() error {
		resp, err := p.hc.Get(p.url + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("ready: %s", resp.Status)
		}
		return nil
	}), "prometheus did not start: %s", logs.String())
	return p
}

// sample is one element of an instant vector.
type sample struct {
	labels map[string]string
	value  float64
}

// query evaluates an instant PromQL query now.
func (p *prom) query(q string) ([]sample, error) { return p.queryAt(q, "") }

// queryAt evaluates an instant PromQL query at ts (Unix seconds, as the
// HTTP API takes it; "" for now).
func (p *prom) queryAt(q, ts string) ([]sample, error) {
	v := url.Values{"query": {q}}
	if ts != "" {
		v.Set("time", ts)
	}
	resp, err := p.hc.Get(p.url + "/api/v1/query?" + v.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("%s: %s", q, body.Error)
	}
	if body.Data.ResultType != "vector" {
		return nil, fmt.Errorf("%s: a %s, not a vector", q, body.Data.ResultType)
	}
	var out []sample
	for _, r := range body.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, sample{labels: r.Metric, value: v})
	}
	return out, nil
}

// scalar evaluates a query that returns one sample.
func (p *prom) scalar(q string) (float64, error) {
	ss, err := p.query(q)
	if err != nil {
		return 0, err
	}
	if len(ss) != 1 {
		return 0, fmt.Errorf("%s: %d samples", q, len(ss))
	}
	return ss[0].value, nil
}

// readmeQueries returns the five signals of the demo's README
// (examples/outage/README.md), by their number.
func readmeQueries(t *testing.T) map[int]string {
	t.Helper()
	blocks := readmeBlocks(t)
	require.NotEmpty(t, blocks, "the README's PromQL blocks")
	return blocks[0]
}

// readmeBlocks returns the queries of each PromQL block of the README,
// by their number ("# 3. …"; 0 for a block whose query has none), each
// query's lines joined by a space.
func readmeBlocks(t *testing.T) []map[int]string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	var out []map[int]string
	for _, m := range regexp.MustCompile("(?s)```promql\n(.*?)```").FindAllSubmatch(readme, -1) {
		block := map[int]string{}
		n := 0
		for _, line := range strings.Split(string(m[1]), "\n") {
			if h := regexp.MustCompile(`^# (\d+)\. `).FindStringSubmatch(line); h != nil {
				n, _ = strconv.Atoi(h[1])
				continue
			}
			if strings.HasPrefix(line, "#") {
				n = 0
				continue
			}
			if strings.TrimSpace(line) != "" {
				block[n] = strings.TrimSpace(block[n] + " " + strings.TrimSpace(line))
			}
		}
		out = append(out, block)
	}
	return out
}

// The README's dashboard, proven against a real Prometheus: the outage
// story runs with otelx behind the OpenTelemetry Prometheus exporter,
// Prometheus scrapes it, and every query of the README (and of the Grafana
// dashboard) is evaluated through the HTTP API against what the run did.
func TestDashboardQueriesInPrometheus(t *testing.T) {
	bin, exporter := prometheusAndExporter(t)
	p := startPrometheus(t, bin, exporter.addr())

	cfg := shortConfig()
	cfg.Duration = 2 * time.Second
	cfg.OutageStart, cfg.OutageLen = 300*time.Millisecond, time.Second
	cfg.StormStart, cfg.StormLen = 1500*time.Millisecond, 300*time.Millisecond
	cfg.reader = exporter.reader
	// The counters themselves, read at the end of the run beside
	// Prometheus, are the truth the per-tenant queries are held to.
	cfg.Metrics = true
	// acme is declared and starts at 0; the others appear with their
	// first requests, their first sample above 0.
	cfg.undeclared = []string{"globex", "initech"}
	// Prometheus scrapes once before the first request: every series
	// otelx starts at 0 is seen at 0.
	cfg.beforeTraffic = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(t, poll(ctx, 50*time.Millisecond, func() error {
			v, err := p.scalar(`count(tierguard_breaker_transitions_total)`)
			if err == nil && v == 0 {
				err = fmt.Errorf("no series yet")
			}
			return err
		}), "a first scrape")
	}
	sum, err := run(context.Background(), cfg, nil)
	require.NoError(t, err)
	t.Cleanup(sum.stopMetrics)

	// Wait for a scrape after the run: Prometheus has every request.
	total := float64(len(sum.records) + len(sum.streamRecords))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, poll(ctx, 50*time.Millisecond, func() error {
		v, err := p.scalar(`sum(tierguard_requests_total)`)
		if err == nil && v != total {
			err = fmt.Errorf("%v requests scraped of %v", v, total)
		}
		return err
	}), "the last figures scraped")

	// What the run did, from its own records.
	trips := map[string]float64{}
	for _, tr := range sum.transitions {
		if tr.from == breaker.Closed && tr.to == breaker.Open {
			trips[tr.name]++
		}
	}
	require.Positive(t, trips["pro"], "the outage trips pro's breaker")
	answered, fellBack, bySource := 0.0, 0.0, map[string]float64{}
	for _, r := range sum.records {
		name := sources[r.source]
		bySource[name]++
		if name != "error" {
			answered++
		}
		if name == "legacy" || name == "flash" {
			fellBack++
		}
	}
	for _, r := range sum.streamRecords {
		// A stream that broke or whose text the validator rejected failed
		// for its caller, whatever chunks it showed.
		name := streamSources[r.source]
		if r.end != streamComplete {
			name = "error"
		}
		bySource[name]++
		if name != "error" {
			answered++
		}
		if name == "flash" {
			fellBack++
		}
	}
	require.Positive(t, fellBack)

	queries := readmeQueries(t)
	require.Len(t, queries, 5, "the five signals")
	eval := func(n int) []sample {
		ss, err := p.query(queries[n])
		require.NoError(t, err, "query %d", n)
		return ss
	}

	// 1. Breaker trips per hour: each breaker's, pro's from the outage.
	got := eval(1)
	require.Len(t, got, len(tiers), "every breaker has its series from 0")
	for _, s := range got {
		name := s.labels["tierguard_breaker_name"]
		assert.Equal(t, trips[name], math.Round(s.value), "trips of %s (increase %.3f)", name, s.value)
	}

	// 2. Bulkhead rejection rate: each bulkhead's share of refusals; no
	// value for a bulkhead no request reached (legacy is skipped before).
	got = eval(2)
	byName := map[string]float64{}
	for _, s := range got {
		byName[s.labels["tierguard_bulkhead_name"]] = s.value
	}
	for name, st := range sum.bulkheads {
		seen := float64(st.Accepted + st.Rejected)
		if seen == 0 {
			assert.True(t, math.IsNaN(byName[name]), "%s saw no traffic: %v", name, byName[name])
			continue
		}
		assert.InDelta(t, float64(st.Rejected)/seen, byName[name], 0.01, "rejection rate of %s", name)
	}
	assert.Positive(t, byName["flash"], "flash's bulkhead, smaller than the clients, refused some")

	// 3. Fallback rate: above zero, as many as the run's fallbacks.
	got = eval(3)
	require.Len(t, got, 1)
	assert.Equal(t, "generate_content", got[0].labels["gen_ai_operation_name"])
	assert.Positive(t, got[0].value)
	assert.InDelta(t, fellBack/answered, got[0].value, 0.01)

	// 4. Cache-hit ratio and default answers.
	got = eval(4)
	ratios := map[string]float64{}
	for _, s := range got {
		ratios[s.labels["tierguard_source"]] = s.value
	}
	assert.ElementsMatch(t, []string{"cache", "default"}, keysOf(ratios), "both from 0")
	for _, src := range []string{"cache", "default"} {
		assert.InDelta(t, bySource[src]/total, ratios[src], 0.01, "share of %s answers", src)
	}

	// 5. End-to-end success: every unary request is answered (the default
	// answers what nothing else does); a stream that broke after its first
	// chunk is not.
	got = eval(5)
	require.Len(t, got, 1)
	assert.InDelta(t, answered/total, got[0].value, 1e-3)
	assert.Equal(t, float64(len(sum.records)), float64(sum.answered), "every unary request answered")

	blocks := readmeBlocks(t)
	require.Len(t, blocks, 3, "the five signals, the fallback rate by tenant, the cache's row")
	checkTenants(t, p, sum.metrics, blocks[1][0])
	checkCacheRow(t, p, sum.metrics, blocks[2][0])
	checkGrafana(t, p, queries, blocks[1][0])
}

// counted returns the values of an integer counter that the run's
// ManualReader collected at its end, one per attribute set.
func counted(t *testing.T, r *metricsReport, metric string) map[attribute.Set]float64 {
	t.Helper()
	require.NotNil(t, r, "the run's own reading of its metrics")
	out := map[attribute.Set]float64{}
	for _, row := range r.rows {
		if row.metric == metric {
			v, err := strconv.ParseInt(row.value, 10, 64)
			require.NoError(t, err, row.metric)
			out[row.attrs] = float64(v)
		}
	}
	require.NotEmpty(t, out, metric)
	return out
}

// str returns an attribute's value as a string, "" when absent.
func str(s attribute.Set, k attribute.Key) string {
	if v, ok := s.Value(k); ok {
		return v.String()
	}
	return ""
}

// checkTenants holds the README's fallback rate by tenant to the truth of
// the exported counters, for the declared tenant and for the two first
// seen at run time, whose first samples Prometheus saw above 0.
func checkTenants(t *testing.T, p *prom, report *metricsReport, query string) {
	t.Helper()
	fell, answered := map[string]float64{}, map[string]float64{}
	for set, v := range counted(t, report, "tierguard.requests ({request})") {
		tenant := str(set, otelx.KeyTenant)
		if str(set, "tierguard.source") == "tier" && str(set, "tierguard.degraded") == "true" {
			fell[tenant] += v
		}
		if str(set, "tierguard.source") != "error" {
			answered[tenant] += v
		}
	}
	first, err := p.query(`sum by (tierguard_tenant) (min_over_time(tierguard_requests_total{tierguard_tenant!=""}[1m]))`)
	require.NoError(t, err)
	born := map[string]float64{}
	for _, s := range first {
		born[s.labels["tierguard_tenant"]] = s.value
	}
	assert.Equal(t, 0.0, born["acme"], "the declared tenant's series start at 0")
	for _, tenant := range []string{"globex", "initech"} {
		assert.Positive(t, born[tenant], "%s's series are born above 0: increase alone would lose those counts", tenant)
	}

	got, err := p.query(query)
	require.NoError(t, err, query)
	rates := map[string]float64{}
	for _, s := range got {
		rates[s.labels["tierguard_tenant"]] = s.value
	}
	naive, err := p.query(`sum by (tierguard_tenant) (increase(tierguard_requests_total{tierguard_source="tier",tierguard_degraded="true"}[5m])) / sum by (tierguard_tenant) (increase(tierguard_requests_total{tierguard_source!="error"}[5m]))`)
	require.NoError(t, err)
	alone := map[string]float64{}
	for _, s := range naive {
		alone[s.labels["tierguard_tenant"]] = s.value
	}
	for _, tenant := range tenants {
		require.Positive(t, answered[tenant], tenant)
		truth := fell[tenant] / answered[tenant]
		assert.InDelta(t, truth, rates[tenant], 0.01, "fallback rate of %s", tenant)
		t.Logf("%s: fallback rate %.4f from the counters (%v of %v), %.4f from the README's query, %.4f from increase alone",
			tenant, truth, fell[tenant], answered[tenant], rates[tenant], alone[tenant])
	}
}

// checkCacheRow holds the README's cache row to the exported counters:
// each kind of hit's share of the requests.
func checkCacheRow(t *testing.T, p *prom, report *metricsReport, query string) {
	t.Helper()
	total := 0.0
	for _, v := range counted(t, report, "tierguard.requests ({request})") {
		total += v
	}
	hits := map[string]float64{}
	for set, v := range counted(t, report, "tierguard.cache.hits ({hit})") {
		hits[str(set, "tierguard.cache.hit")] += v
	}
	got, err := p.query(query)
	require.NoError(t, err, query)
	require.Len(t, got, len(hits), "a ratio per kind of hit")
	for _, s := range got {
		kind := s.labels["tierguard_cache_hit"]
		assert.InDelta(t, hits[kind]/total, s.value, 0.01, "share of %s hits", kind)
	}
}

// Tenants' series in a real Prometheus, request by request. A declared
// tenant's first request moves increase() by exactly 1: its series were
// scraped at 0 before it. A tenant first seen at run time is born above
// 0, which increase alone never counts and the README's form counts
// whole: three tenants' fallback rates from the README's query equal the
// counters' own, where increase alone is far off. And once a series is
// older than the window, the README's form leaves out what it counted
// before the window.
func TestTenantSeriesInPrometheus(t *testing.T) {
	bin, exporter := prometheusAndExporter(t)
	manual := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter.reader), sdkmetric.WithReader(manual))
	t.Cleanup(func() { require.NoError(t, mp.Shutdown(context.Background())) })
	var failing atomic.Bool
	pro := fallback.Tier("pro", func(context.Context, string) (string, error) {
		if failing.Load() {
			return "", &classify.HTTPError{Facts: classify.Facts{HTTPStatus: 503, Status: "UNAVAILABLE"}}
		}
		return "pro", nil
	})
	flash := fallback.Tier("flash", func(context.Context, string) (string, error) { return "flash", nil })
	chain, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
		{Tier: pro, Retry: retry.Policy{MaxAttempts: 1}},
		{Tier: flash, Retry: retry.Policy{MaxAttempts: 1}},
	}})
	require.NoError(t, err)
	inst, err := otelx.Instrument(chain, otelx.Options{MeterProvider: mp, TracerProvider: tracenoop.NewTracerProvider(),
		MetricAttributes: []attribute.Key{otelx.KeyTenant}, KnownLabels: []attribute.KeyValue{otelx.KeyTenant.String("acme")}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, inst.Close()) })
	p := startPrometheus(t, bin, exporter.addr())

	const answered = `tierguard_requests_total{tierguard_source="tier"}`
	ask := func(tenant string, n int) {
		t.Helper()
		for range n {
			_, err := chain.Do(fallback.WithRequest(context.Background(), fallback.Request{Tenant: tenant}), "q")
			require.NoError(t, err)
		}
	}
	// scraped waits for a scrape that saw want answers in all, and
	// returns its time: that of the last sample, so that increase has
	// nothing to extrapolate at the end of its range.
	scraped := func(want float64) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(t, poll(ctx, 50*time.Millisecond, func() error {
			v, err := p.scalar(`sum(` + answered + `)`)
			if err == nil && v != want {
				err = fmt.Errorf("%v answers scraped, want %v", v, want)
			}
			return err
		}), "a scrape of %v answers", want)
		ts, err := p.scalar(`max(timestamp(` + answered + `))`)
		require.NoError(t, err)
		return strconv.FormatFloat(ts, 'f', 3, 64)
	}
	byTenant := func(q, ts string) map[string]float64 {
		t.Helper()
		ss, err := p.queryAt(q, ts)
		require.NoError(t, err, q)
		out := map[string]float64{}
		for _, s := range ss {
			if tenant := s.labels["tierguard_tenant"]; tenant != "" {
				out[tenant] = s.value
			}
		}
		return out
	}

	// The first requests.
	scraped(0) // the unlabelled series and acme's, at 0
	ask("acme", 1)
	ask("initech", 1)
	ts := scraped(2)
	plain := byTenant(`sum by (tierguard_tenant) (increase(`+answered+`[1m]))`, ts)
	assert.Equal(t, 1.0, plain["acme"], "the declared tenant's first request moves increase() by exactly 1")
	assert.Zero(t, plain["initech"], "a series born at 1 counts nothing in increase() alone")
	whole := byTenant(`sum by (tierguard_tenant) (increase(`+answered+`[1m]) and tierguard_requests_total offset 1m or `+answered+`)`, ts)
	assert.Equal(t, map[string]float64{"acme": 1, "initech": 1}, whole, "the README's form counts both")

	// Fallback rates: an outage, then health, then a shorter outage.
	// globex is born in the first outage, initech's fallback series too.
	failing.Store(true)
	for _, tenant := range tenants {
		ask(tenant, 4)
	}
	scraped(2 + 12)
	failing.Store(false)
	for _, tenant := range tenants {
		ask(tenant, 10)
	}
	failing.Store(true)
	for _, tenant := range tenants {
		ask(tenant, 2)
	}
	scraped(2 + 12 + 36)
	var rm metricdata.ResourceMetrics
	require.NoError(t, manual.Collect(context.Background(), &rm))
	fell, all := map[string]float64{}, map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "tierguard.requests" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				tenant := str(dp.Attributes, otelx.KeyTenant)
				if str(dp.Attributes, "tierguard.source") == "tier" && str(dp.Attributes, "tierguard.degraded") == "true" {
					fell[tenant] += float64(dp.Value)
				}
				if str(dp.Attributes, "tierguard.source") != "error" {
					all[tenant] += float64(dp.Value)
				}
			}
		}
	}
	blocks := readmeBlocks(t)
	require.GreaterOrEqual(t, len(blocks), 2)
	readme := byTenant(blocks[1][0], "")
	alone := byTenant(`sum by (tierguard_tenant) (increase(tierguard_requests_total{tierguard_source="tier",tierguard_degraded="true"}[5m])) / sum by (tierguard_tenant) (increase(tierguard_requests_total{tierguard_source!="error"}[5m]))`, "")
	for _, tenant := range tenants {
		truth := fell[tenant] / all[tenant]
		t.Logf("%s: fallback rate %.4f from the counters (%v of %v), %.4f from the README's query, %.4f from increase alone",
			tenant, truth, fell[tenant], all[tenant], readme[tenant], alone[tenant])
		assert.InDelta(t, truth, readme[tenant], 0.01, "fallback rate of %s from the README's query", tenant)
	}
	assert.InDelta(t, fell["acme"]/all["acme"], alone["acme"], 0.01, "declared: right even with increase alone")
	assert.Greater(t, math.Abs(fell["globex"]/all["globex"]-alone["globex"]), 0.1, "born above 0: increase alone is far off")

	// A window shorter than the series' lives: what acme counted before
	// it is left out; a tenant born within it counts whole.
	last, err := strconv.ParseFloat(scraped(50), 64)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, poll(ctx, 50*time.Millisecond, func() error {
		now, err := p.scalar(`max(timestamp(` + answered + `))`)
		if err == nil && now < last+3 {
			err = fmt.Errorf("the last scrape is %.3f s after the last answers", now-last)
		}
		return err
	}), "scrapes 3 s past the last answers")
	failing.Store(false)
	ask("acme", 2)
	ask("umbrella", 1)
	ts = scraped(53)
	window := byTenant(`sum by (tierguard_tenant) (increase(`+answered+`[2s]) and tierguard_requests_total offset 2s or `+answered+`)`, ts)
	assert.Equal(t, 1.0, window["umbrella"], "born within the window: counted whole")
	// increase extrapolates to the start of its range by about one scrape
	// interval at most: a little over 2, never the 18 acme answered in
	// all.
	assert.GreaterOrEqual(t, window["acme"], 2.0, "acme's answers within the window")
	assert.Less(t, window["acme"], 3.0, "acme's answers before the window, left out")
	assert.Zero(t, window["initech"], "nothing within the window")
}

// checkGrafana checks the Grafana dashboard against the same Prometheus:
// its five signals are the README's, every query it holds evaluates, and
// every metric it names is one Prometheus scraped (the cost from the
// demo's spend ledger included).
func checkGrafana(t *testing.T, p *prom, readme map[int]string, byTenant string) {
	t.Helper()
	raw, err := os.ReadFile("grafana-dashboard.json")
	require.NoError(t, err)
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	require.NotEmpty(t, dash.Title)
	names, err := p.metricNames()
	require.NoError(t, err)
	// pending names metrics the dashboard uses before anything exports
	// them; none today.
	pending := map[string]bool{}
	metricName := regexp.MustCompile(`\b((?:gen_ai|tierguard)_[a-z0-9_]+)`)
	var exprs []string
	used := map[string]bool{}
	for _, pn := range dash.Panels {
		require.NotEmpty(t, pn.Targets, pn.Title)
		for _, tg := range pn.Targets {
			exprs = append(exprs, tg.Expr)
			_, err := p.query(tg.Expr)
			assert.NoError(t, err, "panel %q", pn.Title)
			for _, m := range metricName.FindAllStringSubmatch(tg.Expr, -1) {
				used[m[1]] = true
			}
		}
	}
	for n := 1; n <= 5; n++ {
		assert.Equal(t, readme[n], strings.Join(strings.Fields(exprs[n-1]), " "), "panel %d is the README's signal %d", n, n)
	}
	found := false
	for _, pn := range dash.Panels {
		if pn.Title == "Fallback rate by tenant" {
			found = true
			assert.Equal(t, byTenant, strings.Join(strings.Fields(pn.Targets[0].Expr), " "), "the README's fallback rate by tenant")
		}
	}
	assert.True(t, found, "a panel of the fallback rate by tenant")
	for name := range used {
		if isLabel(name) {
			continue
		}
		if pending[name] {
			assert.NotContains(t, names, name, "%s is exported now: drop it from pending", name)
			continue
		}
		assert.Contains(t, names, name, "the dashboard's %s is a metric Prometheus scraped", name)
	}
	for _, want := range []string{"gen_ai_client_inference_usage_input_tokens_total", "gen_ai_client_inference_duration_seconds_bucket", "tierguard_cost_total"} {
		assert.True(t, used[want], "the dashboard uses %s", want)
	}
}

// isLabel reports whether a name in a query is a label, not a metric.
func isLabel(name string) bool {
	return slices.Contains([]string{"tierguard_breaker_name", "tierguard_breaker_from", "tierguard_breaker_to", "tierguard_bulkhead_name",
		"tierguard_source", "tierguard_degraded", "tierguard_tier_name", "gen_ai_operation_name", "gen_ai_request_model", "tierguard_tenant"}, name)
}

// metricNames lists the metric names Prometheus holds.
func (p *prom) metricNames() ([]string, error) {
	resp, err := p.hc.Get(p.url + "/api/v1/label/__name__/values")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string   `json:"status"`
		Data   []string `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	return body.Data, nil
}

func keysOf(m map[string]float64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// prometheusAndExporter finds the prometheus binary (or skips as
// requireBinary says) and serves the OpenTelemetry Prometheus exporter on
// a loopback port, closed when the test ends.
func prometheusAndExporter(t *testing.T) (bin string, exporter *promServer) {
	t.Helper()
	bin = requireBinary(t, skipPrometheusEnv, "prometheus", "/usr/bin/prometheus")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	exporter, err = servePrometheus(ln)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, exporter.close()) })
	return bin, exporter
}
