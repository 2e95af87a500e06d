"""``python cli_slow_model.py ARGS``: the real ``finderledge`` command (``finderledge.cli.commands.main``, Python's own
SIGINT handling) with a slow deterministic fake model in place of the default one, so a test can interrupt
a long ingest at a known point in a few seconds.

Environment: ``SLOW_MODEL_SECONDS`` each ``embed_documents`` call sleeps (default 0.3);
``SLOW_MODEL_STARTED`` a file created when the first call starts; ``SLOW_MODEL_HOLD`` ``N:PATH``: call ``N``
(counted from 1) returns only once ``PATH`` exists (at most 120 s), so a test can stop the command while a
known call is under way however slow the machine; ``PROGRESS_INTERVAL`` seconds between two progress lines
(default: the library's).
"""

from __future__ import annotations

import itertools
import os
import signal
import sys
import time
from pathlib import Path

from langchain_core.embeddings import DeterministicFakeEmbedding

import finderledge.embeddings
from finderledge import progress
from finderledge.cli.commands import main

CALLS = itertools.count(1)  # embed_documents calls so far (next() is atomic under the GIL)


def _hold(call: int) -> None:
    """Wait for the file ``SLOW_MODEL_HOLD`` names if this is the call it names."""
    held, _, path = os.environ.get("SLOW_MODEL_HOLD", "").partition(":")
    if held and int(held) == call:
        deadline = time.monotonic() + 120
        while not Path(path).exists() and time.monotonic() < deadline:
            time.sleep(0.02)


class SlowFake(DeterministicFakeEmbedding):
    """DeterministicFakeEmbedding (same text, same vector) that takes its time, like a model on a CPU."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        started = os.environ.get("SLOW_MODEL_STARTED")
        if started:
            Path(started).touch()
        time.sleep(float(os.environ.get("SLOW_MODEL_SECONDS", "0.3")))
        _hold(next(CALLS))
        return super().embed_documents(texts)


if __name__ == "__main__":
    # Ctrl-C as a terminal gives it: a test run started in the background (``cmd &`` in a script) ignores SIGINT
    # and its children inherit that, so Python would never raise KeyboardInterrupt in the command
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if "PROGRESS_INTERVAL" in os.environ:
        progress.INTERVAL = float(os.environ["PROGRESS_INTERVAL"])
    finderledge.embeddings.EmbeddingModelFactory.create_embeddings = staticmethod(  # type: ignore[method-assign]
        lambda *a, **k: SlowFake(size=16)
    )
    sys.exit(main(sys.argv[1:]))
