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

.PHONY: test fmt-check vet race bench bench-lib bench-compare fuzz cover demo lint scenarios soak soak-race

## test: gofmt check, go vet and race tests over every module (what CI runs)
test: fmt-check vet race

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	@set -e; for m in $(MODULES); do echo "go vet $$m"; (cd $$m && $(GO) vet ./...); done

race:
	@set -e; for m in $(MODULES); do echo "go test -race $$m"; (cd $$m && $(GO) test -race -count=1 ./...); done

## bench: the library's own benchmarks, then tierguard side by side with failsafe-go and sony/gobreaker
bench: bench-lib bench-compare

## bench-lib: every module's own benchmarks, $(BENCHCOUNT) runs, with allocations
bench-lib:
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCHCOUNT) ./...
	cd breaker/redisstore && $(GO) test -run '^$$' -bench . -benchmem -count $(BENCHCOUNT) ./...

## bench-compare: internal/testbed/benchcmp, $(BENCHCOUNT) interleaved passes (every contender meets the same noise), benchstat side by side (~10 min)
bench-compare:
	cd internal/testbed/benchcmp && $(GO) test -c -o $(BENCHCMP_OUT).test .
	@: > $(BENCHCMP_OUT); for i in $$(seq $(BENCHCOUNT)); do \
	  echo "benchcmp pass $$i/$(BENCHCOUNT), load $$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"; \
	  (cd internal/testbed/benchcmp && $(BENCHCMP_OUT).test -test.run '^$$' -test.bench . -test.benchmem -test.count 1 -test.timeout 0) >> $(BENCHCMP_OUT) || exit 1; \
	done
	$(GO) run $(BENCHSTAT) -filter '.name:(BreakerSuccess OR BreakerWindow OR BreakerOpen)' -col '/impl@(gobreaker tierguard tierguard-execute gobreaker-twostep failsafe failsafe-permit)' $(BENCHCMP_OUT)
	$(GO) run $(BENCHSTAT) -filter '.name:Bulkhead' -col '/impl@(failsafe-permit tierguard tierguard-run failsafe)' $(BENCHCMP_OUT)
	$(GO) run $(BENCHSTAT) -filter '.name:(ChainSuccess OR ChainFallback)' -col '/impl@(failsafe tierguard failsafe-plainfallback)' $(BENCHCMP_OUT)

## scenarios: DESIGN.md scenarios 1–6 against the in-process fake Gemini server (~2.5 min); SCENARIO_FLAGS='-s 1 -runs 5 -strict'
scenarios:
	$(GO) run ./internal/testbed/scenarios $(SCENARIO_FLAGS)

## soak: the chaos soak at $(SOAKCALLS) calls, fake clock (~20 s) then real clock (~4 min); see RELIABILITY.md
soak:
	$(GO) test ./internal/testbed/chaos -run 'TestSoak$$' -count=1 -v -timeout 60m -soak.calls=$(SOAKCALLS)
	$(GO) test ./internal/testbed/chaos -run 'TestSoak$$' -count=1 -v -timeout 60m -soak.calls=$(SOAKCALLS) -soak.clock=real

## soak-race: the fake-clock soak at $(SOAKCALLS) calls under the race detector (~2.5 min)
soak-race:
	$(GO) test -race ./internal/testbed/chaos -run 'TestSoak$$' -count=1 -v -timeout 60m -soak.calls=$(SOAKCALLS)

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

## lint: staticcheck over every module
lint:
	@set -e; for m in $(MODULES); do echo "staticcheck $$m"; (cd $$m && $(GO) run $(STATICCHECK) ./...); done
