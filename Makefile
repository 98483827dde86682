# iolearn: the README's commands. Each target installs what it needs and is idempotent.
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
PIP   := $(VENV)/bin/pip
PYDEPS := maturin numpy pytest hypothesis ruff tqdm pyarrow matplotlib

.PHONY: setup demo test bench lint fuzz clean

## setup: Rust build, Python virtualenv with the native package installed (editable)
setup: $(VENV)/.deps
	cargo build --release --bin iolearn
	$(VENV)/bin/maturin develop --release --quiet

$(VENV)/.deps: pyproject.toml scripts/bootstrap.sh Makefile
	bash scripts/bootstrap.sh $(VENV) $(PYDEPS)
	touch $@

## demo: the main job on the embedded default
demo: setup
	$(PY) -m iolearn.demo

## test: every test (Rust, Python, CLI, a short fuzz run where nightly Rust exists)
test: setup
	bash scripts/test.sh

## bench: ML runtime micro benchmarks, simulator speed, per-decision cost of the admission policies (numbers go to docs/benchmarks.md)
bench: setup
	cargo bench -p iolearn-ml --bench inference
	cargo bench -p iolearn-sim --bench speed
	cargo bench -p iolearn-flash --bench speed
	cargo bench -p iolearn-tail --bench admission

## lint: rustfmt, clippy with warnings as errors, ruff
lint: $(VENV)/.deps
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(VENV)/bin/ruff check python tests
	$(VENV)/bin/ruff format --check python tests

## fuzz: run the fuzzers for FUZZ_SECONDS each (default 60)
fuzz:
	FUZZ_SECONDS=$${FUZZ_SECONDS:-60} bash scripts/fuzz.sh

clean:
	cargo clean
	rm -rf $(VENV) results
