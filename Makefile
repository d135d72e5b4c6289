# The two commands of the README:
#   make book   build the whole executed book into _build/html (creates .venv first)
#   make test   lint, unit tests, the executed book (warnings are errors), its PDF, and checks on the built book
# Everything runs inside .venv, created here from the pinned requirements.txt (--no-compile: Python compiles only the
# modules it imports, on first import, instead of pip compiling every file of every package: about 15 s less). The
# package itself builds with the pinned setuptools of the venv (--no-build-isolation: no second environment).
# jsonschema's IRI checker (rfc3987-syntax and its lark), which pip installs for jupyter-events'
# jsonschema[format-nongpl], is removed again: it builds 38 parsers whenever jsonschema is imported (0.8 s in every
# Jupyter Book, JupyterLab, nbformat and grader process, about twenty in make test), and no Jupyter schema uses the
# two formats it checks (jsonschema leaves them unchecked without it). binder/postBuild removes it too.

PYTHON ?= python3
# Python writes each module's bytecode (__pycache__) on first import, also where the environment sets
# PYTHONDONTWRITEBYTECODE (as some containers and CI images do): make test starts about a hundred Python processes
# (the chapters' kernels, JupyterLab, pytest and the programs the tests run), and without the bytecode every one of
# them compiles torch, Sphinx or JupyterLab from source again (about 40 s of make test's CPU time).
unexport PYTHONDONTWRITEBYTECODE
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
JB     := $(BIN)/jupyter-book
# jupyter-book build, reading (so executing) BOOK_JOBS chapters at once (tools/jb_build.py: JB 1 has no -j).
BOOK_JOBS ?= 2
# One torch thread per process where several share the cores: more threads than cores only spin (OpenMP's idle
# threads wait busily). The book's numbers do not depend on it.
ONE_THREAD := OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# Each chapter's kernel on one torch thread (BOOK_JOBS kernels share the cores).
JB_BUILD := $(ONE_THREAD) XORLIB_BOOK_JOBS=$(BOOK_JOBS) $(BIN)/python tools/jb_build.py

.PHONY: env book book-clean pdf test lint format unit book-tests book-browser book-pdf-checks book-lab sweeps notebooks experiments experiments-small benchmarks benchmarks-small student grade grade-all clean lab screenshots

$(STAMP): requirements.txt pyproject.toml setup.py xorlib/_loops.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=23"  # the newest pip installs the requirements faster
	$(BIN)/python -m pip install --quiet --no-compile -r requirements.txt
	$(BIN)/python -m pip uninstall --quiet --yes rfc3987-syntax lark
	$(BIN)/python -m pip install --quiet --no-compile --no-deps --no-build-isolation -e .
	$(BIN)/python binder/lab_setup.py >/dev/null  # the kernel named as the chapters name it, before any build
	touch $(STAMP)

env: $(STAMP)

# LARGE_D=1 (the default of make book) also runs chapter 11's tied step at d = 10^8 (3 to 4 s on one core); make test skips it
# (every build runs the split step at d = 10^8).
LARGE_D ?= 1

# --all: every chapter is read, so executed, again (a change in xorlib changes no chapter file).
book: env
	XORLIB_BOOK_LARGE_D=$(LARGE_D) $(JB_BUILD) . --all --warningiserror --keep-going

# The whole book as one PDF, _build/html/book.pdf (linked from the front page): Jupyter Book's single-page build,
# which replays the executed notebooks of the HTML build (nothing runs again), printed by Debian's Chromium
# (tools/print_pdf.py). Builds the HTML book first if there is none.
pdf: env
	@test -f _build/html/index.html -a -d _build/jupyter_execute || $(MAKE) book
	XORLIB_BOOK_REPLAY=_build/jupyter_execute $(JB) build . --builder custom --custom-builder singlehtml --warningiserror --keep-going
	$(BIN)/python tools/print_pdf.py _build/singlehtml/intro.html _build/html/book.pdf

book-clean: env
	rm -rf _build
	$(MAKE) book

lint: env
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: env
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# The unit tests in TEST_JOBS processes (pytest-xdist), each on one torch thread (with the book building beside
# them, spinning threads cost a third of the time). A long parametrized sweep runs a small version of its grid here
# (marker sweep: the rest); `make sweeps` runs the rest.
TEST_JOBS ?= 2
unit: env
	$(ONE_THREAD) $(BIN)/python -m pytest -n $(TEST_JOBS) -m "not book and not notebooks and not lab and not sweep"

