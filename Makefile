# The two commands of the README:
#   make book   build the whole executed book into _build/html (creates .venv first)
#   make test   lint, unit tests, the executed book (warnings are errors), and checks on the built HTML
# Everything runs inside .venv, created here from the pinned requirements.txt.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
JB     := $(BIN)/jupyter-book

.PHONY: env book book-clean test lint format unit book-tests notebooks experiments experiments-small benchmarks benchmarks-small student grade clean

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=23"
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

env: $(STAMP)

book: env
	$(JB) build . --warningiserror --keep-going

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

test: lint unit book book-tests

clean:
	rm -rf _build .cache

notebooks: env
	$(BIN)/python -m pytest -m notebooks

benchmarks: env
	$(BIN)/python -m benchmarks.run_all

benchmarks-small: env
	$(BIN)/python -m benchmarks.run_all --small

# Coursework: student versions of every chapter (solutions stripped, checks kept), and grading.
student: env
	$(BIN)/python -m xorlib.coursework student $(wildcard chapters/*.md) --out student

grade: env
	@test -n "$(NB)" || { echo "usage: make grade NB=student/<chapter>.ipynb"; exit 2; }
	$(BIN)/python -m xorlib.coursework grade $(NB)

# The full experiment grids, into the disk cache (.cache/xorlib); the book runs the small ones.
experiments: env
	$(BIN)/python -m xorlib.experiments --full

experiments-small: env
	$(BIN)/python -m xorlib.experiments
