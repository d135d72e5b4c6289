"""The book's experiments, one module per experiment.

Each experiment is a function of its parameters that returns plain data
(dicts of lists and arrays), runs vectorised over seeds where it can, shows a
tqdm progress bar for long loops, and caches its result on disk
(:mod:`xorlib.cache`). ``python -m xorlib.experiments --full`` reruns the full
grids; the book and CI run the small grids.
"""
