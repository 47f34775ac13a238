# tierguard — developer targets. Every target covers the root module and each
# nested module (any directory below with its own go.mod).

SHELL := /bin/bash
GO ?= go
MODULES := $(shell find . -name go.mod -not -path './.git/*' -exec dirname {} \; | sort)
FUZZTIME ?= 10s
BENCHCOUNT ?= 6
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: test fmt-check vet race bench fuzz cover demo lint

## test: gofmt check, go vet and race tests over every module (what CI runs)
test: fmt-check vet race

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	@set -e; for m in $(MODULES); do echo "go vet $$m"; (cd $$m && $(GO) vet ./...); done

race:
	@set -e; for m in $(MODULES); do echo "go test -race $$m"; (cd $$m && $(GO) test -race -count=1 ./...); done

## bench: the library's own benchmarks, with allocations, $(BENCHCOUNT) runs
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCHCOUNT) ./...

## fuzz: every fuzz target for $(FUZZTIME)
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
