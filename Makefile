# tierguard — developer targets. Every target covers the root module and each
# nested module (any directory below with its own go.mod).

SHELL := /bin/bash
GO ?= go
MODULES := $(shell find . -name go.mod -not -path './.git/*' -exec dirname {} \; | sort)
FUZZTIME ?= 10s
BENCHCOUNT ?= 6
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCHSTAT := golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
BENCHCMP_OUT ?= $(or $(TMPDIR),/tmp)/tierguard-benchcmp.txt
SCENARIO_FLAGS ?= -runs 3
SOAKCALLS ?= 1000000
GOVULNCHECK := golang.org/x/vuln/cmd/govulncheck@v1.9.0
# The vulnerability database, as the module proxy serves it (bump it with
# the date of the newest pseudo-version: go list -m golang.org/x/vulndb@latest).
VULNDB_VERSION ?= v0.0.0-20261105234957-e22db6528018
VULNDB_DIR ?= $(or $(TMPDIR),/tmp)/tierguard-vulndb-$(VULNDB_VERSION)
# The toolchain whose standard library is checked: the newest patch release
# of the Go the modules are developed with (go.work's toolchain line).
VULN_TOOLCHAIN ?= $(shell sed -n 's/^toolchain //p' go.work)

.PHONY: install-check snippets report-png test fmt-check vet race vuln vulndb tidy bench bench-lib bench-compare bench-cache-index fuzz cover demo lint scenarios soak soak-race fleet stress

## test: gofmt check, go vet and race tests over every module (what CI runs)
test: fmt-check vet race

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	@set -e; for m in $(MODULES); do echo "go vet $$m"; (cd $$m && $(GO) vet ./...); done

race:
	@set -e; for m in $(MODULES); do echo "go test -race $$m"; (cd $$m && $(GO) test -race -count=1 ./...); done

## stress: make test with a busy loop on every core and, beside it, a second go test -race -count=1 ./... of the root module; fails if either fails; prints the load average at start, peak and end, and the elapsed time
# Each background job gets a process group of its own (set -m), so that
# the exit trap ends it with all it started, however the target ends.
stress:
	@set -m; pgs=(); samples=$$(mktemp); \
	stop() { for g in "$${pgs[@]}"; do kill -- -$$g 2>/dev/null; done; rm -f "$$samples"; }; \
	trap stop EXIT; trap 'exit 130' INT; trap 'exit 143' TERM; \
	cores=$$(nproc); load() { cut -d' ' -f1-3 /proc/loadavg; }; \
	echo "stress: load at start $$(load); $$cores busy loops"; start=$$(date +%s); \
	for i in $$(seq $$cores); do (while :; do :; done) & pgs+=($$!); done; \
	(while :; do cut -d' ' -f1 /proc/loadavg >> "$$samples"; sleep 5; done) & pgs+=($$!); \
	(set -o pipefail; $(MAKE) --no-print-directory test 2>&1 | sed -u 's/^/[test] /') & tp=$$!; pgs+=($$tp); \
	(set -o pipefail; $(GO) test -race -count=1 ./... 2>&1 | sed -u 's/^/[race] /') & rp=$$!; pgs+=($$rp); \
	set +m; \
	wait $$tp; test_rc=$$?; wait $$rp; race_rc=$$?; \
	pgs=("$${pgs[@]:0:$$((cores + 1))}"); \
	echo "stress: make test exit $$test_rc, go test -race ./... exit $$race_rc; load at end $$(load), peak $$(sort -g "$$samples" | tail -1) (1-min, sampled every 5 s); $$(( $$(date +%s) - start )) s"; \
	[ $$test_rc -eq 0 ] && [ $$race_rc -eq 0 ]

## install-check: go get every released module from a file-based module proxy built from the checkout, in a fresh module outside it, and build a program that calls each (~10 s once the dependencies are compiled)
install-check:
	$(GO) run ./internal/testbed/install

## snippets: type-check and vet every Go snippet of README.md and the module READMEs (also part of test)
snippets:
	cd internal/testbed/snippets && $(GO) test -count=1 .

## bench: the library's own benchmarks, then tierguard side by side with failsafe-go and sony/gobreaker
bench: bench-lib bench-compare

## bench-lib: every module's own benchmarks, $(BENCHCOUNT) runs, with allocations
bench-lib:
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCHCOUNT) ./...
	cd breaker/redisstore && $(GO) test -run '^$$' -bench . -benchmem -count $(BENCHCOUNT) ./...
	cd fallback/spend/redisspend && $(GO) test -run '^$$' -bench . -benchmem -count $(BENCHCOUNT) ./...

