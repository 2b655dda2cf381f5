"""The REPL walk-through in ``samsa.coordinator``'s docstring runs as written."""

import doctest

import samsa.coordinator


def test_package_docstring_examples_run() -> None:
    failed, tried = doctest.testmod(samsa.coordinator, optionflags=doctest.ELLIPSIS)
    assert tried > 10
    assert failed == 0
