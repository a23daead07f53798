# Two commands from a fresh clone: `make run` and `make test`. Both create .venv when it is
# missing and install the pinned versions (constraints.txt).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt 2>/dev/null | sha256sum | cut -c1-12)

.PHONY: install system-deps harness-deps axe-deps runner-python run lint test test-quick bench

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing pinned dependencies into $(VENV) ..."
	@$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
	@$(BIN)/python -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[test]' 2>&1 | grep -v '^WARNING: Location' || true
	@$(BIN)/python -c "import lonca.service.daemon, lonca.symbols, playwright, mcp" || (echo "install failed" >&2; exit 1)
	@rm -f $(VENV)/.installed-*; touch $@

# The Celery tests' runners run as nobody (issue 15: a runner sees nothing of the worker's), who
# can not run a Python under /root or read a clone there. Debian's python3 (3.11.2) has no
# tarfile filters, which a runner unpacks its job with; so the runner gets a copy of $(PYTHON)'s
# own interpreter and standard library (not its site-packages) under /var/tmp, with what
# `lonca runner` imports installed into it, named by that Python and constraints.txt (shared by
# clones, built once), and this clone's code copied beside it (not editable), named by its
# sources. Each is built in a temporary folder and then renamed, so a concurrent build or a failed
# one leaves nothing half-made (a rename another build beat is theirs, and ours is removed);
# build/ is removed first, as setuptools would put files left there in the copy. The copy finds
# its libpython by LD_LIBRARY_PATH: the interpreter's own run path is under /root.
# tests/test_queue_celery.py gets the code's folder as LONCA_RUNNER_CODE.
RUNNER_FROM := $(shell $(PYTHON) -c 'import sys; print(sys.base_prefix, "python%d.%d" % sys.version_info[:2])' 2>/dev/null)
RUNNER_PYTHON := /var/tmp/lonca-runner-$(shell { echo $(RUNNER_FROM); $(PYTHON) -VV; cat constraints.txt; } 2>/dev/null | sha256sum | cut -c1-12)
RUNNER_CODE := $(RUNNER_PYTHON)/code-$(shell cat pyproject.toml $$(find lonca queue symbols service console -name '*.py' | sort) 2>/dev/null | sha256sum | cut -c1-12)
RUNNER_DEPS := celery kombu pygit2 cryptography tree-sitter tree-sitter-language-pack

runner-python: system-deps
	@test -x $(RUNNER_PYTHON)/bin/python || { \
	  echo "building the Celery tests' runner Python $(RUNNER_PYTHON) ..."; \
	  set -- $(RUNNER_FROM); tmp=$$(mktemp -d $(RUNNER_PYTHON).XXXXXX) || exit 1; \
	  if mkdir $$tmp/bin $$tmp/lib && cp -a $$1/bin/$$2 $$tmp/bin/ && ln -s $$2 $$tmp/bin/python && \
	     { cp -a $$1/lib/libpython*.so* $$tmp/lib/ 2>/dev/null || true; } && \
	     rsync -a --exclude=/$$2/site-packages --exclude=/$$2/test --exclude='/$$2/config-*' $$1/lib/$$2 $$tmp/lib/ && \
	     mkdir $$tmp/lib/$$2/site-packages && chmod -R a+rX $$tmp && \
	     LD_LIBRARY_PATH=$$tmp/lib $$tmp/bin/python -m ensurepip >$$tmp/pip.log 2>&1 && \
	     LD_LIBRARY_PATH=$$tmp/lib $$tmp/bin/python -m pip install -q --disable-pip-version-check --root-user-action=ignore \
	       -c constraints.txt $(RUNNER_DEPS) >$$tmp/pip.log 2>&1 && rm $$tmp/pip.log && chmod -R a+rX $$tmp && \
	     { mv -T $$tmp $(RUNNER_PYTHON) 2>/dev/null || test -x $(RUNNER_PYTHON)/bin/python; }; \
	  then rm -rf $$tmp; else cat $$tmp/pip.log >&2 2>/dev/null; rm -rf $$tmp; echo "runner Python failed" >&2; exit 1; fi; }
	@test -d $(RUNNER_CODE) || { \
	  rm -rf build; tmp=$$(mktemp -d $(RUNNER_CODE).XXXXXX) || exit 1; \
	  if chmod 755 $$tmp && LD_LIBRARY_PATH=$(RUNNER_PYTHON)/lib \
	     $(RUNNER_PYTHON)/bin/python -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-deps --target $$tmp . && \
	     chmod -R a+rX $$tmp && { mv -T $$tmp $(RUNNER_CODE) 2>/dev/null || test -d $(RUNNER_CODE); }; \
	  then rm -rf $$tmp; else rm -rf $$tmp; echo "runner code install failed" >&2; exit 1; fi; }

