# ringlab: the two commands a new user needs are `make reproduce` and `make test`.
# Everything else (venv, packages, C build) is set up on first use from plain python3 + gcc.

PYTHON  ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
PROFILE ?= quick
# pip extras installed into the venv (.ci/run adds 'browser' where Chromium can be installed)
EXTRAS  ?= test
comma   := ,
STAMP   := $(VENV)/.ringlab-installed-$(subst $(comma),-,$(EXTRAS))

.PHONY: all venv build test reproduce lab clean

all: build

# The venv is (re)installed when pyproject.toml changes.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[$(EXTRAS)]'
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $@

venv: $(STAMP)

build: $(STAMP)
	$(BIN)/ringlab build

test: build
	$(BIN)/python -m pytest

reproduce: build
	$(BIN)/ringlab reproduce --profile $(PROFILE)

lab: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[test,lab]'
	$(BIN)/jupyter lab --notebook-dir=notebooks

clean:
	rm -rf build
