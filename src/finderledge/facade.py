"""``FinderLedge``: the one-line facade that ingests documents and searches them in hybrid, vector or keyword mode.

The write path lives in :mod:`finderledge.ingest`, the rules by which indexes follow the ledger (and other
processes) in :mod:`finderledge.replica`; this class wires them together and annotates results.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document

from .asking import Asking
from .calibration import Calibration, LedgerCalibrator
from .catalog import Catalog
from .checking import CheckReport, check_directory
from .checking import repair as run_repair
from .config import Settings, redact_url
from .context import NO_CONTEXT
from .embedding_names import BUNDLED_MODELS, PROVIDERS, model_name_id, parse_model_name
from .errors import ConfigurationError, IncompatibleIndexError
from .finder import Finder
from .ingest import IngestReport, Writer
from .keyword_store import KeywordStore
from .ledgers import open_ledger
from .locking import WriteLock
from .paths import replica_directory
from .replica import LocalRecords, Replica
from .reranker import Reranker, create_reranker
from .results import SearchResults
from .searching import Searcher
from .storage import Storage
from .validation import (
    check_flag,
    check_mapping,
    check_parallel,
    check_patterns,
    check_texts,
    document_key,
)
from .vector_stores import VectorStore, adapt_vector_store, create_vector_store, require_backend
from .views import Views

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from .document_splitter import DocumentSplitter
    from .strategies import QueryStrategy

__all__ = ["NO_CONTEXT", "FinderLedge", "IngestReport", "Source"]

logger = logging.getLogger(__name__)

OLD_STORE_FOLDERS = ("chroma", "faiss")  # built-in stores whose index is a folder named after them

Source = str | os.PathLike | Document | Sequence[str | os.PathLike | Document]

# settings fixed when a persist directory is created, reused when it is reopened
RECORDED_SETTINGS = (
    "vector_store",
    "embedding_model",
    "chunk_size",
    "chunk_overlap",
    "chunk_unit",
    "chroma_url",
    "chroma_collection",
    "qdrant_url",
    "qdrant_collection",
    "partition_key",
)
LEDGER_FILE = "ledger.sqlite3"
REMOTE_PROVIDERS = ("openai", "ollama")  # their clients are made at open (a missing key fails there)
LEGACY_VECTOR_STORE = "chroma"  # the default before FAISS: a directory that recorded no store was built on it


class FinderLedge(Catalog, Views, Asking):
    """Hybrid retrieval over your documents, with one chunk id across the ledger, the vector and the keyword store.

    >>> ledger = FinderLedge("./index")              # doctest: +SKIP
    >>> ledger.add_document("docs/")                  # doctest: +SKIP
    >>> ledger.search("how do I reset my password?")  # doctest: +SKIP

    Every argument is optional; unset ones come from ``FINDERLEDGE_*`` environment variables, then a
    ``.env`` file, then (for a reopened directory) the settings it was built with, then the defaults.
    """

    def __init__(
        self,
        persist_directory: str | os.PathLike[str] | None = None,
        *,
        vector_store: str | Any = None,
        database_url: str | None = None,
        database_schema: str | None = None,
        chroma_url: str | None = None,
        chroma_collection: str | None = None,
        qdrant_url: str | None = None,
        qdrant_collection: str | None = None,
        embedding: str | Embeddings | None = None,
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        chunk_unit: str | None = None,
        search_mode: str | None = None,
        k: int | None = None,
        candidate_k: int | None = None,
        fusion: str | None = None,
        rrf_k: int | None = None,
        vector_weight: float | None = None,
        keyword_weight: float | None = None,
        bm25_k1: float | None = None,
        bm25_b: float | None = None,
        embedding_batch_size: int | None = None,
        vector_scripts: str | None = None,
        min_vector_share: float | None = None,
        show_progress: bool | None = None,
        lock_timeout: float | None = None,
        partition_key: str | None = None,
        keyword_tokenizer: Any = None,
        reranker: Any = None,
        rerank_candidates: int = 20,
        reranker_on_error: str = "warn",
        env_file: str | os.PathLike[str] | None = ".env",
    ) -> None:
        instance = (
            None
            if vector_store is None or isinstance(vector_store, str)
            else adapt_vector_store(vector_store)
        )
        args: dict[str, Any] = {
            "persist_directory": None if persist_directory is None else os.fspath(persist_directory),
            "vector_store": vector_store if instance is None else None,
            "database_url": database_url,
            "database_schema": database_schema,
            "chroma_url": chroma_url,
            "chroma_collection": chroma_collection,
            "qdrant_url": qdrant_url,
            "qdrant_collection": qdrant_collection,
            "embedding_model": embedding if isinstance(embedding, str) or embedding is None else None,
            "chunk_size": chunk_size,
            "chunk_overlap": chunk_overlap,
            "chunk_unit": chunk_unit,
            "search_mode": search_mode,
            "k": k,
            "candidate_k": candidate_k,
            "fusion": fusion,
            "rrf_k": rrf_k,
            "vector_weight": vector_weight,
            "keyword_weight": keyword_weight,
            "bm25_k1": bm25_k1,
            "bm25_b": bm25_b,
            "embedding_batch_size": embedding_batch_size,
            "vector_scripts": vector_scripts,
            "min_vector_share": min_vector_share,
            "show_progress": show_progress,
            "lock_timeout": lock_timeout,
            "partition_key": partition_key,
        }
        if embedding is not None and not isinstance(embedding, str) and not _is_embeddings(embedding):
            raise ConfigurationError(
                f"setting 'embedding': expected a model name or a LangChain Embeddings, got {type(embedding).__name__}"
            )
        # where does the data live? (needed before the rest: a reopened directory supplies defaults)
        pre = Settings.resolve(
            {k: args[k] for k in ("persist_directory", "database_url", "database_schema")}, env_file=env_file
        )
        directory = Path(pre.persist_directory) if pre.persist_directory else None
        if directory is not None:
            if directory.exists() and not directory.is_dir():
                raise ConfigurationError(
                    f"setting 'persist_directory': {directory} exists and is not a directory"
                )
            directory.mkdir(parents=True, exist_ok=True)
            Storage(directory).check_fixed_names()  # no link in it is ever followed: refused first
        if pre.database_url is not None and instance is None and args["vector_store"] is None:
            args["vector_store"] = "pgvector"  # Postgres mode: the vectors live in the ledger's database
        self._ledger = open_ledger(pre, directory / LEDGER_FILE if directory else None)
        try:
            recorded = json.loads(self._ledger.get_info("settings") or "{}")
            if recorded and "vector_store" not in recorded:
                recorded["vector_store"] = LEGACY_VECTOR_STORE  # recorded before the default changed
            # the recorded model is never a default: opening must not load a model or call a service the
            # caller did not name (a crafted directory could name any path or API); it is checked below
            self.settings = _pin_recorded(
                Settings.resolve(
                    args,
                    env_file=env_file,
                    defaults={k: v for k, v in recorded.items() if k != "embedding_model"},
                ),
                recorded,
                args,
                directory,
            )
            self.persist_directory = directory
            shared = pre.database_url is not None  # the ledger is a database many machines share
            # this machine's indexes: the persist directory, or (Postgres mode) a folder in the user's cache
            local = directory if directory is not None or not shared else replica_directory(self._ledger.name)
            if local is not None and local != directory:
                Storage(local).check_fixed_names()
            self._write_lock = (
                self._ledger.write_lock(self.settings.lock_timeout)  # type: ignore[attr-defined]
                if shared
                else WriteLock(directory, self.settings.lock_timeout)
            )
            self._closed = False

            model: Embeddings | str | None = (
                embedding if embedding is not None and not isinstance(embedding, str) else None
            )
            model = model or self.settings.embedding_model
            recorded_model = self._ledger.get_info("embedding_model_id")
            if model is None and recorded_model in BUNDLED_MODELS:
                model = (
                    recorded_model  # no model named: a directory keeps the bundled model it was built with
                )
            self._model_id = _model_id(model)
            if recorded_model is not None and recorded_model != self._model_id:
                raise IncompatibleIndexError(_model_mismatch(directory, recorded_model, self._model_id))
            # the model and the splitter are made when first used: listing or counting needs neither
            self._model = model
            self._embeddings: Embeddings | None = None
            self._splitter: DocumentSplitter | None = None
            if isinstance(model, str) and parse_model_name(model)[0] in REMOTE_PROVIDERS:
                self.embeddings  # noqa: B018 - a service's client checks its key now: a bad one fails the open
            open_vector, vector_key = _vector_backend(self, instance, local)
            self._replica = Replica(
                self._ledger,
                self._write_lock,
                lambda: KeywordStore(
                    local / "bm25" if local else None,
                    tokenizer=keyword_tokenizer,
                    k1=self.settings.bm25_k1,
                    b=self.settings.bm25_b,
                    partition_key=self.settings.partition_key,
                ),
                open_vector,
                vector_key,
                persistent=local is not None,
                directory=local,
                records=LocalRecords(local, self._ledger.index_uuid) if shared and local else None,  # type: ignore[attr-defined]
                checkpoint_lock=WriteLock(local, self.settings.lock_timeout) if shared else None,
                progress=(
                    sys.stderr.isatty()
                    if self.settings.show_progress is None
                    else self.settings.show_progress
                ),
            )
            self._writer = Writer(self)
            self._searcher = Searcher(self)
            self._calibrator = LedgerCalibrator(self)
            fixed = {
                leg: w
                for leg, w in (
                    ("vector", self.settings.vector_weight),
                    ("keyword", self.settings.keyword_weight),
                )
                if w is not None
            }
            self.finder = Finder(
                lambda: _VectorLeg(self),
                _KeywordLeg(self._replica),
                lambda: self.embeddings,
                model_id=self._model_id,
                fusion=self.settings.fusion,
                rank_constant=self.settings.rrf_k,
                weights=fixed or None,  # the Finder gives a leg left unset 1.0; none set: adaptive
                calibration=self._calibrator.current,
                candidate_k=self.settings.candidate_k,
                vector_scripts=self.settings.vector_scripts,
                min_vector_share=self.settings.min_vector_share,
                partition_key=self.settings.partition_key,
            )
            if recorded:
                changed = {
                    k: (recorded[k], getattr(self.settings, k))
                    for k in ("chunk_size", "chunk_overlap", "chunk_unit")
                    if k in recorded and recorded[k] != getattr(self.settings, k)
                }
                if changed:
                    logger.warning(
                        "chunking settings differ from the ones %s was built with (%s): only new "
                        "documents use the new ones",
                        directory,
                        changed,
                    )
            if (
                not isinstance(rerank_candidates, int)
                or isinstance(rerank_candidates, bool)
                or rerank_candidates < 1
            ):
                raise ConfigurationError(
                    f"setting 'rerank_candidates': expected a positive integer, got {rerank_candidates!r}"
                )
            self.rerank_candidates = rerank_candidates
            self.reranker: Reranker | None = create_reranker(reranker, on_error=reranker_on_error)
            self._record_settings(recorded)
            self._replica.follow()  # replays what the checkpoints lack (and checkpoints a rebuilt index)
        except BaseException:  # a refused open must not leave the ledger (and its locks) open
            closers = [getattr(self, "_replica", None), getattr(self, "finder", None), self._ledger]
            for part in closers:
                if part is not None:
                    try:
                        part.close()
                    except Exception:  # the original error is the one to raise
                        logger.debug("closing after a failed open", exc_info=True)
            raise

    # -- set-up -------------------------------------------------------------------------------------
    @property
    def embeddings(self) -> Embeddings:
        """The embedding model, created on first use (listing or counting loads none)."""
        if self._embeddings is None:
            from .embeddings import EmbeddingModelFactory  # imported here: it loads LangChain's runnables

            self._embeddings = EmbeddingModelFactory.create_embeddings(
                self._model, batch_size=self.settings.embedding_batch_size
            )
        return self._embeddings

    @embeddings.setter
    def embeddings(self, value: Embeddings) -> None:
        self._embeddings = value

    @property
    def splitter(self) -> DocumentSplitter:
        """The document splitter, created on first use (a search splits nothing)."""
        if self._splitter is None:
            from .document_splitter import DocumentSplitter  # imported here: it loads the text splitters

            settings = self.settings
            self._splitter = DocumentSplitter(
                settings.chunk_size, settings.chunk_overlap, settings.chunk_unit
            )
        return self._splitter

    @splitter.setter
    def splitter(self, value: DocumentSplitter) -> None:
        self._splitter = value

    def _record_settings(self, recorded: Mapping[str, Any]) -> None:
        """Record the settings of a new directory, or a vector store an argument switched to; opening a
        directory otherwise never writes to it."""
        values = self.settings.to_dict()  # URLs without passwords
        wanted = {k: values[k] for k in RECORDED_SETTINGS}
        if not recorded:
            self._ledger.set_info("settings", json.dumps(wanted))
        elif recorded.get("vector_store") != wanted["vector_store"]:
            logger.warning(
                "%s: switching the vector store from %r to %r (rebuilt from the ledger's vectors)",
                self.persist_directory,
                recorded.get("vector_store"),
                wanted["vector_store"],
            )
            self._ledger.set_info(
                "settings", json.dumps({**recorded, "vector_store": wanted["vector_store"]})
            )
            self._replace_vector_store(str(recorded.get("vector_store")))
        elif recorded.get("partition_key") != wanted["partition_key"]:
            # statistics per partition are computed at search time: switching needs no rebuild
            logger.info(
                "%s: partition_key %r recorded (was %r)",
                self.persist_directory,
                wanted["partition_key"],
                recorded.get("partition_key"),
            )
            self._ledger.set_info(
                "settings", json.dumps({**recorded, "partition_key": wanted["partition_key"]})
            )
        if self._ledger.get_info("embedding_model_id") is None:
            self._ledger.set_info("embedding_model_id", self._model_id)

    def _replace_vector_store(self, old: str) -> None:
        """After a switch: build the new vector index and checkpoint it now (so the next open does not
        "restore" it from the ledger), then remove the old store's folder in the persist directory, which
        nothing reads any more."""
        if self.persist_directory is None:
            return
        with self._write_lock.hold("switching the vector store"):
            self.vector_store  # noqa: B018 - open (build) the new index from the ledger's vectors
            self._replica.checkpoint(force=True)
        folder = Path(self.persist_directory) / old
        if old in OLD_STORE_FOLDERS and old != self.settings.vector_store and folder.is_dir():
            shutil.rmtree(folder)
            logger.info("%s: removed the old %s index folder %s", self.persist_directory, old, folder)

    def _dimension(self) -> int:
        """The embedding dimension, recorded in the ledger (probing the model once for a new directory)."""
        dim = self._ledger.get_info("embedding_dimension")
        if dim is None:
            dim = str(len(self.embeddings.embed_query("dimension probe")))
            self._ledger.set_info("embedding_dimension", dim)
        return int(dim)

    @property
    def vector_store(self) -> VectorStore:
        """The vector backend's base index, opened on first use (FAISS needs the embedding dimension first).

        Changes made since its last checkpoint may still sit in the replica's overlay; searches see both."""
        if not self._replica.vector_loaded:
            self._replica.load_vector()
        return self._replica.vector.handle  # type: ignore[no-any-return]

    @property
    def keyword_store(self) -> KeywordStore:
        """The BM25 index of this process (it follows the ledger's change log)."""
        return self._replica.keyword.handle  # type: ignore[no-any-return]

    def refresh(self) -> int:
        """Apply every change other processes committed; returns the ledger ``seq`` now reflected.

        Searches do this themselves; call it to catch up ahead of time."""
        return self._replica.follow()

    # -- ingest -------------------------------------------------------------------------------------
    def add_document(
        self,
        source: Source,
        metadata: Mapping[str, Any] | None = None,
        *,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        on_error: str = "skip",
        prune: bool = False,
        follow_symlinks: bool = False,
        document_id: str | None = None,
    ) -> list[str]:
        """Add a file, a directory (recursive), a LangChain ``Document`` or a list of those (raw text:
        :meth:`add_texts`; a string is always a path, and one that does not exist raises
        :class:`~finderledge.errors.SourceNotFoundError`).

        Returns the ids of the parent documents the input is stored as (already-stored identical
        content included, stored once).  A file whose content changed replaces its older version.
        ``metadata`` is added to every document (any key but ``_finderledge``, which holds FinderLedge's own
        fields).  A ``Document`` with an ``id`` is stored under that id: the same id with other content or
        metadata replaces the stored version.
        ``prune=True`` also removes documents of files that no longer exist under a directory given.
        ``on_error="skip"`` (default) reports files that fail to parse and goes on; ``"raise"`` stops.
        Symlinks met inside a directory are not followed (reported as skipped) unless ``follow_symlinks=True``.
        ``document_id`` (yours, e.g. one per uploaded file) is stored as the metadata key ``document_id`` of
        every parent and chunk of this call, so its pages/rows are filtered, listed and removed together;
        adding under the same ``document_id`` again replaces the parents it no longer has.
        Nothing is stored unless the whole call succeeds; vectors computed before a failure are cached,
        so running the same call again does not embed them twice.
        """
        return self.ingest(
            source,
            metadata,
            include=include,
            exclude=exclude,
            on_error=on_error,
            prune=prune,
            follow_symlinks=follow_symlinks,
            document_id=document_id,
        ).ids

    def add_documents(
        self,
        sources: Iterable[str | os.PathLike[str] | Document],
        metadata: Mapping[str, Any] | None = None,
        *,
        ids: Sequence[str | None] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Batch form of :meth:`add_document`; ``ids`` (LangChain's argument) gives each Document its id."""
        if isinstance(sources, (str, bytes, os.PathLike, Document, Mapping)) or not isinstance(
            sources, Iterable
        ):
            raise ConfigurationError(
                f"add_documents: sources: expected a list of paths or Documents, got "
                f"{type(sources).__name__} (use add_document for one source)"
            )
        items = list(sources)
        given = check_parallel("ids", ids, len(items))
        if given is not None:
            docs = [d for d in items if isinstance(d, Document)]
            if len(docs) != len(items):
                raise ConfigurationError(
                    "add_documents: ids applies to Documents only (a file's ids come from "
                    "its content; use document_id= to name a file)"
                )
            items = [
                Document(page_content=d.page_content, metadata=d.metadata, id=d.id if i is None else i)
                for d, i in zip(docs, given)
            ]
        return self.add_document(items, metadata, **kwargs)

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: Sequence[Mapping[str, Any]] | None = None,
        *,
        ids: Sequence[str | None] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Add raw texts (LangChain's name and arguments): one document per text, with its metadata and id.

        Returns one stored id per text, in order; a text without an id gets a content id (adding the same
        text again stores nothing, and both get the id of the one stored).  The same id with other content or metadata replaces that document."""
        texts = check_texts(texts)
        metadatas = check_parallel("metadatas", metadatas, len(texts))
        ids = check_parallel("ids", ids, len(texts))
        docs = [
            Document(
                page_content=t,
                metadata=dict(metadatas[i] or {}) if metadatas else {},
                id=ids[i] if ids else None,
            )
            for i, t in enumerate(texts)
        ]
        return (
            self.ingest(docs, **kwargs).document_ids if docs else []
        )  # one id per text, as LangChain expects

    def ingest(
        self,
        source: Source,
        metadata: Mapping[str, Any] | None = None,
        *,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        on_error: str = "skip",
        prune: bool = False,
        follow_symlinks: bool = False,
        document_id: str | None = None,
        max_chunks: int | None = None,
    ) -> IngestReport:
        """Like :meth:`add_document` but returns the full :class:`IngestReport`.

        ``max_chunks`` bounds the chunks this call may make: more raise :class:`TooManyChunksError` while
        splitting, before the batch that crosses it is embedded (with ``document_id`` the call is one write,
        so nothing is written); a server bounds each upload's work with it."""
        check_mapping("metadata", metadata)
        check_patterns("include", include)
        check_patterns("exclude", exclude)
        check_flag("prune", prune)
        check_flag("follow_symlinks", follow_symlinks)
        self.vector_store  # noqa: B018 - open the vector index first: a write checkpoints both indexes
        report = self._writer.ingest(
            source,
            metadata,
            include=include,
            exclude=exclude,
            on_error=on_error,
            prune=prune,
            follow_symlinks=follow_symlinks,
            document_id=document_id,
            max_chunks=max_chunks,
        )
        self._recalibrate()
        return report

    def reindex(
        self,
        *,
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        chunk_unit: str | None = None,
    ) -> IngestReport:
        """Split every stored document again with these chunk settings (the current ones where not given) and
        record them for the directory: the explicit way to change chunking, since an argument on reopening
        only applies to documents added then.  Unchanged chunk texts keep their vectors (nothing re-embedded)."""
        started = time.perf_counter()
        current = {
            "chunk_size": self.settings.chunk_size,
            "chunk_overlap": self.settings.chunk_overlap,
            "chunk_unit": self.settings.chunk_unit,
            "persist_directory": self.settings.persist_directory,
        }
        settings = Settings.resolve(
            {"chunk_size": chunk_size, "chunk_overlap": chunk_overlap, "chunk_unit": chunk_unit},
            env_file=None,
            environ={},
            defaults=current,
        )  # validated like any setting, errors naming the arguments
        self.settings = dataclasses.replace(
            self.settings,
            chunk_size=settings.chunk_size,
            chunk_overlap=settings.chunk_overlap,
            chunk_unit=settings.chunk_unit,
        )
        self._splitter = None  # made again from the new settings when next used
        self.vector_store  # noqa: B018
        report = IngestReport()
        self._writer.reindex(report)
        with self._write_lock.hold("recording the chunk settings"):
            recorded = json.loads(self._ledger.get_info("settings") or "{}")
            self._ledger.set_info(
                "settings",
                json.dumps(
                    {
                        **recorded,
                        "chunk_size": settings.chunk_size,
                        "chunk_overlap": settings.chunk_overlap,
                        "chunk_unit": settings.chunk_unit,
                    }
                ),
            )
        self._recalibrate()
        report.seconds_total = time.perf_counter() - started
        logger.info(
            "reindex: %d documents split again into %d chunks (chunk_size %d, overlap %d, unit %s)",
            len(report.replaced),
            report.chunks_written,
            settings.chunk_size,
            settings.chunk_overlap,
            settings.chunk_unit,
        )
        return report

    # -- removal ------------------------------------------------------------------------------------
    def remove_document(self, doc_id: str | os.PathLike[str]) -> list[str]:
        """Remove a parent document (by id), every document of a source path, or every parent of a
        ``document_id``, from every store.

        Returns the removed parent ids.  Raises :class:`~finderledge.errors.DocumentNotFoundError` (a
        ``KeyError``) naming the id when nothing matches; nothing is changed then.
        """
        key = document_key(doc_id)
        self.vector_store  # noqa: B018
        removed = self._writer.remove(key)
        self._recalibrate()
        return removed

    def delete(self, ids: Sequence[str]) -> list[str]:
        """Remove documents by id (LangChain's ``delete``): unknown ids are ignored; returns the ids removed."""
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
            raise ConfigurationError(
                f"delete: ids: expected a list of document ids, got {type(ids).__name__}"
            )
        keys = [document_key(i) for i in ids]
        self.vector_store  # noqa: B018
        removed = self._writer.delete(keys)
        self._recalibrate()
        return removed

    # -- calibration --------------------------------------------------------------------------------
    def calibrate(self) -> Calibration | None:
        """Measure now how well each search leg finds this corpus's chunks from their own sentences, and store
        the gates adaptive fusion uses (done on its own, at the next search or close, after writes that changed
        the corpus by over 25 %).

        Returns the calibration (see :mod:`finderledge.calibration`), or None for a corpus too small to measure.
        """
        self.vector_store  # noqa: B018
        return self._calibrator.refresh(force=True)

    def _recalibrate(self) -> None:
        """After a write: the gates are due to be measured again (if the corpus moved enough) at the next search
        or close; a failure never fails the write."""
        if not self._calibrator.wanted:
            return
        try:
            self._calibrator.written()  # measured at the next search or close: once per bulk build
            if self.settings.partition_key is not None:
                self._calibrator.refresh_partitions()
        except Exception as exc:  # the write is committed; searches keep the previous gates
            logger.warning(
                "calibrating the search legs failed (%s); adaptive fusion keeps the previous gates",
                exc,
                exc_info=logger.isEnabledFor(logging.DEBUG),
            )

    # -- search -------------------------------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        search_mode: str | None = None,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
        return_parents: bool = False,
        candidate_k: int | None = None,
        rerank: bool = True,
        score_threshold: float | None = None,
        strategy: str | QueryStrategy | None = None,
        llm: Any = None,
        strategy_on_error: str = "fallback",
        mmr: bool = False,
        fetch_k: int | None = None,
        lambda_mult: float | None = None,
    ) -> SearchResults:
        """Best ``k`` chunks for ``query`` (or their parents, de-duplicated, with ``return_parents=True``).

        A result's ``score`` (= ``relevance_score``) is its absolute relevance in [0, 1], comparable between
        queries and falling with rank (docs/scores.md); ``fusion_score`` keeps the fusion's value, which orders
        them.  ``score_threshold`` drops results scoring below it.  With a reranker configured, the fused top
        ``rerank_candidates`` are rescored and the best ``k`` kept (``rerank=False`` skips it for one call); the
        score is then the reranker's mapped into [0, 1] (raw: ``rerank_score``) and ``fused_score``/``fused_rank``
        keep the first stage's.  The returned
        list's ``trace`` says how the search ran (:class:`~finderledge.results.SearchTrace`).

        The indexes first apply every change committed before the call (by any process); the search then
        sees one committed state in both legs.

        ``strategy="multi_query" | "hyde" | "decompose"`` (or a :class:`~finderledge.strategies.QueryStrategy`)
        has ``llm`` (a LangChain chat model or LLM) turn the question into several searches, run concurrently
        with ``filter``, and merges them; each result's ``info["found_by"]`` lists the sub-queries that found
        it.  When the LLM fails the plain search runs with a warning (``strategy_on_error="raise"``: raise).

        ``mmr=True`` (LangChain's ``search_type="mmr"``) returns relevant results that do not repeat each
        other: among the best ``fetch_k`` fused candidates (default 20) each next result maximises
        ``lambda_mult * relevance - (1 - lambda_mult) * similarity to the ones already chosen`` (default 0.5),
        similarity being the cosine of the chunks' stored vectors; the results are in that order.
        """
        if strategy is not None:
            from .strategies import run_strategy

            if mmr or fetch_k is not None or lambda_mult is not None:
                raise ConfigurationError("search: mmr cannot be combined with a query strategy")

            return run_strategy(
                self,
                query,
                strategy,
                llm,
                k=k,
                on_error=strategy_on_error,
                search_mode=search_mode,
                filter=filter,
                return_parents=return_parents,
                candidate_k=candidate_k,
                rerank=rerank,
                score_threshold=score_threshold,
            )
        return self._searcher.search(
            query,
            search_mode=search_mode,
            k=k,
            filter=filter,
            return_parents=return_parents,
            candidate_k=candidate_k,
            rerank=rerank,
            score_threshold=score_threshold,
            mmr=mmr,
            fetch_k=fetch_k,
            lambda_mult=lambda_mult,
        )

    # -- lifecycle ----------------------------------------------------------------------------------
    def check(self, repair: bool = False) -> CheckReport:
        """Verify the persist directory against its ledger (pages, rows, each index's ids, checksums and
        vectors) and report in plain words; ``repair=True`` rebuilds the indexes the ledger can rebuild and
        says what it cannot.  ``report.clean`` is True when nothing is damaged."""
        if self.persist_directory is None or self.settings.database_url is not None:
            raise ConfigurationError("check: needs a persist directory with its SQLite ledger")
        self.refresh()
        self._replica.maybe_checkpoint()
        report = check_directory(self.persist_directory)
        return run_repair(report, self._replica.rebuild_index) if repair else report

    def close(self) -> None:
        """Checkpoint the indexes (when no other process is writing) and close every store; again: no-op."""
        if self._closed:
            return
        self._closed = True
        self._calibrator.settle()  # the writes of this process, measured once (if they moved the corpus)
        self._replica.close()
        self.finder.close()
        self._ledger.close()

    def __enter__(self) -> FinderLedge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _KeywordLeg:
    """The keyword leg as the Finder sees it: this process's BM25 replica."""

    def __init__(self, replica: Replica) -> None:
        self._replica = replica

    def search(
        self, query: str, k: int = 10, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        return self._replica.keyword_search(query, k, filter)


class _VectorLeg:
    """The vector leg as the Finder sees it: the base index plus the overlay of changes not yet checkpointed."""

    def __init__(self, owner: FinderLedge) -> None:
        owner.vector_store  # noqa: B018 - opens it
        self._replica = owner._replica

    def search(
        self, embedding: Any, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        return self._replica.vector_search(embedding, k, filter)

    def search_many(
        self, embeddings: Any, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[list[tuple[str, float]]]:
        """Several vector searches in one index call (the leg calibration's pseudo-queries)."""
        return self._replica.vector_search_many(embeddings, k, filter)


def _vector_backend(
    fl: FinderLedge, instance: VectorStore | None, local: Path | None
) -> tuple[Callable[[], VectorStore], str]:
    """How to open the vector leg, and the key its checkpoint record is kept under."""
    settings = fl.settings
    if settings.database_url is not None:
        if instance is not None or settings.vector_store != "pgvector":
            raise ConfigurationError(
                "setting 'vector_store': with database_url the vector leg is pgvector in the same database "
                f"(written in the ledger's transactions), got {settings.vector_store if instance is None else 'an instance'!r}"
            )
        return lambda: fl._ledger.vector_store(fl._dimension()), "index:vector:pgvector"  # type: ignore[attr-defined]
    if instance is not None:
        return (
            lambda: instance,
            f"index:vector:langchain:{getattr(instance, 'kind', type(instance).__name__)}",
        )
    kind = settings.vector_store
    if kind == "pgvector":
        raise ConfigurationError(
            "setting 'vector_store': 'pgvector' keeps the index in PostgreSQL: set "
            "database_url (or FINDERLEDGE_DATABASE_URL) to use it"
        )
    require_backend(kind)  # chroma is an extra since FAISS became the default: say which, before any write
    if kind == "chroma" and settings.chroma_url is not None:
        url, collection = settings.chroma_url, settings.chroma_collection
        return (
            lambda: create_vector_store("chroma", None, fl._dimension(), url=url, collection=collection),
            f"index:vector:chroma@{redact_url(url)}/{collection}",
        )
    if kind == "chroma":  # a local Chroma directory holds the named collection too (an older index: rebuilt)
        collection = settings.chroma_collection
        return (
            lambda: create_vector_store(kind, local, fl._dimension(), collection=collection),
            "index:vector:chroma",
        )
    if kind == "qdrant":  # a Qdrant server's collection, or a local folder holding it (local mode)
        q_url, q_collection = settings.qdrant_url, settings.qdrant_collection
        where = f"@{redact_url(q_url)}/{q_collection}" if q_url is not None else ""
        q_place = None if q_url is not None else local
        return (
            lambda: create_vector_store(
                "qdrant", q_place, fl._dimension(), url=q_url, collection=q_collection
            ),
            f"index:vector:qdrant{where}",
        )
    key = settings.partition_key
    return lambda: _partitioned(
        create_vector_store(kind, local, fl._dimension()), key
    ), f"index:vector:{kind}"


def _partitioned(store: VectorStore, key: str | None) -> VectorStore:
    """``store``, told the partition key where it keeps per-partition rows (FAISS: a pinned search then costs
    what the partition's size costs)."""
    set_key = getattr(store, "set_partition_key", None)
    if key is not None and callable(set_key):
        set_key(key)
    return store


def _pin_recorded(
    settings: Settings, recorded: Mapping[str, Any], args: Mapping[str, Any], directory: Path | None
) -> Settings:
    """A reopened directory keeps the vector store and chunking it was built with: environment variables and
    ``.env`` (defaults for new directories) never change them.  Arguments do: the chunking of the documents
    this instance adds, or the vector store (rebuilt from the ledger's vectors and recorded)."""
    pinned = {
        k: recorded[k]
        for k in (
            "vector_store",
            "chunk_size",
            "chunk_overlap",
            "chunk_unit",
            "chroma_url",
            "chroma_collection",
            "qdrant_url",
            "qdrant_collection",
        )
        if k in recorded and args.get(k) is None and getattr(settings, k) != recorded[k]
    }
    if pinned:
        logger.info(
            "%s keeps the settings it was built with %s (the environment's apply to new directories)",
            directory,
            pinned,
        )
        settings = dataclasses.replace(settings, **pinned)
    return settings


def _model_mismatch(directory: Path | None, recorded: str, given: str) -> str:
    """The error for a directory built with another embedding model: what it was built with and what to pass."""
    provider, _, name = recorded.partition(":")
    if provider in PROVIDERS and name:
        hint = (
            f"pass embedding={recorded!r} (or set FINDERLEDGE_EMBEDDING_MODEL) if you trust that model, "
            "or use a new persist_directory"
        )
    else:
        hint = "pass the same Embeddings object it was built with, or use a new persist_directory"
    return (
        f"setting 'embedding': {directory} was built with embedding model {recorded!r}, but this call uses "
        f"{given!r}; FinderLedge never loads the recorded model by itself: {hint}"
    )


def _is_embeddings(value: Any) -> bool:
    """Whether ``value`` is a LangChain ``Embeddings`` (none can exist before LangChain's module is loaded,
    so a model given by name never imports it)."""
    module = sys.modules.get("langchain_core.embeddings")
    return module is not None and isinstance(value, module.Embeddings)


def _model_id(model: str | Embeddings | None) -> str:
    """The id recorded for ``model``: by name without importing any model, an instance by its class."""
    if model is None or isinstance(model, str):
        return model_name_id(model)
    from .embeddings import embedding_model_id  # an instance: its class is loaded already

    return embedding_model_id(model)
