"""The group console: a web page, a JSON API (v1) and the data behind them.

* :mod:`.server`: the HTTP server (aiohttp): ``/metrics``, ``/console/`` (the page, plain
  files under ``static/`` with uPlot vendored) and ``/api/v1`` (routes in its docstring);
* :mod:`.source`: where data comes from, the options, offset resets and their audit;
  :mod:`.broker_source` reads a samsa broker's coordinator in process,
  :mod:`.remote_source` any Kafka-compatible cluster through the protocol;
* :mod:`.lag`: lag samples, series and Burrow-style verdicts (pure);
* :mod:`.views`: the API's JSON shapes; :mod:`.audit`: the audit log.

The rebalance history itself is the coordinator's (:mod:`samsa.coordinator.history`).
"""