## bench-cache-index: the semantic cache's approximate index against exact search at 10,000 and 100,000 entries of 768 dimensions: recall@1, lookup, build time, memory (~10 min)
bench-cache-index:
	$(GO) test ./fallback/cache/hnsw -run '^$$' -bench Search -benchtime 2000x -count 1 -timeout 60m -hnsw.large

## bench-compare: internal/testbed/benchcmp, $(BENCHCOUNT) interleaved passes (every contender meets the same noise), benchstat side by side (~10 min)
bench-compare:
	cd internal/testbed/benchcmp && $(GO) test -c -o $(BENCHCMP_OUT).test .
	@: > $(BENCHCMP_OUT); for i in $$(seq $(BENCHCOUNT)); do \
	  echo "benchcmp pass $$i/$(BENCHCOUNT), load $$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"; \
	  (cd internal/testbed/benchcmp && $(BENCHCMP_OUT).test -test.run '^$$' -test.bench . -test.benchmem -test.count 1 -test.timeout 0 $(BENCHCMP_FLAGS)) >> $(BENCHCMP_OUT) || exit 1; \
	done
	$(GO) run $(BENCHSTAT) -filter '.name:(BreakerSuccess OR BreakerWindow OR BreakerOpen)' -col '/impl@(gobreaker tierguard tierguard-do gobreaker-twostep failsafe failsafe-permit)' $(BENCHCMP_OUT)
	$(GO) run $(BENCHSTAT) -filter '.name:Bulkhead' -col '/impl@(failsafe-permit tierguard tierguard-do failsafe)' $(BENCHCMP_OUT)
	$(GO) run $(BENCHSTAT) -filter '.name:(ChainSuccess OR ChainFallback)' -col '/impl@(failsafe tierguard handrolled failsafe-plainfallback)' $(BENCHCMP_OUT)
	$(GO) run $(BENCHSTAT) -filter '.name:StreamFirstChunk' -col '/impl@(direct tierguard)' $(BENCHCMP_OUT)
	$(GO) run $(BENCHSTAT) -filter '.name:QuickStart' -col '/impl@(floor floor-onedeadline tierguard failsafe)' $(BENCHCMP_OUT)
	$(GO) run $(BENCHSTAT) -filter '.name:Stream' -col '/impl@(direct tierguard failsafe)' $(BENCHCMP_OUT)
	$(GO) run $(BENCHSTAT) -filter '.name:RateLimit' -col '/impl@(xrate tierguard tierguard-take failsafe-permit failsafe)' $(BENCHCMP_OUT)
	$(GO) run $(BENCHSTAT) -filter '.name:RateLimitChain' -col '/impl@(tierguard-unlimited tierguard failsafe)' $(BENCHCMP_OUT)
	$(GO) run $(BENCHSTAT) -filter '.name:CacheExactHit' -col '/impl@(syncmap syncmap-normalized tierguard)' $(BENCHCMP_OUT)
	$(GO) run $(BENCHSTAT) -filter '.name:Ledger' -col '/impl@(handrolled tierguard tierguard-admit)' $(BENCHCMP_OUT)
	$(GO) run $(BENCHSTAT) -filter '.name:Otel' -col '/impl@(otel-floor tierguard tierguard-uninstrumented)' $(BENCHCMP_OUT)
	$(GO) run $(BENCHSTAT) -filter '.name:GroupBreaker' -col '/impl@(gobreaker-syncmap tierguard)' $(BENCHCMP_OUT)
	$(GO) run $(BENCHSTAT) -filter '.name:GroupBulkhead' -col '/impl@(chan-syncmap tierguard)' $(BENCHCMP_OUT)
	$(GO) run $(BENCHSTAT) -filter '.name:GroupRateLimit' -col '/impl@(xrate-syncmap tierguard)' $(BENCHCMP_OUT)

## scenarios: the outage scenarios against the in-process fake Gemini server (~2.5 min); SCENARIO_FLAGS='-s 1 -runs 5 -strict'
scenarios:
	$(GO) run ./internal/testbed/scenarios $(SCENARIO_FLAGS)

## soak: the chaos soak at $(SOAKCALLS) calls, fake clock (~20 s) then real clock (~4 min); see RELIABILITY.md
soak:
	$(GO) test ./internal/testbed/chaos -run 'TestSoak$$' -count=1 -v -timeout 60m -soak.calls=$(SOAKCALLS)
	$(GO) test ./internal/testbed/chaos -run 'TestSoak$$' -count=1 -v -timeout 60m -soak.calls=$(SOAKCALLS) -soak.clock=real

