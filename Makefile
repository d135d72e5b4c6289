# The two commands of the README:
#   make book   build the whole executed book into _build/html (creates .venv first)
#   make test   lint, unit tests, the executed book (warnings are errors), and checks on the built HTML
# Everything runs inside .venv, created here from the pinned requirements.txt.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
JB     := $(BIN)/jupyter-book

.PHONY: env book book-clean test lint format unit book-tests notebooks experiments experiments-small benchmarks benchmarks-small student grade grade-all clean lab screenshots

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=23"
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

env: $(STAMP)

# LARGE_D=1 (the default of make book) also runs chapter 11's step at d = 10^8 (about 45 s); make test skips it.
LARGE_D ?= 1

book: env
	XORLIB_BOOK_LARGE_D=$(LARGE_D) $(JB) build . --warningiserror --keep-going

book-clean: env
	rm -rf _build
	$(MAKE) book

lint: env
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: env
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

unit: env
	$(BIN)/python -m pytest -m "not book and not notebooks"

book-tests: env
	$(BIN)/python -m pytest -m book

# The unit tests and the book build run side by side (two cores); the browser checks need the built book.
test: lint
	$(MAKE) -j2 unit book LARGE_D=0
	$(MAKE) book-tests

clean:
	rm -rf _build .cache

notebooks: env
	$(BIN)/python -m pytest -m notebooks

benchmarks: env
	$(BIN)/python -m benchmarks

benchmarks-small: env
	$(BIN)/python -m benchmarks --small

# Coursework (chapter 9): student notebooks of every chapter with questions, and grading in a sandbox.
#   make student                     student/<chapter>.ipynb (no solutions, rubrics or hidden tests)
#   make grade NB=<notebook>         grade one submission, print the report
#   make grade-all DIR=<folder> [OUT=grades] [MARKS=marks.csv]   a class: gradebook.csv, results.json
student: env
	$(BIN)/python -m xorlib.coursework student $(wildcard chapters/*.md) --out student

grade: env
	@test -n "$(NB)" || { echo "usage: make grade NB=student/<chapter>.ipynb"; exit 2; }
	$(BIN)/python -m xorlib.coursework grade $(NB)

grade-all: env
	@test -n "$(DIR)" || { echo "usage: make grade-all DIR=<folder of submissions> [OUT=grades] [MARKS=marks.csv]"; exit 2; }
	$(BIN)/python -m xorlib.coursework grade-all $(DIR) --out $(or $(OUT),grades) $(if $(MARKS),--marks $(MARKS))

# The full experiment grids, into the disk cache (.cache/xorlib); the book runs the small ones.
experiments: env
	$(BIN)/python -m xorlib.experiments --full

experiments-small: env
	$(BIN)/python -m xorlib.experiments

# JupyterLab on this checkout, from .venv, with jupytext's notebook view as the default viewer of .md files (the
# settings file binder/overrides.json, installed into .venv as Binder's postBuild installs it), so chapters/*.md open
# as runnable notebooks. Server options go in LAB_ARGS, e.g. make lab LAB_ARGS="--port=8899 --no-browser".
lab: env
	$(BIN)/python -c "import pathlib, shutil; from jupyterlab.commands import get_app_dir; \
	d = pathlib.Path(get_app_dir(), 'settings', 'overrides.d'); d.mkdir(parents=True, exist_ok=True); \
	shutil.copy('binder/overrides.json', d / 'xorlib-book.json')"
	$(BIN)/jupyter lab $(LAB_ARGS)

# Screenshots of every page of the built book at 1280 and 390 px, into _build/screenshots/ (run make book first).
screenshots: env
	XORLIB_REQUIRE_BROWSER=1 $(BIN)/python -m pytest tests/test_browser.py -m book -k screenshots -q
