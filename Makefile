# Development targets. `make help` lists them.
GO ?= go
BENCHTIME ?= 1s

.PHONY: help test test-race test-short bench lint fmt build

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

test: ## the whole suite, exactly as CI runs it (vet, gofmt, race tests, short fuzzing)
	bash scripts/test.sh

test-race: ## go test -race over every package, without vet or fuzzing
	$(GO) test -race -count=1 ./...

test-short: ## quick tests without the race detector
	$(GO) test -short -count=1 ./...

bench: ## the benchmark suite (cmd/marlowe-bench, under 10 minutes): rewrites the generated part of docs/benchmarks.md and its plots; BENCHFLAGS=--quick for a short run
	$(GO) build -o bin/marlowe-follower ./cmd/marlowe-follower
	cd cmd/marlowe-bench && $(GO) build -o ../../bin/marlowe-bench .
	bin/marlowe-bench --follower-bin bin/marlowe-follower --out bin/benchmarks.json --markdown docs/benchmarks.md $(BENCHFLAGS)

lint: ## go vet (the service's module and the bench's) and gofmt
	$(GO) vet ./...
	cd cmd/marlowe-bench && $(GO) vet ./...
	@out=$$(find . -name '*.go' -not -path './.git/*' -print0 | xargs -0 gofmt -l); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

fmt: ## format the code
	find . -name '*.go' -not -path './.git/*' -print0 | xargs -0 gofmt -w

build: ## build the binary into ./bin
	$(GO) build -o bin/marlowe-follower ./cmd/marlowe-follower
