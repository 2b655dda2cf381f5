"""The optional C extension (everything else is in pyproject.toml).

``samsa._speedups`` holds the producer's per-record hot path (record encoding, the record
future's base); when it cannot be built (no C compiler) the install still succeeds and
samsa uses the pure-Python equivalents.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("samsa._speedups", ["src/samsa/_speedups.c"],
                             optional=True)])
