# ringlab: the two commands a new user needs are `make reproduce` and `make test`.
# Everything else (venv, packages, C build) is set up on first use from plain python3 + gcc.

PYTHON  ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
PROFILE ?= quick
# 1: the set-up installs the system packages the notebooks use where it can (root and apt-get);
# 0: it only says what is missing and how to get it (an environment variable of the same name works too)
RINGLAB_INSTALL ?= 1
export RINGLAB_INSTALL
# pip extras installed into the venv (.ci/run adds 'browser' where Chromium can be installed)
EXTRAS  ?= test
comma   := ,
STAMP   := $(VENV)/.ringlab-installed-$(subst $(comma),-,$(EXTRAS))

.PHONY: all setup venv build test reproduce lab clean

all: build

# The system packages the notebooks use (kernel headers and source, valgrind, perf, python3's venv
# and headers): installed where RINGLAB_INSTALL and the machine allow, else listed with the remedy.
setup:
	$(PYTHON) -m ringlab.lab.machine_setup

# The venv is (re)installed when pyproject.toml changes (after the set-up, which it needs).
$(STAMP): pyproject.toml | setup
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[$(EXTRAS)]'
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	$(BIN)/python -m ringlab.lab.kernel_provisioner
	touch $@
	@echo "ringlab is installed in $(VENV)/. Put $(BIN) on PATH (ringlab, papermill, pytest) with:"
	@echo "    . $(BIN)/activate"

venv: $(STAMP)

build: setup $(STAMP)
	$(BIN)/ringlab build

# The suite runs on every CPU (at most 4 workers, pytest-xdist), one test file per worker at a time:
# a file's module and session fixtures are made once.  TEST_JOBS=0 runs it in one process.
TEST_JOBS ?= auto
test: build
	$(BIN)/python -m pytest -n $(TEST_JOBS) --maxprocesses=4 --dist loadfile --no-loadscope-reorder --durations=25

reproduce: build
	$(BIN)/ringlab reproduce --profile $(PROFILE)

# JupyterLab opens at the repository root (notebooks/ and the executed ones under results/);
# the lab extra is installed once (its own stamp, redone when pyproject.toml changes);
# root needs --allow-root.  Runs started from the lab go to scratch/, never results/.
LAB_STAMP := $(VENV)/.ringlab-lab-installed
LAB_ROOT  := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)

$(LAB_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install -q -e '.[test,lab]'
	touch $@

lab: $(LAB_STAMP)
	$(BIN)/jupyter lab --notebook-dir=. $(LAB_ROOT)

# build/, and this checkout's build folder under /var/cache/ringlab where a checkout others cannot
# reach builds under root (ringlab/paths.py: private_checkout_folder); other checkouts' folders there
# are left alone, and /var/cache/ringlab goes once it is empty
clean:
	rm -rf build
	@cache=$$($(PYTHON) -c 'from ringlab import paths; print(paths.private_checkout_folder())') && \
	  if [ -e "$$cache" ]; then echo "rm -rf $$cache"; rm -rf "$$cache"; fi && \
	  rmdir "$$(dirname "$$cache")" 2>/dev/null || true
