"""Clickstream pipeline on Spark: click events -> per-minute page counts (topic + Parquet).

Run the whole demo with one command (starts a broker, the generator and the Spark job,
stops and restarts the job, then checks nothing was lost or duplicated)::

    .venv/bin/python -m examples.clickstream

See ``docs/spark.md``.
"""
