"""``uvicorn app.main:app``: the document-search design's entry point, served by FinderLedge.

Settings come from the design's environment variables (``DATABASE_URL``, ``QDRANT_URL``, ``QDRANT_COLLECTION``,
``LOG_LEVEL``, ``OPENAI_API_KEY``) through :meth:`ServerConfig.document_search`; ``INDEX_DIR`` (default
``./data/index``) is where FinderLedge keeps its ledger, keyword index, uploads and (without ``QDRANT_URL``)
Qdrant's local-mode folder.
"""

from __future__ import annotations

import os

from finderledge.server import create_app
from finderledge.server.config import ServerConfig

app = create_app(ServerConfig.document_search(os.environ.get("INDEX_DIR", "./data/index")))
