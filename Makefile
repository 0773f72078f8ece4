# wasmhooks: the Makefile is the interface. CI (.ci/run) calls these targets.
GO       ?= go
BUILD    := build
HOOKS    := redact-secrets block-prompt-injection summarize loop-detector cross-boundary-guard secretless-redactor
HOOK_WASM := $(addprefix $(BUILD)/hooks/,$(addsuffix .wasm,$(HOOKS)))
WAT_SRC  := $(wildcard testdata/guests/*.wat)
CLI      := $(BUILD)/wasmhooks
FUZZTIME ?= 10s
FUZZ     ?= .
FUZZPKGS ?= ./...

.PHONY: all demo test check bench bench-packages bench-check fuzz deps hooks cli testdata clean

all: cli hooks

## deps: install what the build needs beyond Go (wabt for WAT fixtures).
deps:
	@command -v wat2wasm >/dev/null 2>&1 || { \
	  echo "installing wabt"; \
	  SUDO=$$(command -v sudo >/dev/null 2>&1 && [ "$$(id -u)" != 0 ] && echo sudo); \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wabt; }

## cli: build the wasmhooks command.
cli: $(CLI)
$(CLI): FORCE
	@mkdir -p $(BUILD)
	$(GO) build -o $(CLI) ./cmd/wasmhooks

## hooks: build the example hooks from source and embed their manifests.
hooks: $(HOOK_WASM)
$(BUILD)/hooks/%.wasm: FORCE $(CLI)
	@mkdir -p $(BUILD)/hooks
	GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -o $@.tmp ./hooks-examples/$*
	$(CLI) manifest embed --manifest hooks-examples/$*/manifest.json --out $@ $@.tmp
	@rm -f $@.tmp

## testdata: reassemble the committed WAT fixtures.
testdata: deps
	@for f in $(WAT_SRC); do wat2wasm $$f -o $${f%.wat}.wasm || exit 1; done

## demo: build the example hooks and run them over sample agent traffic.
demo: hooks
	@./demo/run.sh $(CLI) $(BUILD)/hooks

## test: the whole suite, with the race detector.
test: deps
	$(GO) test -race -count=1 -timeout 20m ./...

## check: formatting, vet, the wasip1 build of abi/sdk/examples, tidy go.mod.
check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	GOOS=wasip1 GOARCH=wasm $(GO) vet ./abi/... ./sdk
	GOOS=wasip1 GOARCH=wasm $(GO) build ./abi/... ./sdk
	@for h in $(HOOKS); do GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o /dev/null ./hooks-examples/$$h || exit 1; done
	@cp go.mod /tmp/wasmhooks-go.mod.bak; cp go.sum /tmp/wasmhooks-go.sum.bak; \
	  $(GO) mod tidy; \
	  if ! cmp -s go.mod /tmp/wasmhooks-go.mod.bak || ! cmp -s go.sum /tmp/wasmhooks-go.sum.bak; then \
	    echo "go mod tidy changed go.mod/go.sum"; cp /tmp/wasmhooks-go.mod.bak go.mod; cp /tmp/wasmhooks-go.sum.bak go.sum; exit 1; fi

## bench: wasmhooks side by side with native Go and Extism, as one table
## with the issue-6 targets (BENCHMARKS.md). The bench module (bench/) has its
## own go.mod, so Extism never becomes a dependency of the library.
bench: deps
	cd bench && $(GO) run ./cmd/benchtable

## bench-packages: the Go benchmarks of the library's own packages.
bench-packages:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## bench-check: build and vet the bench module, run its tests and every
## benchmark once, so that none can rot (CI runs it).
bench-check: deps
	cd bench && $(GO) mod tidy -diff && $(GO) vet ./... && $(GO) test -count=1 ./... && \
	  $(GO) test -run '^$$' -bench . -benchtime=1x ./...

## fuzz: run every fuzz target for FUZZTIME each; FUZZ (a regexp) picks targets,
## FUZZPKGS packages: make fuzz FUZZ=FuzzValidate FUZZPKGS=./runtime FUZZTIME=1m
fuzz: deps
	@for pkg in $$($(GO) list $(FUZZPKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' | grep -E -- '$(FUZZ)'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -timeout 30m $$pkg || exit 1; \
	  done; done

clean:
	rm -rf $(BUILD)

FORCE:
