"""The one compiled part of xorlib: two inner loops of the streamed passes (xorlib/_loops.c), optional.

Everything else is in pyproject.toml. Where a C compiler is missing the build skips the extension
(``optional=True``) and xorlib runs the same arithmetic as tensor calls (xorlib/_kernels.py).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("xorlib._loops", ["xorlib/_loops.c"], optional=True)])
