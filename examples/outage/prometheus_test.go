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
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
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
func (p *prom) query(q string) ([]sample, error) {
	resp, err := p.hc.Get(p.url + "/api/v1/query?" + url.Values{"query": {q}}.Encode())
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

// readmeQueries returns the dashboard queries of the demo's README
// (examples/outage/README.md), by their number.
func readmeQueries(t *testing.T) map[int]string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)```promql\n(.*?)```").FindSubmatch(readme)
	require.NotNil(t, m, "the README's PromQL block")
	out := map[int]string{}
	n := 0
	for _, line := range strings.Split(string(m[1]), "\n") {
		if h := regexp.MustCompile(`^# (\d+)\. `).FindStringSubmatch(line); h != nil {
			n, _ = strconv.Atoi(h[1])
			continue
		}
		if strings.TrimSpace(line) != "" {
			out[n] = strings.TrimSpace(out[n] + " " + strings.TrimSpace(line))
		}
	}
	return out
}

// The README's dashboard, proven against a real Prometheus: the outage
// story runs with otelx behind the OpenTelemetry Prometheus exporter,
// Prometheus scrapes it, and every query of the README (and of the Grafana
// dashboard) is evaluated through the HTTP API against what the run did.
func TestDashboardQueriesInPrometheus(t *testing.T) {
	bin := requireBinary(t, skipPrometheusEnv, "prometheus", "/usr/bin/prometheus")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	exporter, err := servePrometheus(ln)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, exporter.close()) })
	p := startPrometheus(t, bin, exporter.addr())

	cfg := shortConfig()
	cfg.Duration = 2 * time.Second
	cfg.OutageStart, cfg.OutageLen = 300*time.Millisecond, time.Second
	cfg.StormStart, cfg.StormLen = 1500*time.Millisecond, 300*time.Millisecond
	cfg.reader = exporter.reader
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

	checkGrafana(t, p, queries)
}

// checkGrafana checks the Grafana dashboard against the same Prometheus:
// its five signals are the README's, every query it holds evaluates, and
// every metric it names is one Prometheus scraped (the cost from the
// demo's spend ledger included).
func checkGrafana(t *testing.T, p *prom, readme map[int]string) {
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
		"tierguard_source", "tierguard_degraded", "tierguard_tier_name", "gen_ai_operation_name", "gen_ai_request_model"}, name)
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
