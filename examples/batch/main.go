// Command batch runs queued work through tierguard on River: about twenty
// seconds of contract extraction jobs, worked by River workers that call a
// tierguard chain, against an in-process fake Gemini server. No API key, no
// network, no database server:
//
//	go run ./examples/batch                                  # River on SQLite, a file in a temp directory
//	go run ./examples/batch -postgres postgres://localhost/app  # the same on PostgreSQL
//
// # The story
//
// Jobs arrive at -rate per second, spread over -tenants tenants; a tenth
// of them are submitted twice with the same idempotency key. Each job is a
// contract to read an invoice from (a JSON total and currency, checked by
// a validator), through the chain
//
//	pro (gemini-2.5-pro) → flash (gemini-2.5-flash)
//
// with two attempts per tier, a circuit breaker per tier, and one deadline
// per job attempt. The worker (fallback/riverjob) decides each attempt's
// fate from the class table, once: completed and stored, retried by River
// (at the later of the server's retry-after and River's backoff), snoozed
// until a quota resets, or discarded into the dead-letter list.
//
//   - 0s–3s: healthy.
//   - 3s–6s: both models answer 503. A job's first attempt fails on both
//     tiers; the breakers open, and later attempts skip both tiers without
//     a call. River retries the jobs with backoff until the outage ends.
//   - 8s–12s: pro's daily quota is exhausted. The chain parks pro and
//     flash answers (degraded). From 9.5s to 11.5s flash's quota is out
//     too: jobs are snoozed until the parked tiers can serve again, which
//     spends none of their attempts.
//   - always: 2% of the contracts are misread by every model (the amount
//     comes back as a string): invalid output on every tier, discarded,
//     never stored. 1% are longer than either model's input window:
//     discarded too. At the end the misread contracts are read again and
//     their dead letters replayed.
//
// With -steps N the story is paced by the workers instead of the clock:
// each phase lasts until N jobs did what it is about (completed, failed a
// second attempt in the outage, completed on flash, snoozed for quota).
// The tests use it, so that a loaded machine, which fits less work into a
// second, tells the same story.
//
// It prints a progress line every second, then a summary: jobs completed
// (and by which tier), discarded (and why), attempts retried and snoozed,
// upstream calls per job — overall and during the outage, against the
// chain's own limit of 4 calls per request — the upstream calls as the
// workers, the tiers' HTTP client and the server counted them, and the
// dead-letter list. It exits 1 when an invariant breaks: a job neither
// completed nor discarded, a result stored twice or for a discarded job,
// a job attempt making more upstream calls than the chain's limit, the
// outage's jobs making more than that limit each while the breakers were
// closed, a duplicate submission run as a job of its own, or the three
// counts of upstream calls disagreeing: the workers' and the client's
// must be equal, and the server's short of them by no more than the
// requests cut before an answer (the server never reads some of those).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
)

func main() {
	cfg := defaultConfig()
	cfg.register(flag.CommandLine)
	flag.Parse()
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "batch:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var progress io.Writer
	if cfg.Progress {
		progress = os.Stderr
	}
	sum, err := run(ctx, cfg, progress)
	if err != nil {
		fmt.Fprintln(os.Stderr, "batch:", err)
		os.Exit(1)
	}
	sum.print(os.Stdout)
	if len(sum.violations()) > 0 {
		os.Exit(1)
	}
}
