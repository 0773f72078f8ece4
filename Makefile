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

.PHONY: all demo test check staticcheck bench bench-packages bench-check fuzz deps hooks cli testdata clean postgres postgres-stop test-postgres test-server-postgres test-sdks test-corpus loadtest loadtest-postgres e2e soak

# The C, Rust and AssemblyScript ports of the example hooks
# (hooks-examples/HOOK/c/hook.c, rust/hook.rs, assemblyscript/hook.ts), built with Debian's toolchains (make
# deps). hooks-examples/corpus_test.go builds them with the same flags: keep
# the two in step.
C_HOOKS    := $(patsubst hooks-examples/%/c/hook.c,%,$(wildcard hooks-examples/*/c/hook.c))
RUST_HOOKS := $(patsubst hooks-examples/%/rust/hook.rs,%,$(wildcard hooks-examples/*/rust/hook.rs))
AS_HOOKS   := $(patsubst hooks-examples/%/assemblyscript/hook.ts,%,$(wildcard hooks-examples/*/assemblyscript/hook.ts))
# npm's AssemblyScript compiler, pinned by sdk/assemblyscript/package-lock.json
# and installed there by make deps (npm ci).
ASC        := sdk/assemblyscript/node_modules/.bin/asc
ASFLAGS    := -O3 --noAssert --runtime incremental --use abort=sdk/assemblyscript/assembly/index/abortHook
CLANG      ?= clang
CFLAGS_WASM := --target=wasm32-wasi -mexec-model=reactor -mbulk-memory -O2 -Wall -Werror -Isdk/c -Wl,--strip-all
# Debian's rustc (/usr/bin) first: its wasm32 standard library comes from
# libstd-rust-dev-wasm32; a rustup rustc on PATH may lack the target.
RUSTC      ?= $(shell test -x /usr/bin/rustc && echo /usr/bin/rustc || echo rustc)
RUST_TARGET := wasm32-unknown-unknown
RUSTFLAGS_WASM := --edition=2021 --target=$(RUST_TARGET) -C opt-level=3 -C panic=abort -C codegen-units=1 -C target-feature=+bulk-memory
# The Debian packages the C and Rust builds need (bookworm names).
SDK_DEBS   := clang lld wasi-libc libclang-rt-dev-wasm32 rustc cargo libstd-rust-dev-wasm32
# Debian's chromium, for the operator console's browser tests
# (server/console_browser_test.go, go test -run Console ./server/).
BROWSER_DEBS := chromium

all: cli hooks

## deps: install what the build needs beyond Go: wabt for WAT fixtures, and
## Debian's clang, lld, wasi-libc, rustc, cargo and its wasm32 standard library for
## the C and Rust hooks (about 20 s on a fresh bookworm machine), Debian's
## chromium for the console's browser tests, and npm's AssemblyScript into
## sdk/assemblyscript (npm ci, about 2 s).
deps:
	@missing=""; \
	command -v wat2wasm >/dev/null 2>&1 || missing="wabt"; \
	for p in $(SDK_DEBS) $(BROWSER_DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	command -v npm >/dev/null 2>&1 || missing="$$missing nodejs npm"; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing"; \
	  SUDO=$$(command -v sudo >/dev/null 2>&1 && [ "$$(id -u)" != 0 ] && echo sudo); \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi
	@test -x $(ASC) || (cd sdk/assemblyscript && npm ci --no-audit --no-fund)

## cli: build the wasmhooks command.
cli: $(CLI)
$(CLI): FORCE
	@mkdir -p $(BUILD)
	$(GO) build -o $(CLI) ./cmd/wasmhooks

## hooks: build the example hooks from source and embed their manifests: the
## Go hooks as build/hooks/HOOK.wasm, their C and Rust ports as
## build/hooks/HOOK-c.wasm and build/hooks/HOOK-rust.wasm.
hooks: $(HOOK_WASM) $(addprefix $(BUILD)/hooks/,$(addsuffix -c.wasm,$(C_HOOKS)) $(addsuffix -rust.wasm,$(RUST_HOOKS)) $(addsuffix -as.wasm,$(AS_HOOKS)))
$(BUILD)/hooks/%-as.wasm: FORCE $(CLI)
	@mkdir -p $(BUILD)/hooks
	$(ASC) hooks-examples/$*/assemblyscript/hook.ts $(ASFLAGS) -o $@.tmp
	$(CLI) manifest embed --manifest hooks-examples/$*/manifest.json --out $@ $@.tmp
	@rm -f $@.tmp
$(BUILD)/hooks/%-c.wasm: FORCE $(CLI)
	@mkdir -p $(BUILD)/hooks
	$(CLANG) $(CFLAGS_WASM) -o $@.tmp hooks-examples/$*/c/hook.c
	$(CLI) manifest embed --manifest hooks-examples/$*/manifest.json --out $@ $@.tmp
	@rm -f $@.tmp
$(BUILD)/hooks/%-rust.wasm: FORCE $(CLI) $(BUILD)/rust/libwasmhooks.rlib
	@mkdir -p $(BUILD)/hooks
	$(RUSTC) $(RUSTFLAGS_WASM) --crate-type=cdylib -C lto -C strip=symbols --extern wasmhooks=$(BUILD)/rust/libwasmhooks.rlib -o $@.tmp hooks-examples/$*/rust/hook.rs
	$(CLI) manifest embed --manifest hooks-examples/$*/manifest.json --out $@ $@.tmp
	@rm -f $@.tmp
$(BUILD)/rust/libwasmhooks.rlib: FORCE
	@mkdir -p $(BUILD)/rust
	$(RUSTC) $(RUSTFLAGS_WASM) --crate-type=rlib --crate-name=wasmhooks -o $@ sdk/rust/src/lib.rs
$(BUILD)/hooks/%.wasm: FORCE $(CLI)
	@mkdir -p $(BUILD)/hooks
	GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -o $@.tmp ./hooks-examples/$*
	$(CLI) manifest embed --manifest hooks-examples/$*/manifest.json --out $@ $@.tmp
	@rm -f $@.tmp

## test-corpus: every built example hook, in every language, over its cases
## in testdata/corpus through `wasmhooks test` (the corpus is in its format).
test-corpus: hooks
	@for h in $(HOOKS); do [ -d testdata/corpus/$$h ] || continue; \
	  for w in $(BUILD)/hooks/$$h.wasm $(BUILD)/hooks/$$h-c.wasm $(BUILD)/hooks/$$h-rust.wasm $(BUILD)/hooks/$$h-as.wasm; do \
	    [ -f $$w ] || continue; $(CLI) test --hook $$w testdata/corpus/$$h || exit 1; done; done

## test-sdks: the C and Rust SDKs' native unit tests (their test doubles), and
## the AssemblyScript ports over the corpus under Node's mock host.
test-sdks: $(addprefix $(BUILD)/hooks/,$(addsuffix -as.wasm,$(AS_HOOKS)))
	@mkdir -p $(BUILD)/sdk-test
	$(CLANG) -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -Isdk/c -o $(BUILD)/sdk-test/c sdk/c/test/sdk_test.c && $(BUILD)/sdk-test/c
	@for h in $(C_HOOKS); do \
	  echo "C hook $$h natively over testdata/corpus/$$h, with ASan and UBSan"; \
	  $(CLANG) -D_GNU_SOURCE -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -Isdk/c \
	    -include hooks-examples/$$h/c/hook.c -o $(BUILD)/sdk-test/corpus-$$h sdk/c/test/corpus_native.c && \
	  ASAN_OPTIONS=detect_leaks=0 $(BUILD)/sdk-test/corpus-$$h testdata/corpus/$$h/*.json || exit 1; done
	$(ASC) sdk/assemblyscript/test/prefilter.ts -O2 --runtime incremental -o $(BUILD)/sdk-test/prefilter.wasm && \
	  node sdk/assemblyscript/test/prefilter.mjs $(BUILD)/sdk-test/prefilter.wasm
	@for h in $(AS_HOOKS); do \
	  node sdk/assemblyscript/test/corpus.mjs $(BUILD)/hooks/$$h-as.wasm testdata/corpus/$$h || exit 1; done
	@if [ -f sdk/rust/src/lib.rs ]; then \
	  $(RUSTC) --edition=2021 --test --crate-name=wasmhooks -o $(BUILD)/sdk-test/rust sdk/rust/src/lib.rs && $(BUILD)/sdk-test/rust -q; fi

## testdata: reassemble the committed WAT fixtures.
testdata: deps
	@for f in $(WAT_SRC); do wat2wasm $$f -o $${f%.wat}.wasm || exit 1; done

## demo: build the example hooks and run them over sample agent traffic.
demo: hooks
	@./demo/run.sh $(CLI) $(BUILD)/hooks

## test: the whole suite, with the race detector.
test: deps
	$(GO) test -race -count=1 -timeout 20m ./...

## postgres: start a throwaway Postgres server (Debian's postgresql package,
## installed if absent) for the store's tests, in PGDIR, and print the line
## that points the tests at it. Stop it with `make postgres-stop`.
PGDIR ?= /tmp/wasmhooks-postgres
postgres:
	@url=$$(.ci/postgres.sh start $(PGDIR) | tail -n1) && \
	  echo "export WASMHOOKS_TEST_POSTGRES='$$url'" && echo "# stop it with: make postgres-stop"

postgres-stop:
	@.ci/postgres.sh stop $(PGDIR)

## test-postgres: start a throwaway server, run the Postgres tests, stop it.
test-postgres:
	@dir=$$(mktemp -d) && trap '.ci/postgres.sh stop '"$$dir" EXIT && \
	  WASMHOOKS_TEST_POSTGRES=$$(.ci/postgres.sh start $$dir | tail -n1) \
	  $(GO) test -race -count=1 -run Postgres ./store/...

## loadtest: the bounded server load test (BENCHMARKS.md, "Server load
## test"): the example chain (the LOADTEST_PORT port of redact-secrets and
## block-prompt-injection, then an observer) through `server` on loopback, one
## client then LOADTEST_CONCURRENCY, LOADTEST_DURATION each; runs per second,
## p50/p99, the chain's own time (Server-Timing) and the HTTP layer's overhead.
## One node on SQLite; loadtest-postgres: two nodes on one throwaway Postgres.
LOADTEST_DURATION    ?= 10s
LOADTEST_PORT        ?= rust
LOADTEST_CONCURRENCY ?= 4
LOADTEST_SUFFIX      := $(if $(filter go,$(LOADTEST_PORT)),,-$(LOADTEST_PORT))
LOADTEST_HOOKS       := $(BUILD)/hooks/redact-secrets$(LOADTEST_SUFFIX).wasm $(BUILD)/hooks/block-prompt-injection$(LOADTEST_SUFFIX).wasm
LOADTEST_ARGS         = -loadtest=$(LOADTEST_DURATION) -loadtest.port=$(LOADTEST_PORT) -loadtest.concurrency=$(LOADTEST_CONCURRENCY) -loadtest.hooks=$(abspath $(BUILD)/hooks)
loadtest: $(LOADTEST_HOOKS)
	$(GO) test -run '^TestLoad$$' -count=1 -v -timeout 10m ./server -args $(LOADTEST_ARGS) -loadtest.nodes=1

loadtest-postgres: $(LOADTEST_HOOKS)
	@dir=$$(mktemp -d) && trap '.ci/postgres.sh stop '"$$dir" EXIT && \
	  WASMHOOKS_TEST_POSTGRES=$$(.ci/postgres.sh start $$dir | tail -n1) \
	  $(GO) test -run '^TestLoad$$' -count=1 -v -timeout 10m ./server -args $(LOADTEST_ARGS) -loadtest.nodes=2
## test-server-postgres: the server's whole test suite on Postgres instead of
## SQLite (WASMHOOKS_TEST_SERVER_DB=postgres), on the server
## WASMHOOKS_TEST_POSTGRES names (`make postgres`).
test-server-postgres:
	WASMHOOKS_TEST_SERVER_DB=postgres $(GO) test -race -count=1 ./server/...

## e2e: the end-to-end tests, for real: `wasmhooks serve` and the server over
## loopback HTTP, SQLite and Postgres (a throwaway cluster unless
## WASMHOOKS_TEST_POSTGRES names one), the operator console in headless
## Chromium (make deps installs it), the CLI verbs. CI=true makes a missing
## browser or database fail the run instead of skipping.
E2E_TESTS := EndToEnd|Console|Nodes|ServePostgres|CLIEndToEnd|ApprovalEvents
e2e: deps hooks
	@run() { CI=true $(GO) test -race -count=1 -timeout 15m -run '$(E2E_TESTS)' ./server/... ./cmd/wasmhooks/; }; \
	if [ -n "$$WASMHOOKS_TEST_POSTGRES" ]; then run; else \
	  dir=$$(mktemp -d) && trap '.ci/postgres.sh stop '"$$dir" EXIT && \
	  WASMHOOKS_TEST_POSTGRES=$$(.ci/postgres.sh start $$dir | tail -n1) && export WASMHOOKS_TEST_POSTGRES && run; fi

## soak: the reload soak tests for SOAK each (BENCHMARKS.md, "Reload
## soak"), without the race detector, whose shadow memory would count as a
## leak: chain's TestReloadSoak and the server's TestServeReloadSoak on
## SQLite and Postgres (a throwaway cluster unless WASMHOOKS_TEST_POSTGRES
## names one), side by side. Each batch of reloads must leave the heap, RSS,
## goroutines, descriptors and the runtime's modules, pools and instances
## where the first left them. `make test` runs them for 6 batches.
SOAK ?= 1h
soak:
	@run() { WASMHOOKS_SOAK=$(SOAK) $(GO) test -count=1 -v -timeout 0 -run 'ReloadSoak' ./chain/ ./server/; }; \
	if [ -n "$$WASMHOOKS_TEST_POSTGRES" ]; then run; else \
	  dir=$$(mktemp -d) && trap '.ci/postgres.sh stop '"$$dir" EXIT && \
	  WASMHOOKS_TEST_POSTGRES=$$(.ci/postgres.sh start $$dir | tail -n1) && export WASMHOOKS_TEST_POSTGRES && run; fi

## staticcheck: the pinned staticcheck, installed once into $(BUILD)/tools.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(BUILD)/tools/staticcheck-$(STATICCHECK_VERSION)
$(STATICCHECK):
	@mkdir -p $(BUILD)/tools/bin
	GOBIN=$(abspath $(BUILD)/tools/bin) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(BUILD)/tools/bin/staticcheck $@

staticcheck: $(STATICCHECK)
	$(STATICCHECK) ./...

## check: formatting, vet, staticcheck, the wasip1 build of abi/sdk/examples,
## tidy go.mod.
check: $(STATICCHECK)
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...
	GOOS=wasip1 GOARCH=wasm $(GO) vet ./abi/... ./sdk
	GOOS=wasip1 GOARCH=wasm $(GO) build ./abi/... ./sdk
	@for h in $(HOOKS); do GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o /dev/null ./hooks-examples/$$h || exit 1; done
	@cp go.mod /tmp/wasmhooks-go.mod.bak; cp go.sum /tmp/wasmhooks-go.sum.bak; \
	  $(GO) mod tidy; \
	  if ! cmp -s go.mod /tmp/wasmhooks-go.mod.bak || ! cmp -s go.sum /tmp/wasmhooks-go.sum.bak; then \
	    echo "go mod tidy changed go.mod/go.sum"; cp /tmp/wasmhooks-go.mod.bak go.mod; cp /tmp/wasmhooks-go.sum.bak go.sum; exit 1; fi

## bench: wasmhooks side by side with native Go and Extism, as one table
## with their targets (BENCHMARKS.md). The bench module (bench/) has its
## own go.mod, so Extism never becomes a dependency of the library.
bench: deps
	cd bench && $(GO) run ./cmd/benchtable

## bench-packages: the Go benchmarks of the library's own packages.
bench-packages:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## bench-check: build and vet the bench module, run its tests and every
## benchmark once, so that none can rot (CI runs it).
bench-check: deps $(STATICCHECK)
	cd bench && $(GO) mod tidy -diff && $(GO) vet ./... && $(abspath $(STATICCHECK)) ./... && $(GO) test -count=1 ./... && \
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
