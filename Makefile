# memoryui — `make run` serves the app, `make test` runs every test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Fills .venv: uv given pip's configuration, or pip when uv cannot be (tools/install.py).
INSTALL := $(BIN)/python tools/install.py
HOST ?= 127.0.0.1
PORT ?= 8000
CLIENT_EXTRAS := claude,openai-agents,mcp,pydantic-ai,langgraph

.PHONY: run test lint bench bench-quick migrate clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.runtime-installed: requirements.txt | $(BIN)/python
	$(INSTALL) -r requirements.txt
	touch $@

$(VENV)/.dev-installed: requirements.txt requirements-dev.txt | $(BIN)/python
	$(INSTALL) -r requirements-dev.txt
	touch $@

# The Python client (clients/python), editable, so its tests run against this checkout's code,
# with its framework extras (their tests run in `make test` too).
$(VENV)/.client-installed: clients/python/pyproject.toml requirements-dev.txt | $(BIN)/python
	$(INSTALL) -e "./clients/python[$(CLIENT_EXTRAS)]"
	touch $@

$(VENV)/.bench-installed: requirements.txt requirements-dev.txt bench/requirements.txt | $(BIN)/python
	$(INSTALL) -r bench/requirements.txt
	touch $@

# What `make test` needs (the three above) in one install: one resolution of the whole set,
# which with pip was about 10 s sooner on a fresh machine than three installs one after another.
$(VENV)/.test-installed: requirements.txt requirements-dev.txt bench/requirements.txt clients/python/pyproject.toml | $(BIN)/python
	$(INSTALL) -r requirements-dev.txt -r bench/requirements.txt \
		-e "./clients/python[$(CLIENT_EXTRAS)]"
	touch $(VENV)/.dev-installed $(VENV)/.bench-installed $(VENV)/.client-installed $@

# Quiet: on a first start the admin password `bootstrap` prints must not scroll away behind
# some 75 lines of "Applying …".
migrate: $(VENV)/.runtime-installed
	$(BIN)/python manage.py migrate --noinput -v 0
	@echo "The database is ready (migrations applied)."

run: migrate
	MEMORYUI_URL=http://$(HOST):$(PORT)/ $(BIN)/python manage.py bootstrap
	@echo "Serving memoryui on http://$(HOST):$(PORT)/ (Ctrl-C stops it)"
	$(BIN)/gunicorn memoryui.wsgi -c memoryui/gunicorn_conf.py --bind $(HOST):$(PORT) --access-logfile - --log-level warning

# The lint comes before the tests: a change that breaks ruff or the import contracts fails them too.
# The suite writes bytecode whatever PYTHONDONTWRITEBYTECODE says: it starts hundreds of Python
# processes (servers, workers, commands), and without .pyc files each compiles the project again
# (0.35 s of CPU each), as pytest rewrites every test module's asserts again (9 s a pass).
test: $(VENV)/.test-installed lint
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest $(PYTEST_ARGS)

# ruff (ruff.toml) and the import contracts (.importlinter: memoryui/ on top of conversations/,
# the core imports no sub-app, no cycle at any depth, only load_demo imports the demo data;
# tests/test_import_contracts.py checks the names import-linter cannot see, bench/ included),
# new commits' messages (tools/check_commits.py: a subject of at most 72 characters, a body),
# and the clients' copy of the message kinds and request limits (tools/client_rules.py --check).
lint: $(VENV)/.dev-installed
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/python tools/check_commits.py
	$(BIN)/python tools/client_rules.py --check
	@# The house rules a machine can check without a database: plug-in points against
	@# docs/ARCHITECTURE.md, private names across apps, dead code, issue numbers in comments,
	@# unit sizes, the core's writes, personal-data declarations.
	@# Without DATABASE_URL: on PostgreSQL the suite leaves database-independent tests to the
	@# SQLite pass, and these need no database at all.
	env -u DATABASE_URL $(BIN)/python -m pytest -q -p no:cacheprovider -m "not django_db" tests/test_architecture.py \
		tests/test_house_rules.py tests/test_dead_code.py tests/test_core_writes.py tests/test_unit_sizes.py \
		tests/test_import_contracts.py tests/test_personal_data.py

bench: $(VENV)/.bench-installed
	$(BIN)/python bench/run.py $(BENCH_ARGS)

bench-quick: $(VENV)/.bench-installed
	$(BIN)/python bench/run.py --quick

clean:
	rm -rf $(VENV)
