# mpiswarm: build, test, generate, run.
#   make run    bring the stack up and run examples/pi.yaml to completion
#   make unit   the fast tier: every test that needs no Docker engine, no kubectl
#               and no built image (it runs with them hidden, so it proves that)
#   make test   everything CI runs: lints, the images, every test (make test-all),
#               and make bench once at tiny sizes (bench-smoke, beside the
#               tests), so it cannot rot
SHELL := /bin/bash
CARGO ?= cargo
MPISWARM = $(CARGO) run -q -p mpiswarm --

# A test target that needs a Docker engine, kubectl or the built images says
# so in its crate's Cargo.toml: `[[test]] name = "..." required-features =
# ["mpiswarm-testkit/engine"]`. Without this flag cargo does not even build
# it; clippy, test-all and e2e pass it.
ENGINE = --features mpiswarm-testkit/engine

.PHONY: all build test lint fmt-check clippy cycles unit test-all e2e crds images run bench bench-smoke help

all: build

help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

build: ## build the mpiswarm binary
	$(CARGO) build -p mpiswarm

test: lint ## lints, the images, every test and the benchmarks' smoke run (needs Docker, kubectl, python3)
	$(call every-test,$$bin,bench/run --smoke --binary $$bin)

lint: fmt-check clippy cycles ## rustfmt and clippy (warnings are errors), no module cycles in any crate

fmt-check:
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --workspace --all-targets $(ENGINE) -- -D warnings

# The checker first proves on planted cycles that it finds them, then runs
# over every member of the workspace.
cycles: ## no module imports one that imports it back, in any crate
	scripts/module-cycles --self-test
	scripts/module-cycles

# make unit runs cargo under scripts/without-engine: DOCKER_HOST names a
# socket that does not exist, KUBECONFIG a file that does not exist, and PATH
# holds no docker and no kubectl. A test that needs one of them therefore
# fails here instead of passing: declare it with the engine feature (above).
unit: ## the fast tier, no Docker, kubectl or images (run with them hidden): unit tests and the integration tests that need none
	scripts/without-engine $(CARGO) test --workspace --no-fail-fast

test-all: ## every test: make unit's and those that need Docker, kubectl and the images (run make images first)
	$(call every-test,,)

# Every test, after one build of them all: the images, when the caller asks
# (make test: with the binary that build made), what the caller puts first
# (make test: bench-smoke, on a 2-node cluster of its own), every test that
# starts no multi-node cluster (scripts/test-targets lists them from cargo
# metadata, so a new test joins by itself) under cargo-nextest, two at a
# time, each in a process of its own, the doc tests, then the e2e binaries
# suite, faults, master_failover and stack, each on its own 3-node cluster, and attacks, on
# a 2-node `up --split`, one after another. Nothing runs beside the e2e suite: with the rest of the tests
# beside it (tried: one .ci/run), one of the load case's 100 jobs failed
# when the node's engine could not start its container ("unable to remount
# dir as readonly ... device or resource busy").
# Nothing is skipped because something before it failed; any failure fails
# the target. Last, scripts/volumes-left fails it if the engine holds a
# volume it did not hold before the first test (one a test left behind).
# Every test command selects --workspace: cargo resolves features over the
# packages it is given, so another selection would build them all again.
# For the same reason make test builds the images and runs bench-smoke with
# the binary of the test build (the cli's tests need it, so `cargo test
# --no-run` links it) instead of `cargo build -p mpiswarm`, whose features
# differ (dev-dependencies unify into hashbrown, chrono's num-traits,
# kube-runtime's ahash...), which would compile the workspace a second time.
# The e2e tests run a copy of that binary (MPISWARM_BIN, see
# e2e/src/binary.rs) instead of each building it: a cargo command links
# target/debug/mpiswarm anew even when nothing changed, and the copy cannot
# be replaced under a running cluster.
CLUSTERS = suite faults master_failover stack attacks
FLAGS = --workspace --no-fail-fast $(ENGINE)
TEST = $(CARGO) test $(FLAGS)
NEXTEST = $(CARGO) nextest run $(FLAGS) --test-threads 2
TARGET_DIR = $(shell $(CARGO) metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
# $(1): the mpiswarm command that builds the images.
define build-images
	$(1) images build && $(1) images build --node && $(1) images build --mpich && $(1) images build --mpiswarm
endef
# $(1): the images are built with the test build's binary ($$bin) when given;
# $(2): a command to run first.
define every-test
	$(TEST) --no-run
	bin=$(TARGET_DIR)/e2e-bin/mpiswarm && install -D $(TARGET_DIR)/debug/mpiswarm $$bin && export MPISWARM_BIN=$$bin && \
	$(if $(1),$(call build-images,$(1)) &&) \
	failed=0 && vols=$$(mktemp) && scripts/volumes-left list $$vols && \
	$(if $(2),{ $(2); } || failed=1;) \
	rest=$$(scripts/test-targets $(CLUSTERS)) && { $(NEXTEST) $$rest || failed=1; } && \
	{ $(TEST) --doc || failed=1; } && \
	{ $(TEST) --test suite || failed=1; } && \
	{ $(TEST) --test faults || failed=1; } && \
	{ $(TEST) --test master_failover || failed=1; } && \
	{ $(TEST) --test stack || failed=1; } && \
	{ $(TEST) --test attacks || failed=1; } && \
	{ scripts/volumes-left check $$vols || failed=1; } && \
	exit $$failed
endef

e2e: images ## only the end-to-end suite on a 3-node swarm (part of test-all; prints its wall time)
	$(CARGO) test -p mpiswarm-e2e $(ENGINE) --test suite

crds: ## regenerate crds/mpijob.yaml (and its copy manifests/10-crd.yaml) and manifests/11-offer-registry-crd.yaml from the Rust types
	$(MPISWARM) crd > crds/mpijob.yaml
	cp crds/mpijob.yaml manifests/10-crd.yaml
	$(MPISWARM) crd --offer-registry > manifests/11-offer-registry-crd.yaml

images: ## build the rank image mpiswarm/openmpi, the node image mpiswarm/node, the stock MPICH image mpiswarm/debian-mpich and mpiswarm/mpiswarm (the binary) (cached: seconds when nothing changed)
	$(call build-images,$(MPISWARM))

run: ## run examples/pi.yaml to completion on the one-machine stack (starts and stops one if none runs)
	scripts/run-example examples/pi.yaml

# The release builds of the benchmarks (and of the mpiswarm binary the
# container benchmarks run) come first, so bench/run's clock measures only
# the benchmarks.
BENCHES = -p mpiswarm-policy -p mpiswarm-offers -p mpiswarm --bench placement --bench allocation_cycle --bench controller

bench: images ## placement on real MPI, control-plane overhead, a burst of 120 jobs, scale (meant to fit 30 min on 2 idle cores): docs/benchmarks.md, docs/bench/
	$(CARGO) bench --no-run $(BENCHES)
	bench/run

bench-smoke: images ## bench/run --smoke: every section once at tiny sizes, 2 nodes, output in a temp dir
	$(CARGO) build -p mpiswarm && bench/run --smoke
