"""The one compiled part of xorlib: the inner loops of the streamed passes (xorlib/_loops.c), optional.

Everything else is in pyproject.toml. Where a C compiler is missing the build skips the extension
(``optional=True``) and xorlib runs the same arithmetic as tensor calls (xorlib/_kernels.py). The library
records the digest of the source it was built from (``XORLIB_SOURCE``), so that xorlib can tell a library
built from an older ``_loops.c`` (a pull without a rebuild) and use the tensor calls instead of calling it.
"""

import hashlib
import sys
from pathlib import Path

from setuptools import Extension, setup

SOURCE = "xorlib/_loops.c"
DIGEST = hashlib.sha256((Path(__file__).resolve().parent / SOURCE).read_bytes()).hexdigest()[:16]

# No multiply-add contraction: the loops keep the tensor calls' roundings (a square, then a sum).
FLAGS = [] if sys.platform == "win32" else ["-ffp-contract=off"]

setup(
    ext_modules=[
        Extension(
            "xorlib._loops",
            [SOURCE],
            define_macros=[("XORLIB_SOURCE", f'"{DIGEST}"')],
            extra_compile_args=FLAGS,
            optional=True,
        )
    ]
)
