"""The one compiled part of xorlib: the inner loops of the streamed passes (xorlib/_loops.c), optional.

Everything else is in pyproject.toml. Where a C compiler is missing the build skips the extension
(``optional=True``) and xorlib runs the same arithmetic as tensor calls (xorlib/_kernels.py). The library
records the digest of the source it was built from (``XORLIB_SOURCE``), so that xorlib can tell a library
built from an older ``_loops.c`` (a pull without a rebuild) and use the tensor calls instead of calling it.
"""

import hashlib
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SOURCE = "xorlib/_loops.c"
DIGEST = hashlib.sha256((Path(__file__).resolve().parent / SOURCE).read_bytes()).hexdigest()[:16]


class BuildWithoutContraction(build_ext):
    """GCC-like compilers (gcc, clang, MinGW) build without multiply-add contraction: a product stays rounded before
    any addition, as the tensor calls round it (a safeguard: the loops store their squares before adding them)."""

    def build_extensions(self) -> None:
        if self.compiler.compiler_type in ("unix", "mingw32", "cygwin"):
            for extension in self.extensions:
                extension.extra_compile_args = [*extension.extra_compile_args, "-ffp-contract=off"]
        super().build_extensions()


setup(
    ext_modules=[Extension("xorlib._loops", [SOURCE], define_macros=[("XORLIB_SOURCE", f'"{DIGEST}"')], optional=True)],
    cmdclass={"build_ext": BuildWithoutContraction},
)
