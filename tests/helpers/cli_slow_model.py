"""``python cli_slow_model.py ARGS``: the real ``finderledge`` command (``finderledge.cli.commands.main``, Python's own
SIGINT handling) with a slow deterministic fake model in place of the default one, so a test can interrupt
a long ingest at a known point in a few seconds.

Environment: ``SLOW_MODEL_SECONDS`` each ``embed_documents`` call sleeps (default 0.3);
``SLOW_MODEL_STARTED`` a file created when the first call starts; ``PROGRESS_INTERVAL`` seconds between two
progress lines (default: the library's).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from langchain_core.embeddings import DeterministicFakeEmbedding

import finderledge.embeddings
from finderledge import progress
from finderledge.cli.commands import main


class SlowFake(DeterministicFakeEmbedding):
    """DeterministicFakeEmbedding (same text, same vector) that takes its time, like a model on a CPU."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        started = os.environ.get("SLOW_MODEL_STARTED")
        if started:
            Path(started).touch()
        time.sleep(float(os.environ.get("SLOW_MODEL_SECONDS", "0.3")))
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
