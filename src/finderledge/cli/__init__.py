"""The ``finderledge`` command line: ``commands`` (the commands), ``logs`` (where log records go),
``search_options`` (options that reach the search API)."""

from .commands import main

__all__ = ["main"]