# Debian packages the tests drive: chromium (browser tests), universal-ctags (symbols cross-check), git;
# the forges of tests/forge.py: openssh-server and openssh-client (sshd, ssh-agent), lighttpd with
# its TLS module in front of git-http-backend, openssl for their test certificate; gcc and
# libssl-dev to build the software security key tests/test_security_key_cli.py loads into ssh-keygen.
# rsync to copy the Celery tests' runner Python (runner-python).
system-deps:
	@missing=""; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v ctags >/dev/null || missing="$$missing universal-ctags"; \
	command -v git >/dev/null || missing="$$missing git"; \
	test -x /usr/sbin/sshd || missing="$$missing openssh-server"; \
	command -v ssh-agent >/dev/null || missing="$$missing openssh-client"; \
	test -x /usr/sbin/lighttpd || missing="$$missing lighttpd"; \
	test -e /usr/lib/lighttpd/mod_openssl.so || missing="$$missing lighttpd-mod-openssl"; \
	command -v openssl >/dev/null || missing="$$missing openssl"; \
	command -v gcc >/dev/null || missing="$$missing gcc"; \
	command -v rsync >/dev/null || missing="$$missing rsync"; \
	test -e /usr/include/openssl/evp.h || missing="$$missing libssl-dev"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing >/dev/null; \
	  else echo "missing Debian packages:$$missing (install them as root)" >&2; fi; \
	fi

# The agent harness CLIs the tests drive offline (tests/harness/: Claude Code, Codex, Gemini CLI), pinned, into .harness/ (the
# project's folder, ignored by git); node and npm from Debian when missing. Install scripts are
# skipped: the tests run the platform binary Claude Code ships beside its launcher. One npm
# install names every package: npm removes from the folder what a later install does not name.
CLAUDE_CODE_VERSION := 2.1.332
CODEX_VERSION := 0.171.0
GEMINI_CLI_VERSION := 0.61.0
harness-deps:
	@command -v npm >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages: nodejs npm"; \
	    apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q nodejs npm >/dev/null; \
	  else echo "missing Debian packages: nodejs npm (install them as root)" >&2; fi; }
	@pkgs="@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) @openai/codex@$(CODEX_VERSION) @google/gemini-cli@$(GEMINI_CLI_VERSION)"; \
	for pkg in $$pkgs; do \
	  name=$${pkg%@*}; \
	  test "$$(sed -n 's/^  "version": "\(.*\)".*/\1/p' .harness/node_modules/$$name/package.json 2>/dev/null)" = "$${pkg##*@}" || stale=1; \
	done; \
	test -z "$$stale" || { mkdir -p .harness && npm install --prefix .harness --ignore-scripts --no-audit --no-fund \
	  --no-save -q $$pkgs >/dev/null 2>.harness/npm.log || { cat .harness/npm.log >&2; exit 1; }; }

# axe-core, which the console's accessibility test injects into each page (tests/console/test_accessibility.py),
# pinned, into .axe/ (ignored by git; its own folder: an install into .harness/ would remove the harnesses).
AXE_CORE_VERSION := 4.14.1
axe-deps:
	@test "$$(sed -n 's/^  "version": "\(.*\)".*/\1/p' .axe/node_modules/axe-core/package.json 2>/dev/null)" = "$(AXE_CORE_VERSION)" || { \
	  mkdir -p .axe && npm install --prefix .axe --ignore-scripts --no-audit --no-fund --no-save -q axe-core@$(AXE_CORE_VERSION) \
	  >/dev/null 2>.axe/npm.log || { cat .axe/npm.log >&2; exit 1; }; }

run: $(STAMP)
	@echo "starting the worker and the review console: open http://localhost:8765/ (Ctrl-C stops both)"
	@$(BIN)/lonca up

# ruff (rules in pyproject.toml) and mypy (lenient, over the folders listed there) before the tests.
lint: $(STAMP)
	@$(BIN)/ruff check --quiet .
	@$(BIN)/mypy

test: $(STAMP) system-deps harness-deps axe-deps runner-python lint
	@LONCA_RUNNER_CODE=$(RUNNER_CODE) $(BIN)/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)

# the quick subset: tests marked unit (no worker process, no browser; tests/conftest.py marks them)
test-quick: $(STAMP)
	@$(BIN)/python -m pytest -q -p no:cacheprovider -m unit $(PYTEST_ARGS)

bench: $(STAMP) system-deps
	@$(BIN)/python -m bench $(BENCH)

# A longer run of the fuzz tests: 200 000 hostile lines against one worker (tests/test_fuzz_wire.py),
# 10 000 hostile HTTP requests against one console (tests/console/test_console_fuzz.py).
.PHONY: fuzz
fuzz: $(STAMP)
	@LONCA_FUZZ_LINES=$${LONCA_FUZZ_LINES:-200000} LONCA_FUZZ_CONSOLE=$${LONCA_FUZZ_CONSOLE:-10000} $(BIN)/python -m pytest -q \
		-p no:cacheprovider --timeout 3600 tests/test_fuzz_wire.py tests/console/test_console_fuzz.py
