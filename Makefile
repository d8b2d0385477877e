# rtrace: build, test, demo, bench, fuzz, lint.
GO       ?= go
VERSION  := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
# urfave_cli_no_docs leaves out urfave/cli's man-page and Markdown
# generators, which rtrace does not use: the Markdown package's init took
# 0.3 ms of every run (GODEBUG=inittrace=1).
TAGS     := urfave_cli_no_docs
FUZZTIME ?= 10s
# How long a new input that widened coverage, or a failing one, is
# minimised: within FUZZTIME for the first, so short runs (.ci/run) fuzz.
FUZZMINTIME ?= 10s
GOFILES  := $(shell find . -name '*.go' -not -path './testdata/*')

.PHONY: build install test demo bench bench-quick bench-go fuzz lint clean stress

build: bin/rtrace

bin/rtrace: $(GOFILES) go.mod go.sum
	$(GO) build -tags $(TAGS) -ldflags "$(LDFLAGS)" -o $@ ./cmd/rtrace

# rtrace on PATH: $(GOBIN), or $(GOPATH)/bin (usually ~/go/bin).
install:
	$(GO) install -tags $(TAGS) -ldflags "$(LDFLAGS)" ./cmd/rtrace

# Tests trace real C programs and check them with the real uftrace; with
# CI=true a missing gcc or uftrace fails instead of skipping. The race
# detector is on: the launcher and the pipeline stages are concurrent.
# The end-to-end tests run a second time with the int3 engine as the
# default (RTRACE_ENGINE=int3; docs/FAST-PATH.md): each engine passes them.
#
# The third pass builds rtrace itself with the race detector
# (RTRACE_BUILD_RACE=1) for the tests of its concurrent parts: the drain,
# the sinks, toggling windows, signals, attach and detach. A race it
# reports fails the pass. (All of e2e so built takes 14 times longer.)
RACE_E2E := TestToggle|TestAttach|TestDetachWhileBlockedInside|TestResourceOrderOneThread|TestResourceForkThreads|TestResourceRing|TestFastRingOverflow|TestPipelineStreamEqualsInProcess|TestSignalHandlerCalls|TestStopContinue|TestInterrupt|TestSIGKILL|TestWriteError|TestRecordMemoryUftrace|TestRecordKilled|TestStatusLine
test: lint
	$(GO) test -race -count=1 -timeout 15m ./...
	RTRACE_ENGINE=int3 $(GO) test -race -count=1 -timeout 15m ./e2e
	RTRACE_BUILD_RACE=1 $(GO) test -race -count=1 -timeout 15m -run '$(RACE_E2E)' ./e2e

# The end-to-end tests that once failed only under load, RUNS times (200)
# on each engine beside CPU hogs and a go test -race run (scripts/stress.sh).
stress:
	./scripts/stress.sh

# Build rtrace and a sample C program, record it, show the trace with uftrace.
demo: build
	@./scripts/demo.sh

# The workloads (rtrace's fixtures; Lua, sqlite3 and bzip2 built from
# Debian's source packages into bench/build) under rtrace and its peers,
# one table each: medians of 5 runs, ratios, call trees and leaks checked
# (bench/README.md). bench-quick: small workloads, a few minutes.
bench:
	$(GO) run ./bench/run

bench-quick:
	RTRACE_BENCH_QUICK=1 $(GO) run ./bench/run

# The Go benchmarks of the stages (post-processing and resolving rates) and
# the int3 engine against the ptrace floor (RTRACE_BENCH_FIB=20: quicker).
bench-go: build
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./...

# Every Fuzz target of every package, each for FUZZTIME (a time, or
# a count of inputs: .ci/run gives 1000x).
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; \
	    $(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINTIME) $$pkg || exit 1; \
	  done; \
	done

lint:
	@out=$$(gofmt -l $(GOFILES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

clean:
	rm -rf bin demo testdata/build
