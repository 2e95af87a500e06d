"""What ``check --repair`` opens a directory with instead of its embedding model: :class:`LedgerVectors`.

Every vector a rebuild needs is in the ledger, so a repair loads no model (a directory built with a custom
embedding can be repaired without it).  Its own module so that opening an index, which imports
:mod:`finderledge.replica.checking`, does not import LangChain's ``Embeddings`` (and its runnables) for it.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from langchain_core.embeddings import Embeddings

from ..errors import ConfigurationError

__all__ = ["LEDGER_FILE", "LedgerVectors", "repair_model"]

LEDGER_FILE = "ledger.sqlite3"


class LedgerVectors(Embeddings):
    """Stands in for the embedding model a directory was built with (``model_id``, as the ledger records it)
    while it is repaired: every vector a rebuild needs is in the ledger, so nothing is embedded."""

    def __init__(self, model_id: str) -> None:
        self.model_id = model_id

    def _refuse(self) -> list[float]:
        raise ConfigurationError(
            f"check --repair rebuilds indexes from the vectors in the ledger and loads no embedding model "
            f"({self.model_id!r}); open the directory with that model to embed text"
        )

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._refuse() for _ in texts[:1]]

    def embed_query(self, text: str) -> list[float]:
        return self._refuse()


def repair_model(directory: str | Path) -> LedgerVectors | None:
    """The stand-in for the model ``directory`` records (with its dimension), or None when it records none
    (or its ledger cannot be read): then nothing in it needs a model, or opening it reports the damage."""
    ledger = Path(directory) / LEDGER_FILE
    try:
        con = sqlite3.connect(f"{ledger.resolve().as_uri()}?mode=ro", uri=True)
    except (sqlite3.Error, OSError):
        return None
    try:
        info = dict(
            con.execute(
                "SELECT key, value FROM info WHERE key IN ('embedding_model_id', 'embedding_dimension')"
            )
        )
    except sqlite3.Error:
        return None
    finally:
        con.close()
    model, dimension = info.get("embedding_model_id"), info.get("embedding_dimension")
    if not isinstance(model, str) or not str(dimension).isdigit():
        return None
    return LedgerVectors(model)
