// Command scenarios runs the scenarios that measure the library,
// in-process, against internal/testbed/fakegemini over real loopback HTTP with
// keep-alive, through real fallback chains of internal/testbed/gemrest tiers, and
// prints one Markdown table per scenario:
//
//	go run ./internal/testbed/scenarios                 # every scenario, 3 runs each
//	go run ./internal/testbed/scenarios -s 1 -runs 5    # scenario 1 only, 5 runs
//
// The scenarios:
//
//  1. Retired models: three hand-written reference clients
//     (naive retry, classified retry, preflight + classified), the ideal
//     batch, and tierguard's chain with the reference retry parameters and with
//     its defaults, each with and without a model catalog. See retired.go
//     for how jobs map to chains.
//  2. Outage: pro answers 503 for a window, flash is healthy.
//  3. 20% injected 503 on pro.
//  4. A 429 storm on pro with google.rpc.RetryInfo.
//  5. A pro slower than the deadline.
//  6. Pro answers malformed JSON; answers are validated.
//  7. A stalled pro and a flash that needs 40–42% of the budget, with the
//     default settings: the adaptive reserve.
//  8. Spend: three tenants, a 429 storm on the primary, one tenant
//     reaching its daily budget during it (see spend.go).
//  9. A 429 storm against a known quota: no local limit, a limiter at the
//     quota, and one set above it that lowers itself on 429s.
//  10. A slow-tail pro (10% of calls at 5× the median): hedging on flash
//     or a second key, by a fixed delay or a quantile.
//  11. A pool of three keys, one revoked and one rate-limited.
//  12. A 429 storm whose RetryInfo outlasts the request's deadline: the
//     delay is honoured across requests.
//  13. Sporadic 429s with a 20 s Retry-After on both tiers, no outage: the
//     delay stays within the request that got it.
//  14. Scenario 10's slow tail, streamed: the first chunk hedged on the
//     same tier (see streams.go).
//  15. Streams and unary calls on one pool of two keys, one in a 429
//     storm with RetryInfo: the two sides share its cool-down (see
//     streampool.go).
//  16. A provider's capacity drops from 64 to 24 and recovers under 48
//     clients of three priorities: fixed bulkheads against the adaptive
//     one (see adaptive.go).
//
// Every table shows the median over the runs and, where runs differed, the
// range. Comparisons between strategies are paired per seed: each run of
// each strategy uses the same seed in the same process, the ratio is taken
// per seed, and the median of the ratios is judged. Below each table, the targets are marked MET or MISS;
// -strict makes a MISS exit 1. Wall-clock figures depend on the machine:
// the header prints the load average before and after, and every table a
// "max stall" column (the longest a 1 ms timer fired late during a run),
// to judge the noise; the deadline checks discount the stalls that
// overlapped each late request.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

type options struct {
	scenarios []int
	runs      int
	runs1     int
	seed      uint64
	strict    bool

	retired  retiredConfig
	outage   outageConfig
	flaky    flakyConfig
	storm    stormConfig
	storm12  stormConfig
	slow     slowConfig
	invalid  invalidConfig
	stalled  stalledConfig
	spend    spendConfig
	quota    quotaConfig
	tail     tailConfig
	pool     poolConfig
	sporadic sporadicConfig
	streams  streamTailConfig
	sPool    streamPoolConfig
}

func defaultOptions() options {
	return options{
		scenarios: []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, runs: 3, seed: 1,
		retired: defaultRetired(), outage: defaultOutage(), flaky: defaultFlaky(),
		storm: defaultStorm(), storm12: defaultLongStorm(), slow: defaultSlow(), invalid: defaultInvalid(), stalled: defaultStalled(),
		spend: defaultSpend(), quota: defaultQuota(), tail: defaultTail(), pool: defaultPoolScenario(),
		sporadic: defaultSporadic(), streams: defaultStreamTail(), sPool: defaultStreamPool(),
	}
}