sweeps: env
	$(ONE_THREAD) $(BIN)/python -m pytest -n $(TEST_JOBS) -m sweep

# The checks of the built book, each its own process so that they run side by side: the browser (every page at 1280
# and at 390 px, each page loaded once per width for all of its checks, in one browser; the prose's numbers and words),
# the PDF (its text and its printed pages), and JupyterLab with the downloads run in fresh environments.
# `make screenshots` saves every page at both widths.
# A new file of tests marked book or lab goes into one of these lists (tests/book/test_make_test.py checks it).
BOOK_BROWSER := tests/book/test_browser.py tests/book/test_rendered_text.py
BOOK_PDF := tests/book/test_pdf.py
BOOK_LAB := tests/book/test_lab.py tests/book/test_downloads.py
# They need nothing of tests/conftest.py (torch and its seed, for the unit tests): --confcutdir leaves it out, 2 s
# of imports per job; the lab's kernels get the unit tests' cache folder from here instead.
BOOK_PYTEST := $(BIN)/python -m pytest -q --confcutdir=tests/book
book-browser: env
	$(BOOK_PYTEST) -m book $(BOOK_BROWSER) -k "not screenshots"

book-pdf-checks: env
	$(BOOK_PYTEST) -m book $(BOOK_PDF)

book-lab: env
	XORLIB_CACHE="$${XORLIB_CACHE:-$(CURDIR)/.cache/xorlib-tests}" $(ONE_THREAD) $(BOOK_PYTEST) -m "book or lab" $(BOOK_LAB)

book-tests: env
	$(MAKE) -j2 book-lab book-browser book-pdf-checks

# make test on two cores (make -j2, one shared job server). The longest chain first: the book, then its PDF, then
# the PDF's checks; one slot builds them while the other runs the unit tests; each other check of the built book
# starts as soon as the book is there and a slot is free, the longest first (JupyterLab, then the browser). Each job
# is one process on one torch thread, so two jobs fill the two cores without spinning.
test: lint
	$(MAKE) -j2 test-pdf-checks test-unit test-lab test-browser

.PHONY: test-unit test-book test-pdf test-pdf-checks test-lab test-browser
test-unit: env
	$(MAKE) unit TEST_JOBS=$(TEST_UNIT_JOBS)
test-book: env
	$(MAKE) book LARGE_D=0 BOOK_JOBS=$(TEST_BOOK_JOBS)
test-pdf: test-book
	$(MAKE) pdf
test-pdf-checks: test-pdf
	$(MAKE) book-pdf-checks
test-lab: test-book
	$(MAKE) book-lab
test-browser: test-book
	$(MAKE) book-browser
# Processes per job inside make test (TEST_UNIT_JOBS=0: the unit tests in one pytest process, no workers).
TEST_UNIT_JOBS ?= 0
TEST_BOOK_JOBS ?= 1

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
	XORLIB_STUDENT_EDITION=1 XORLIB_BOOK_LARGE_D=0 $(JB_BUILD) . --path-output _build/student-edition --warningiserror --keep-going

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

# JupyterLab on this checkout, from .venv, as Binder has it (binder/postBuild does the same two things): jupytext's
# notebook view is the default viewer of .md files (binder/overrides.json), so chapters/*.md open as runnable
# notebooks that jupyterlab-myst renders as the book (admonitions, theorems, maths, references, {eval} values);
# the kernel is named as the chapters' front matter names it ("Python 3"), so saving a chapter leaves it unchanged
# (jupytext.toml keeps the evaluated values out of the file). Server options go in LAB_ARGS, e.g.
# make lab LAB_ARGS="--port=8899 --no-browser".
lab: env
	$(BIN)/python binder/lab_setup.py
	$(BIN)/jupyter lab $(LAB_ARGS)

# Screenshots of every page of the built book at 1280 and 390 px, into _build/screenshots/ (run make book first).
screenshots: env
	XORLIB_REQUIRE_BROWSER=1 $(BIN)/python -m pytest tests/book/test_browser.py -m book -k screenshots -q
