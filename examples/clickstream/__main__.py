"""``python -m examples.clickstream``: the one-command demo (see ``run.py``)."""

from examples.clickstream.run import main

main()