func main() {
	o := defaultOptions()
	var only string
	flag.StringVar(&only, "s", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16", "scenarios to run, comma-separated")
	flag.IntVar(&o.runs, "runs", o.runs, "runs of every scenario (medians are reported)")
	flag.IntVar(&o.runs1, "runs1", 0, "runs of scenario 1 if not -runs (it is the longest: about 18 s a run)")
	flag.Uint64Var(&o.seed, "seed", o.seed, "seed of the first run (run k uses seed+k)")
	flag.BoolVar(&o.strict, "strict", false, "exit 1 when a target is missed")
	flag.IntVar(&o.retired.Jobs, "jobs", o.retired.Jobs, "scenario 1: jobs per batch")
	flag.IntVar(&o.retired.Workers, "workers", o.retired.Workers, "scenario 1: workers")
	flag.IntVar(&o.outage.Clients, "clients", o.outage.Clients, "scenarios 2–6: concurrent clients")
	flag.Parse()
	o.scenarios = nil
	for _, f := range strings.Split(only, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 16 {
			fmt.Fprintf(os.Stderr, "scenarios: bad -s %q\n", only)
			os.Exit(2)
		}
		o.scenarios = append(o.scenarios, n)
	}
	if o.runs < 1 || o.runs1 < 0 {
		fmt.Fprintln(os.Stderr, "scenarios: -runs must be at least 1")
		os.Exit(2)
	}
	for _, c := range []*loadConfig{&o.flaky.loadConfig, &o.storm.loadConfig, &o.storm12.loadConfig, &o.slow.loadConfig, &o.invalid.loadConfig, &o.stalled.loadConfig,
		&o.quota.loadConfig, &o.tail.loadConfig, &o.pool.loadConfig, &o.sporadic.loadConfig, &o.streams.loadConfig, &o.sPool.loadConfig} {
		c.Clients = o.outage.Clients
	}
	missed, err := run(os.Stdout, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scenarios:", err)
		os.Exit(1)
	}
	if missed > 0 && o.strict {
		os.Exit(1)
	}
}

// run runs the selected scenarios, prints their tables, and returns how
// many targets were missed.
func run(w io.Writer, o options) (int, error) {
	runs1 := o.runs
	if o.runs1 > 0 {
		runs1 = o.runs1
	}
	fmt.Fprintf(w, "## tierguard scenarios\n\n%s, GOMAXPROCS %d, %d run(s) each (scenario 1: %d), seed %d. Load average before: %s.\n",
		runtime.Version(), runtime.GOMAXPROCS(0), o.runs, runs1, o.seed, loadavg())
	start := time.Now()
	missed := 0
	for _, id := range o.scenarios {
		var res *result
		var err error
		switch id {
		case 1:
			res, err = scenarioRetired(o.retired, runs1, o.seed)
		case 2:
			res = scenarioOutage(o.outage, o.runs, o.seed)
		case 3:
			res = scenarioFlaky(o.flaky, o.runs, o.seed)
		case 4:
			res = scenarioStorm(o.storm, o.runs, o.seed)
		case 5:
			res = scenarioSlow(o.slow, o.runs, o.seed)
		case 6:
			res = scenarioInvalid(o.invalid, o.runs, o.seed)
		case 7:
			res = scenarioStalled(o.stalled, o.runs, o.seed)
		case 8:
			res = scenarioSpend(o.spend, o.runs, o.seed)
		case 9:
			res = scenarioQuota(o.quota, o.runs, o.seed)
		case 10:
			res = scenarioTail(o.tail, o.runs, o.seed)
		case 11:
			res = scenarioPool(o.pool, o.runs, o.seed)
		case 12:
			res = scenarioLongStorm(o.storm12, o.runs, o.seed)
		case 13:
			res = scenarioSporadic(o.sporadic, o.runs, o.seed)
		case 14:
			res = scenarioStreamTail(o.streams, o.runs, o.seed)
		case 15:
			res = scenarioStreamPool(o.sPool, o.runs, o.seed)
		case 16:
			res = scenarioAdaptive(o.runs, o.seed)
		}
		if err != nil {
			return missed, fmt.Errorf("scenario %d: %w", id, err)
		}
		runs := len(res.rows[0].runs)
		res.print(w, runs)
		missed += len(res.failed())
	}
	fmt.Fprintf(w, "\nTotal %v. Load average after: %s. Targets missed: %d.\n", time.Since(start).Round(100*time.Millisecond), loadavg(), missed)
	return missed, nil
}

// loadavg returns the 1, 5 and 15 minute load averages, or "n/a".
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "n/a"
	}
	return strings.Join(f[:3], " ") + " (1/5/15 min, " + strconv.Itoa(runtime.NumCPU()) + " CPUs)"
}