## soak-race: the fake-clock soak at $(SOAKCALLS) calls under the race detector (~2.5 min)
soak-race:
	$(GO) test -race ./internal/testbed/chaos -run 'TestSoak$$' -count=1 -v -timeout 60m -soak.calls=$(SOAKCALLS)

## fleet: 50 pods on one redis-server through a 503 storm, a 429 storm, a Redis restart and a pause, then 20 restart drills; prints the report (~75 s); see RELIABILITY.md
fleet:
	@echo "load before: $$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
	cd internal/testbed/fleet && $(GO) test -run '^TestFleet$$' -count=1 -v -timeout 30m -fleet.full .
	@echo "load after: $$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"

## fuzz: every fuzz target of every module for $(FUZZTIME)
fuzz:
	@set -e; for m in $(MODULES); do \
	  (cd $$m && for f in $$(grep -rl --include='*_test.go' '^func Fuzz' . | sort); do \
	    pkg=./$$(dirname $$f); \
	    for name in $$(grep -o '^func Fuzz[A-Za-z0-9_]*' $$f | sed 's/^func //'); do \
	      echo "fuzz $$m $$pkg $$name"; \
	      $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	    done; done) || exit 1; done

## cover: coverage of the root module
cover:
	$(GO) test -count=1 -coverprofile=coverage.out ./...
	$(GO) tool cover -func=coverage.out | tail -1

## demo: the outage story against the in-process fake Gemini server
demo:
	$(GO) run ./examples/outage

## report-png: run the demo with -report, render the page in headless Chromium and write its screenshot to $(REPORT_PNG) (the README's picture; ~40 s)
REPORT_PNG ?= examples/outage/report.png
REPORT_WINDOW ?= 1200,1760
CHROMIUM ?= $(shell command -v chromium || command -v chromium-browser)
report-png:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(GO) run ./examples/outage -progress=false -report "$$tmp/outage.html" > "$$tmp/demo.txt"; \
	mkdir "$$tmp/profile"; \
	HOME="$$tmp/profile" $(CHROMIUM) --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
	  --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$$tmp/profile" \
	  --hide-scrollbars --window-size=$(REPORT_WINDOW) --screenshot="$$tmp/report.png" "file://$$tmp/outage.html" 2>/dev/null; \
	mv "$$tmp/report.png" $(REPORT_PNG); echo "wrote $(REPORT_PNG)"

## lint: staticcheck over every module
lint:
	@set -e; for m in $(MODULES); do echo "staticcheck $$m"; (cd $$m && $(GO) run $(STATICCHECK) ./...); done

## vuln: govulncheck over every module, offline, against the database the module proxy serves as golang.org/x/vulndb (indexed locally), with the standard library of $(VULN_TOOLCHAIN)
vuln: vulndb
	@set -e; for m in $(MODULES); do echo "govulncheck $$m"; (cd $$m && GOTOOLCHAIN=$(VULN_TOOLCHAIN) $(GO) run $(GOVULNCHECK) -db file://$(VULNDB_DIR) ./...); done

vulndb:
	@if [ ! -f $(VULNDB_DIR)/index/db.json ]; then \
	  src=$$($(GO) mod download -json golang.org/x/vulndb@$(VULNDB_VERSION) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
	  test -d "$$src/data/osv" || { echo "no data/osv in golang.org/x/vulndb@$(VULNDB_VERSION)"; exit 1; }; \
	  echo "indexing $$(ls $$src/data/osv | wc -l) OSV entries of golang.org/x/vulndb@$(VULNDB_VERSION) into $(VULNDB_DIR)"; \
	  rm -rf $(VULNDB_DIR).tmp && GOFLAGS=-mod=mod $(GO) run golang.org/x/vulndb/cmd/indexdb@$(VULNDB_VERSION) -vulns $$src/data/osv -out $(VULNDB_DIR).tmp && mv $(VULNDB_DIR).tmp $(VULNDB_DIR); \
	fi

## tidy: go mod tidy in every module (nested ones see their tierguard requirements in the working tree: .ci/local-replace)
tidy:
	@set -e; for m in $(MODULES); do echo "go mod tidy $$m"; if [ "$$m" = . ]; then GOWORK=off $(GO) mod tidy; else .ci/local-replace $$m $(GO) mod tidy; fi; done
