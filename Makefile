# mpiswarm: build, test, generate, run.
#   make run    bring the stack up and run examples/pi.yaml to completion
#   make unit   the fast tier: every test that needs no Docker engine, no kubectl
#               and no built image (it runs with them hidden, so it proves that)
#   make test   everything CI runs: lints, the images, every test (make test-all),
#               and make bench once at tiny sizes (bench-smoke), so it cannot rot
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

test: lint images test-all bench-smoke ## lints, then every test, then the benchmarks' smoke run (needs Docker, kubectl, python3)

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
	$(CARGO) test --workspace --no-fail-fast $(ENGINE)

e2e: images ## only the end-to-end suite on a 3-node swarm (part of test-all; prints its wall time)
	$(CARGO) test -p mpiswarm-e2e $(ENGINE) --test suite

crds: ## regenerate crds/mpijob.yaml (and its copy manifests/10-crd.yaml) from the Rust types
	$(MPISWARM) crd > crds/mpijob.yaml
	cp crds/mpijob.yaml manifests/10-crd.yaml

images: ## build the rank image mpiswarm/openmpi, the node image mpiswarm/node, the stock MPICH image mpiswarm/debian-mpich and mpiswarm/mpiswarm (the binary) (cached: seconds when nothing changed)
	$(MPISWARM) images build
	$(MPISWARM) images build --node
	$(MPISWARM) images build --mpich
	$(MPISWARM) images build --mpiswarm

run: ## run examples/pi.yaml to completion on the one-machine stack (starts and stops one if none runs)
	scripts/run-example examples/pi.yaml

# The release builds of the benchmarks (and of the mpiswarm binary the
# container benchmarks run) come first, so bench/run's clock measures only
# the benchmarks.
BENCHES = -p mpiswarm-policy -p mpiswarm-offers -p mpiswarm --bench placement --bench allocation_cycle --bench controller

bench: images ## placement on real MPI, control-plane overhead, scale (meant to fit 30 min on 2 idle cores): docs/benchmarks.md, docs/bench/
	$(CARGO) bench --no-run $(BENCHES)
	bench/run

bench-smoke: images ## bench/run --smoke: every section once at tiny sizes, 2 nodes, output in a temp dir
	$(CARGO) build -p mpiswarm
	bench/run --smoke
