// Package riverjob runs tierguard chains inside River job workers
// (github.com/riverqueue/river), so that queued work — contract
// extraction, batch generation, anything that can be replayed and need not
// hold a web request — gets the chain's deadline, retries, fallbacks and
// class table, and River's durable queue, retries, snoozes, unique jobs and
// dead letters, without the two multiplying each other's retries.
//
// It works on every River driver: SQLite (riversqlite, one file, no
// server: a single machine, a demo) and PostgreSQL (riverpgxv5: a fleet of
// worker processes) run the same code.
//
// # SQLite, the default
//
// Package riverjob/sqlite opens the database: the driver
// (modernc.org/sqlite, pure Go), sql.Open with write-ahead logging and a
// busy timeout, db.SetMaxOpenConns(1) (SQLite has one writer) and River's
// migrations. The client's RescueStuckJobsAfter must exceed the worker's
// timeout; sqlite.RescueAfter gives it:
//
//	db, err := sqlite.Open(ctx, "river.db")
//	w, err := riverjob.NewWorker[ExtractArgs](riverjob.Config[Contract, Invoice]{Chain: chain, Store: results, Ledger: ledger})
//	river.AddWorker(workers, w)
//	client, err := river.NewClient(riversqlite.New(db), &river.Config{
//		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
//		Workers:              workers,
//		JobTimeout:           w.Timeout(nil),
//		RescueStuckJobsAfter: sqlite.RescueAfter(w.Timeout(nil)),
//	})
//
// The package's Example runs it end to end.
//
// # Billing
//
// Each job attempt is a request with the job's tenant and scenario (its
// fallback.Request). With Config.Ledger set, the attempt also runs under a
// spend.Ticket of that ledger (Ledger.Begin: recorded and counted toward
// the tenant's limits, not refused by them), so that a ledger attached to
// the chain bills the job to its tenant; without it, the ledger sees the
// attempt without a ticket and counts it in Ledger.Untracked.
//
// # Jobs
//
// A job's args embed Args: the tenant, the scenario, an idempotency key and
// the chain's input. Your type names the kind:
//
//	type ExtractArgs struct{ riverjob.Args[Contract] }
//
//	func (ExtractArgs) Kind() string { return "extract_contract" }
//
//	w, err := riverjob.NewWorker[ExtractArgs](riverjob.Config[Contract, Invoice]{Chain: chain, Store: store})
//	river.AddWorker(workers, w)
//	client.Insert(ctx, ExtractArgs{riverjob.Args[Contract]{Tenant: t, Scenario: "contract_extraction", Key: docID, Input: c}}, nil)
//
// A job with a key is a River unique job, by kind and key: a second
// submission is skipped while the first is pending, running, waiting for
// a retry or completed. Its result is stored under the key, and only
// after validation: the chain's validators and Config.Validate both
// accepted it. A job that runs again after a crash finds the stored result
// and completes without calling the chain.
//
// The job's timeout (Worker.Timeout) is the chain's total deadline plus the
// time to store the result; the client's RescueStuckJobsAfter must be
// longer, so that River's rescuer hands a dead worker's jobs to another
// only once they cannot still be running.
//
// # One decision per attempt
//
// The chain makes all its attempts — retries and fallbacks — inside one
// job attempt. The worker then reads the outcome once and tells River what
// to do (each Outcome says more):
//
//   - answered and validated: Completed; the result is stored;
//   - a failure that may pass (Transient, RateLimited, DeadlineExhausted,
//     an open breaker, a full bulkhead): Retried — River retries the job at
//     the later of the server's retry-after and River's backoff
//     (Worker.NextRetry), and the attempt counts toward MaxAttempts. A
//     breaker that stays open makes the retries cost no upstream call;
//   - every tier that could answer out of quota (QuotaExhausted, or parked
//     by the chain): Snoozed until the earliest reset
//     (fallback.Chain.ParkedUntil) — at once if a tier's parking ended
//     during the attempt — which spends no attempt; Config.QuotaSnooze
//     when nothing says when the quota resets;
//   - a fail-closed class (InvalidRequest, Auth, Safety), invalid output on
//     every tier, an input no tier can take (a retired model, too long):
//     Discarded at once, with river.JobCancel; a retryable failure on the
//     job's last attempt: Discarded by River.
//
// Each attempt's Report — outcome, why, the deciding verdict, each tier's
// part, upstream calls — is recorded as the job's output (River's job
// metadata), and its error text is the report's: classes, statuses and tier
// names, never an input, an answer or upstream text.
//
// # Dead letters
//
// River's discarded jobs, and the jobs the worker cancelled, are the
// dead-letter queue. DeadLetters lists them with their reports; replay one
// with client.JobRetry once its cause is fixed.
//
// # Concurrency and telemetry
//
// Config.Tenants, a bulkhead.Group, bounds each tenant's jobs in flight in
// the worker process; a job whose tenant is at its limit is snoozed. River
// bounds the queue (QueueConfig.MaxWorkers). An instrumented chain
// (otelx.Instrument) sees each job attempt as a request: the job id is its
// request id (its fallback.Request's ID), the scenario labels it, the job's kind
// and attempt are attributes (river.job.kind, river.job.attempt), and the
// tenant (the attempt's fallback.Request carries it for the cache and the
// chain) appears only with otelx's Options.TenantLabels.
package riverjob
