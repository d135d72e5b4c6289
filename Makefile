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

# Coursework (chapter 9). The hidden seed reaches the grader in the environment, never on its command line.
#   make student                                   student/<chapter>.ipynb (no solutions, rubrics or hidden tests)
#   make book-student                              the book without solutions: _build/student-edition/_build/html
#   make grade NB=<notebook> SEED=<private seed>   grade one submission, print the report
#   make grade-all DIR=<folder> SEED=<seed> [OUT=grades] [ROSTER=roster.csv] [MARKS=marks.csv] [CONFIG=grading.toml]
#                  [ONLY=<student id>]             a class: gradebook, feedback pages, Gradescope results, similarity
#   make autograder CHAPTER=02 [SEED=<seed>]       autograder-ch02.zip for Gradescope (a random seed kept in the zip)
# SEED_FILE=<file> instead of SEED keeps the seed off make's command line too (the container tier insists);
# PRACTICE=1 grades with the public seed 0 (formative work only).
.PHONY: book-student autograder
GRADE_OPTS = $(if $(SEED_FILE),--seed-file $(SEED_FILE)) $(if $(PRACTICE),--practice) $(if $(CONFIG),--config $(CONFIG))
grade grade-all autograder: export XORLIB_HIDDEN_SEED := $(SEED)

student: env
	$(BIN)/python -m xorlib.coursework student $(wildcard chapters/*.md) --out student

book-student: env
	XORLIB_STUDENT_EDITION=1 XORLIB_BOOK_LARGE_D=0 $(JB) build . --path-output _build/student-edition --warningiserror --keep-going

grade: env
	@test -n "$(NB)" || { echo "usage: make grade NB=<notebook> SEED=<private seed> (or SEED_FILE=..., PRACTICE=1)"; exit 2; }
	$(BIN)/python -m xorlib.coursework grade $(NB) $(GRADE_OPTS)

grade-all: env
	@test -n "$(DIR)" || { echo "usage: make grade-all DIR=<folder of submissions> SEED=<private seed> [OUT=grades] [ROSTER=...] [MARKS=...] [CONFIG=...] [ONLY=...]"; exit 2; }
	$(BIN)/python -m xorlib.coursework grade-all $(DIR) --out $(or $(OUT),grades) $(if $(ROSTER),--roster $(ROSTER)) \
	  $(if $(MARKS),--marks $(MARKS)) $(if $(ONLY),--only $(ONLY)) $(GRADE_OPTS)

autograder: env
	@test -n "$(CHAPTER)" || { echo "usage: make autograder CHAPTER=02 [SEED=<private seed>]"; exit 2; }
	$(BIN)/python -m xorlib.coursework autograder $(CHAPTER) $(GRADE_OPTS)

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
