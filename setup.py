"""The optional C extension (everything else is in pyproject.toml).

``samsa.spark._columnar`` holds the Spark connector's per-record work (decoding fetched
record batches into Arrow buffers, encoding Arrow columns into record batches, murmur2
partitioning); when it cannot be built (no C compiler) the install still succeeds and the
connector uses its numpy and pure-Python equivalents.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("samsa.spark._columnar", ["src/samsa/spark/_columnar.c"],
                             extra_compile_args=["-O2"], optional=True)])
