"""The optional C extensions (everything else is in pyproject.toml).

``samsa._speedups`` holds the producer's per-record hot path (record encoding, the record
future's base); ``samsa.spark._columnar`` holds the Spark connector's per-record work
(decoding fetched record batches into Arrow buffers, encoding Arrow columns into record
batches, murmur2 partitioning). When they cannot be built (no C compiler) the install still
succeeds and samsa uses its numpy and pure-Python equivalents.
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("samsa._speedups", ["src/samsa/_speedups.c"], optional=True),
    Extension("samsa.spark._columnar", ["src/samsa/spark/_columnar.c"],
              extra_compile_args=["-O2"], optional=True),
])
