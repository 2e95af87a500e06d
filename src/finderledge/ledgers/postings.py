"""The keyword leg inside PostgreSQL (``keyword_index="engine"``): BM25 postings and statistics the ledger keeps
in its own tables, scored by one SQL query.

Tables (in the ledger's schema, created when the engine-side index is first enabled):

* ``kw_docs (doc bigserial, id, parent_id, part, dl)``: one row per indexed chunk; ``part`` its partition group
  (:func:`part_code`), ``dl`` its token count;
* ``kw_postings (term, doc, tf, dl, part)``: one row per distinct term of a chunk (``(term, part)`` index
  covering ``doc, tf, dl``: a term's postings are one index range);
* ``kw_stats (part, n_docs, total_len)``: live chunks and tokens per partition group;
* ``kw_terms (term, part, df)``: each term's document frequency per partition group, kept with the postings
  (a search reads a term's df with one index look-up instead of counting its postings: at 1M chunks a common
  term's count took 50-230 ms).  A ledger whose postings predate it gets it at the next open or write
  (counted once from the postings, under the commit key).  A bulk load (:mod:`.bulk`) holds its additions
  back and adds them in one upsert after its last commit; while its record is in ``info`` the searches that
  read ``kw_terms`` count from the postings instead (:func:`terms_held`), and if it dies the next write or
  open counts ``kw_terms`` again.

**Written in the ledger's transactions.**  ``commit_write`` adds the postings of the chunks it stores and drops
those of the documents it removes or replaces in the same transaction as the chunk rows (after the commit key
is held), so the statistics are exact at every committed ``seq``.  Tokens come from the tokenizer recorded in
the info key ``keyword_index`` (with the partition key) when the index was enabled: every writer, whichever
settings it runs with, writes the same terms.  A batch's ``kw_docs`` keys are drawn from their sequence
first, so many rows go in by binary ``COPY`` (:mod:`.bulk`) like the chunk rows, in the same transaction (a
killed writer leaves none of them).  A commit of :data:`THREAD_MIN_CHUNKS` chunks or more draws its keys at its
start and encodes its postings in a thread (:class:`PendingPostings`, no database work) while it stores its
other rows, the thread joined before they are sent and when the transaction ends.

**Scored as the local leg scores** (:mod:`finderledge.keyword_store.scoring`): Okapi BM25 with Lucene's IDF,
``k1``/``b`` at query time, document frequencies summed over the scope's ``kw_terms`` rows (the whole index, or
the partitions a filter pins or reaches), the metadata filter as SQL over the ``vectors`` table's ``metadata``
(:func:`~finderledge.vector_stores.pg_filter.to_sql`, rows whose ``jsonb`` is lossy checked again in Python),
ties broken by id.

**Pruned when that cannot change the top k** (MaxScore, :meth:`EngineKeywordIndex._pruned`): a term adds less
than its weight to any chunk, so the postings of a query's common terms (lightest weights, together under half
the heaviest term's, at least 2,000 postings) are not scanned: the other terms' postings give the candidates,
the candidates that can still reach the k-th best get their full score (every term, read by chunk), and the
result is kept only if the k-th best full score exceeds the set-aside weights' sum (no other chunk can reach
it); otherwise, with a metadata filter left to check, or without ``k``, every posting is scored.
"""

from __future__ import annotations

import json
import logging
import math
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, IncompatibleIndexError
from ..filters import compile_filter
from ..metadata import embedded_text, user_metadata
from ..partitions import (
    MISSING,
    OTHER,
    Group,
    PartitionFilter,
    partition_group,
    partition_of,
    partitions_of,
    pins_only,
)
from ..storage.postgres import advisory_key
from ..tokenizer import AutoTokenizer, Tokenizer, tokenizer_from_dict, tokenizer_spec
from ..vector_stores import LEDGER
from ..vector_stores.pg_filter import to_sql
from . import bulk

if TYPE_CHECKING:
    from .base import ChunkRecord, DocumentRecord

#: a :class:`~finderledge.ledgers.postgres.PostgresDialect` (named loosely: that module imports this one)
PostgresDialect = Any

__all__ = [
    "INFO_KEY",
    "EngineKeywordIndex",
    "Postings",
    "add_terms",
    "group_of",
    "part_code",
    "rebuild",
    "recount_terms",
    "verify",
]

logger = logging.getLogger(__name__)

WRITERS_REBUILD = "every writer rebuilds it from the ledger"  # why a tokenizer must have to_dict()

#: the info key recording that the ledger keeps postings, and with which tokenizer and partition key
INFO_KEY = "keyword_index"
_BATCH = 2000  # chunks per insert statement
_TERM_HEAD = struct.Struct(">hi")  # a postings row's field count, then its term's length
_DOC_FIELD = struct.Struct(">iq")
_TF_FIELD = struct.Struct(">ii")
_DL_FIELD = struct.Struct(">iii")  # dl's length and value, then the part's length
#: postings the non-essential terms of a query must hold before a search sets them aside (MaxScore): fewer, and
#: scoring every posting in one statement is as quick as the extra round trips
_PRUNE_MIN_POSTINGS = 2000
#: live chunks below which a search does not try to prune (its extra statements cost more than they save there:
#: 10k chunks, p50 2.6 ms unpruned, 6.1 ms trying); the count is read again after _SIZE_TTL seconds
_PRUNE_MIN_CHUNKS = 50_000
_SIZE_TTL = 30.0

#: the two B-trees of ``kw_postings``: kept with the bulk loads that defer them
POSTINGS_INDEXES = bulk.POSTINGS_INDEXES

_DDL = [
    (
        "CREATE TABLE IF NOT EXISTS {s}kw_docs (doc bigserial PRIMARY KEY, id text NOT NULL UNIQUE,"
        " parent_id text NOT NULL, part text NOT NULL, dl integer NOT NULL)"
    ),
    "CREATE INDEX IF NOT EXISTS kw_docs_parent ON {s}kw_docs (parent_id)",
    (
        "CREATE TABLE IF NOT EXISTS {s}kw_postings (term text NOT NULL, doc bigint NOT NULL, tf integer NOT NULL,"
        " dl integer NOT NULL, part text NOT NULL)"
    ),
    (
        "CREATE TABLE IF NOT EXISTS {s}kw_stats (part text PRIMARY KEY, n_docs bigint NOT NULL,"
        " total_len bigint NOT NULL)"
    ),
]
#: each term's df per partition group (see the module docstring), created with the others or at its first
#: need on a ledger whose postings predate it (:func:`ensure_terms`)
_TERMS_DDL = (
    'CREATE TABLE IF NOT EXISTS {s}kw_terms (term text COLLATE "C" NOT NULL, part text NOT NULL,'
    " df bigint NOT NULL, PRIMARY KEY (term, part))"
)
_TERMS_FROM_POSTINGS = (
    "INSERT INTO {s}kw_terms (term, part, df)"
    " SELECT term, part, count(*) FROM {s}kw_postings GROUP BY term, part"
)


def _qualified(dialect: PostgresDialect, table: str) -> str:
    """``"schema".table``, as PostgreSQL's name look-ups (``to_regclass``, ``pg_get_serial_sequence``) read it."""
    return '"' + str(dialect.schema).replace('"', '""') + '".' + table


def has_terms(conn: Any, dialect: PostgresDialect) -> bool:
    """Whether the ledger's ``kw_terms`` table exists (one catalog look-up)."""
    row = conn.execute("SELECT to_regclass(%s)", (_qualified(dialect, "kw_terms"),)).fetchone()
    return row is not None and row[0] is not None


def terms_held(conn: Any, dialect: PostgresDialect) -> bool:
    """Whether ``kw_terms`` may be behind the postings: a bulk load holds its additions back (or died holding
    them: the next write or open counts them) while its postings record (:data:`.bulk.POSTINGS_STATE_KEY`) is in
    ``info``."""
    return bulk.recorded(dialect, conn, bulk.POSTINGS_STATE_KEY)


def ensure_terms(tx: Any, dialect: PostgresDialect) -> bool:
    """Inside a transaction holding the commit key: create ``kw_terms`` and count it from the postings when the
    ledger's postings predate it; True when it existed already (committed by an earlier transaction)."""
    if has_terms(tx, dialect):
        return True
    started = time.perf_counter()
    tx.execute(dialect.sql(_TERMS_DDL))
    tx.execute(dialect.sql(_TERMS_FROM_POSTINGS))
    logger.info(
        "ledger %s: each term's document frequency counted from the postings in %.1f s (kw_terms)",
        dialect.name,
        time.perf_counter() - started,
    )
    return False


def part_code(group: Group | None) -> str:
    """The ``part`` column of a chunk in partition group ``group`` (None: no partition key)."""
    if group is None:
        return ""
    if isinstance(group, str):
        return "=" + group
    return "missing" if group == MISSING else "other"


def group_of(code: str) -> Group:
    """The partition group a ``part`` value stands for."""
    if code.startswith("="):
        return code[1:]
    return MISSING if code == "missing" else OTHER


class Postings:
    """The write side, called by :class:`~finderledge.ledgers.postgres.PostgresDialect` inside its write
    transactions: nothing happens until the ledger records :data:`INFO_KEY`."""

    def __init__(self, dialect: PostgresDialect) -> None:
        self.dialect = dialect
        self._recorded: dict[str, Any] | None = None
        self._tokenizer: Tokenizer | None = None
        self._terms_found = False  # kw_terms seen committed: writes need not look again
        #: each open write transaction's postings being encoded in a thread (:meth:`begin`), by cursor
        self._pending: dict[int, PendingPostings] = {}

    def _ensure_terms(self, tx: Any) -> None:
        """Before a write's postings change: ``kw_terms`` exists (looked up until found committed; one this
        write creates may still roll back with it)."""
        if not self._terms_found:
            self._terms_found = ensure_terms(tx, self.dialect)

    def recorded(self, conn: Any) -> dict[str, Any] | None:
        """What :data:`INFO_KEY` records (None: this ledger keeps no postings); read until found, then kept."""
        if self._recorded is None:
            row = conn.execute(
                self.dialect.sql("SELECT value FROM {s}info WHERE key = ?"), (INFO_KEY,)
            ).fetchone()
            if row is None:
                return None
            self._recorded = json.loads(row[0])
        return self._recorded

    def forget(self) -> None:
        """Read :data:`INFO_KEY` again on the next write (this process has just recorded it)."""
        self._recorded = None

    def tokenizer(self, recorded: Mapping[str, Any]) -> Tokenizer:
        if self._tokenizer is None:
            self._tokenizer = tokenizer_from_dict(recorded["tokenizer"])
        return self._tokenizer

    def add_held(self, tx: Any, dfs: Mapping[tuple[str, str], int]) -> None:
        """After a bulk load's commits: the document frequencies it held back, in one upsert (:func:`add_terms`)."""
        self._ensure_terms(tx)
        add_terms(tx, self.dialect, dfs)

    def recount(self, tx: Any) -> None:
        """``kw_terms`` counted again from the postings (:func:`recount_terms`), if the ledger keeps postings."""
        if self.recorded(tx) is not None:
            recount_terms(tx, self.dialect)

    def drop(self, tx: Any, doc_ids: Sequence[str]) -> None:
        """Inside a write transaction: the postings of the chunks of ``doc_ids`` go, their statistics with them
        (``kw_terms`` by adding negative counts: a term whose additions a bulk load holds back may have no row
        yet, and the sum comes right when they are added)."""
        if not doc_ids or self.recorded(tx) is None:
            return
        self._ensure_terms(tx)
        ids = list(doc_ids)
        for at in range(0, len(ids), _BATCH):
            any_sql, arg = bulk.text_any(ids[at : at + _BATCH])
            query = self.dialect.sql(
                f"WITH gone AS (DELETE FROM {{s}}kw_docs WHERE parent_id = {any_sql} RETURNING doc, part, dl),"
                " p AS (DELETE FROM {s}kw_postings p USING gone WHERE p.doc = gone.doc RETURNING p.term, p.part),"
                " f AS (INSERT INTO {s}kw_terms (term, part, df) SELECT term, part, -count(*) FROM p GROUP BY term, part"
                " ON CONFLICT (term, part) DO UPDATE SET df = {s}kw_terms.df + EXCLUDED.df)"
                " UPDATE {s}kw_stats t SET n_docs = t.n_docs - g.n, total_len = t.total_len - g.l"
                " FROM (SELECT part, count(*) AS n, sum(dl) AS l FROM gone GROUP BY part) g WHERE t.part = g.part"
            )
            tx.execute(query, (arg,))

    def _chunks(self, add: Sequence[tuple[DocumentRecord, Sequence[ChunkRecord]]]) -> list[ChunkRecord]:
        """The chunks a commit writes (a document added twice: its later copy, as the chunk rows hold)."""
        last: dict[str, Sequence[ChunkRecord]] = {}
        for doc, chunks in add:
            last.pop(doc.id, None)
            last[doc.id] = chunks
        return list({c.id: c for cs in last.values() for c in cs}.values())

    def begin(self, tx: Any, add: Sequence[tuple[DocumentRecord, Sequence[ChunkRecord]]]) -> None:
        """First in a commit of at least :data:`THREAD_MIN_CHUNKS` chunks: draw their ``kw_docs`` keys and
        encode their postings in a thread (:class:`PendingPostings`) while the commit writes its other rows
        (the server storing them meanwhile); :meth:`add` takes the result, and the transaction's end joins it
        (:meth:`settle`) whatever happens."""
        if sum(len(cs) for _, cs in add) < THREAD_MIN_CHUNKS:
            return
        recorded = self.recorded(tx)
        if recorded is None:
            return
        chunks = self._chunks(add)
        drawn = _draw_docs(tx, self.dialect, len(chunks))
        tokenizer, key = self.tokenizer(recorded), recorded.get("partition_key")
        codec = tx.connection.info.encoding
        self._pending[id(tx)] = PendingPostings(lambda: encode_chunks(chunks, drawn, tokenizer, key, codec))

    def settle(self, tx: Any) -> None:
        """When ``tx``'s transaction ends: a postings encoding it started and did not use is joined."""
        pending = self._pending.pop(id(tx), None)
        if pending is not None:
            pending.join()

    def add(
        self,
        tx: Any,
        add: Sequence[tuple[DocumentRecord, Sequence[ChunkRecord]]],
        held: Counter[tuple[str, str]] | None = None,
    ) -> None:
        """Inside the commit transaction: the postings of the chunks written (a document added twice: its later
        copy, as the chunk rows hold); ``held``: their document frequencies go there, not to ``kw_terms``."""
        pending = self._pending.pop(id(tx), None)
        recorded = self.recorded(tx) if add else None
        if recorded is None:
            if pending is not None:
                pending.join()
            return
        self._ensure_terms(tx)
        ready = None if pending is None else pending.result()
        chunks = self._chunks(add)
        write_chunks(
            tx, self.dialect, chunks, self.tokenizer(recorded), recorded.get("partition_key"), held, ready
        )


#: chunks of a commit from which their postings are encoded in a thread while it writes its other rows
THREAD_MIN_CHUNKS = 100


class PendingPostings:
    """A commit's postings encoded in a thread (:func:`encode_chunks`: no database work), joined before the
    commit sends them (:meth:`result`) or when its transaction ends (:meth:`join`): the thread never outlives
    the commit."""

    def __init__(self, work: Callable[[], Encoded]) -> None:
        self._work = work
        self._done: Encoded | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="finderledge-postings-encode", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._done = self._work()
        except BaseException as exc:  # noqa: BLE001 - raised again in the commit's thread (result)
            self._error = exc

    def join(self) -> None:
        self._thread.join()

    def result(self) -> Encoded:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._done is not None
        return self._done


def add_terms(tx: Any, dialect: PostgresDialect, dfs: Mapping[tuple[str, str], int]) -> None:
    """Add ``{(term, part): documents}`` to ``kw_terms`` (one upsert; a term's first documents insert its row)."""
    if not dfs:
        return
    tx.execute(
        dialect.sql(
            "INSERT INTO {s}kw_terms (term, part, df)"
            " SELECT * FROM unnest(?::text[], ?::text[], ?::bigint[]) ON CONFLICT (term, part) DO UPDATE"
            " SET df = {s}kw_terms.df + EXCLUDED.df"
        ),
        ([t for t, _ in dfs], [p for _, p in dfs], list(dfs.values())),
    )


def recount_terms(tx: Any, dialect: PostgresDialect) -> None:
    """Count ``kw_terms`` again from the postings (under the commit key): after a bulk load that died holding
    its frequencies back (:meth:`Postings.add`'s ``held``)."""
    started = time.perf_counter()
    tx.execute("SELECT pg_advisory_xact_lock(%s)", (advisory_key("commit", dialect.schema),))
    if not ensure_terms(tx, dialect):
        return  # just counted from the postings
    tx.execute(dialect.sql("DELETE FROM {s}kw_terms"))
    tx.execute(dialect.sql(_TERMS_FROM_POSTINGS))
    logger.info(
        "ledger %s: each term's document frequency counted again from the postings in %.1f s (kw_terms)",
        dialect.name,
        time.perf_counter() - started,
    )


def write_chunks(
    tx: Any,
    dialect: PostgresDialect,
    chunks: Sequence[ChunkRecord],
    tokenizer: Tokenizer,
    key: str | None,
    held: Counter[tuple[str, str]] | None = None,
    ready: Encoded | None = None,
) -> None:
    """Insert the postings and statistics of ``chunks`` (none of them indexed yet).  The ``doc`` keys are drawn
    from ``kw_docs``'s sequence first, so many rows go in by COPY (:meth:`bulk_rows`, :mod:`.bulk`), in the
    caller's transaction like the chunk rows; a few by ``INSERT … unnest``.  Many chunks' postings go in one
    COPY, each batch of :data:`_BATCH` chunks tokenized and encoded as the COPY goes (``ready``: all of them
    encoded before, :func:`encode_chunks`, with their keys drawn).  The document frequencies and the
    statistics are added once for all of ``chunks`` (one upsert each: a term shared by several batches is one
    row of it); ``held``: the document frequencies are added to it instead (a bulk load adds them once)."""
    if ready is not None:
        bulk.copy_encoded(tx, dialect.schema, "kw_postings", _POSTINGS_COLUMNS, ready.pieces)
        _write_stats(tx, dialect, ready, held)
        return
    drawn = _draw_docs(tx, dialect, len(chunks)) if chunks else []
    done = Encoded([], [], Counter(), {})
    batches = _tokenized(chunks, drawn, tokenizer, key, done)
    if len(chunks) >= bulk.COPY_MIN_ROWS:  # one COPY, streamed
        codec = tx.connection.info.encoding
        pieces = chain.from_iterable(_postings_pieces(codec, *b) for b in batches)
        bulk.copy_encoded(tx, dialect.schema, "kw_postings", _POSTINGS_COLUMNS, pieces)
    else:
        for b in batches:
            _write_postings(tx, dialect, *b)
    _write_stats(tx, dialect, done, held)


@dataclass
class Encoded:
    """Chunks' postings in COPY's binary row form (:func:`_postings_pieces`), their ``kw_docs`` rows, document
    frequencies and per-partition statistics (``[chunks, tokens]``)."""

    pieces: list[bytes]
    doc_rows: list[tuple[int, str, str, str, int]]
    dfs: Counter[tuple[str, str]]
    totals: dict[str, list[int]]


def encode_chunks(
    chunks: Sequence[ChunkRecord], drawn: Sequence[int], tokenizer: Tokenizer, key: str | None, codec: str
) -> Encoded:
    """The postings rows and statistics of ``chunks`` (``drawn``: their ``kw_docs`` keys), all encoded: no
    database work, so a commit runs it in a thread while the server stores its other rows
    (:class:`PendingPostings`)."""
    done = Encoded([], [], Counter(), {})
    for b in _tokenized(chunks, drawn, tokenizer, key, done):
        done.pieces.extend(_postings_pieces(codec, *b))
    return done


def _tokenized(
    chunks: Sequence[ChunkRecord], drawn: Sequence[int], tokenizer: Tokenizer, key: str | None, done: Encoded
) -> Iterator[tuple[list[int], list[Counter[str]], list[int], list[str]]]:
    """Each batch's keys, term counts, lengths and partition codes (its ``kw_docs`` rows and statistics kept
    in ``done``): each chunk tokenized once."""
    dfs, totals = done.dfs, done.totals
    for at in range(0, len(chunks), _BATCH):
        batch = chunks[at : at + _BATCH]
        counts = [Counter(tokenizer(embedded_text(c.content, c.metadata))) for c in batch]  # as the local leg
        parts = [
            part_code(None if key is None else partition_group(user_metadata(c.metadata), key)) for c in batch
        ]
        lengths = [sum(tf.values()) for tf in counts]
        keys = list(drawn[at : at + len(batch)])
        done.doc_rows.extend((d, c.id, c.parent_id, p, n) for d, c, p, n in zip(keys, batch, parts, lengths))
        by_part: dict[str, Counter[str]] = {}  # terms counted per partition, paired with it once per term
        for tf, part in zip(counts, parts):
            seen = by_part.get(part)
            if seen is None:
                seen = by_part[part] = Counter()
            seen.update(tf.keys())
        for part, seen in by_part.items():
            dfs.update(dict(zip(zip(seen, repeat(part)), seen.values())))
        for part, dl in zip(parts, lengths):
            entry = totals.setdefault(part, [0, 0])
            entry[0] += 1
            entry[1] += dl
        yield keys, counts, lengths, parts


def _write_stats(
    tx: Any, dialect: PostgresDialect, done: Encoded, held: Counter[tuple[str, str]] | None
) -> None:
    """The ``kw_docs`` rows, document frequencies (or into ``held``) and statistics of chunks whose postings
    are written."""
    doc_rows, dfs, totals = done.doc_rows, done.dfs, done.totals
    if not dialect.bulk_rows(tx, "kw_docs", ("doc", "id", "parent_id", "part", "dl"), doc_rows) and doc_rows:
        tx.execute(
            dialect.sql(
                "INSERT INTO {s}kw_docs (doc, id, parent_id, part, dl)"
                " SELECT * FROM unnest(?::bigint[], ?::text[], ?::text[], ?::text[], ?::int[])"
            ),
            tuple(map(list, zip(*doc_rows))),
        )
    if held is not None:
        held.update(dfs)
    elif dfs:
        add_terms(tx, dialect, dfs)
    if totals:
        tx.execute(
            dialect.sql(
                "INSERT INTO {s}kw_stats (part, n_docs, total_len)"
                " SELECT * FROM unnest(?::text[], ?::bigint[], ?::bigint[]) ON CONFLICT (part) DO UPDATE"
                " SET n_docs = {s}kw_stats.n_docs + EXCLUDED.n_docs,"
                " total_len = {s}kw_stats.total_len + EXCLUDED.total_len"
            ),
            (list(totals), [v[0] for v in totals.values()], [v[1] for v in totals.values()]),
        )


_POSTINGS_COLUMNS = ("term", "doc", "tf", "dl", "part")


def _write_postings(
    tx: Any,
    dialect: PostgresDialect,
    keys: Sequence[int],
    counts: Sequence[Counter[str]],
    lengths: Sequence[int],
    parts: Sequence[str],
) -> None:
    """The ``kw_postings`` rows of a batch: many by one binary COPY (:func:`_postings_pieces`), a few by
    ``INSERT … unnest``."""
    if sum(map(len, counts)) < bulk.COPY_MIN_ROWS:
        rows = [
            (term, doc, n, dl, part)
            for doc, tf, dl, part in zip(keys, counts, lengths, parts)
            for term, n in tf.items()
        ]
        if rows:
            tx.execute(
                dialect.sql(
                    "INSERT INTO {s}kw_postings (term, doc, tf, dl, part)"
                    " SELECT * FROM unnest(?::text[], ?::bigint[], ?::int[], ?::int[], ?::text[])"
                ),
                tuple(map(list, zip(*rows))),
            )
        return
    pieces = _postings_pieces(tx.connection.info.encoding, keys, counts, lengths, parts)
    bulk.copy_encoded(tx, dialect.schema, "kw_postings", _POSTINGS_COLUMNS, pieces)


def _postings_pieces(
    codec: str,
    keys: Sequence[int],
    counts: Sequence[Counter[str]],
    lengths: Sequence[int],
    parts: Sequence[str],
) -> list[bytes]:
    """A batch's ``kw_postings`` rows in COPY's binary row form, each row's bytes joined from pieces encoded
    once (a term's, a chunk's ``doc``/``dl``/``part``)."""
    by_term: dict[str, list[bytes]] = {}  # each term's row bodies (doc, tf, dl, part), in doc order
    for doc, tf, dl, part in zip(keys, counts, lengths, parts):
        text = part.encode(codec)
        doc_field = _DOC_FIELD.pack(8, doc)
        tail = _DL_FIELD.pack(4, dl, len(text)) + text
        made: dict[int, bytes] = {}  # this chunk's body for each tf (most of its terms share tf 1)
        for term, n in tf.items():
            body = made.get(n)
            if body is None:
                body = made[n] = doc_field + _TF_FIELD.pack(4, n) + tail
            bodies = by_term.get(term)
            if bodies is None:
                by_term[term] = [body]
            else:
                bodies.append(body)
    # in the term index's order (its pages are touched once each, in turn): one sort of the distinct terms,
    # a term's rows as one piece, each its head (field count, the term length-prefixed) then its body
    pieces: list[bytes] = []
    for term in sorted(by_term):
        raw = term.encode(codec)
        head = _TERM_HEAD.pack(len(_POSTINGS_COLUMNS), len(raw)) + raw
        pieces.append(head + head.join(by_term[term]))
    return pieces


def _draw_docs(tx: Any, dialect: PostgresDialect, count: int) -> list[int]:
    """``count`` new ``kw_docs.doc`` keys from its sequence (in order; a rolled-back write leaves a gap only)."""
    rows = tx.execute(
        "SELECT nextval(pg_get_serial_sequence(%s, 'doc')) FROM generate_series(1, %s)",
        (_qualified(dialect, "kw_docs"), count),
    ).fetchall()
    return sorted(int(r[0]) for r in rows)


def enable(dialect: PostgresDialect, tokenizer: Any, partition_key: str | None) -> dict[str, Any]:
    """Make the ledger keep postings (tables created, every stored chunk indexed, :data:`INFO_KEY` recorded, one
    transaction under the commit key) unless it does; returns what is recorded.  A ledger that keeps them with
    another tokenizer or partition key is refused (:class:`IncompatibleIndexError`)."""
    with dialect.reading() as conn:
        found = dialect.postings.recorded(conn)
    if tokenizer is None:  # none named: the one the ledger records, else the default
        spec = found["tokenizer"] if found is not None else tokenizer_spec(AutoTokenizer(), WRITERS_REBUILD)
    else:
        spec = tokenizer_spec(tokenizer, WRITERS_REBUILD)
    wanted: dict[str, Any] = {"tokenizer": spec, "partition_key": partition_key}
    if found is None:
        with dialect.writing() as tx:
            tx.execute("SELECT pg_advisory_xact_lock(%s)", (advisory_key("commit", dialect.schema),))
            found = dialect.postings.recorded(tx)
            if found is None:
                for statement in (*_DDL, _TERMS_DDL):
                    tx.execute(dialect.sql(statement))
                _index_stored(tx, dialect, tokenizer_from_dict(wanted["tokenizer"]), partition_key)
                for statement in POSTINGS_INDEXES.values():  # built over the stored chunks' postings: once
                    tx.execute(dialect.sql(statement))
                tx.execute(
                    dialect.insert("info", ("key", "value"), "replace", "key"), (INFO_KEY, json.dumps(wanted))
                )
                dialect.postings.forget()
                return wanted
    if found == wanted:
        with dialect.reading() as conn:  # a look-up; the table is made (once) under the commit key
            ready = has_terms(conn, dialect)
        if not ready:
            with dialect.writing() as tx:
                tx.execute("SELECT pg_advisory_xact_lock(%s)", (advisory_key("commit", dialect.schema),))
                ensure_terms(tx, dialect)
    if found != wanted:
        raise IncompatibleIndexError(
            f"ledger {dialect.name}: its engine-side keyword index was built with {found}; this process asks "
            f"for {wanted} (open it with that tokenizer and partition_key, or keyword_index='local')"
        )
    return wanted


def _index_stored(tx: Any, dialect: PostgresDialect, tok: Tokenizer, partition_key: str | None) -> int:
    """Inside a transaction holding the commit key: the postings of every stored chunk (none indexed yet);
    returns how many chunks were indexed."""
    from .base import COMPLETE

    ids = [
        r[0]
        for r in tx.execute(
            dialect.sql(
                "SELECT c.id FROM {s}chunks c JOIN {s}documents d ON d.id = c.parent_id WHERE d.state = ?"
                " ORDER BY c.id"
            ),
            (COMPLETE,),
        ).fetchall()
    ]
    if ids:
        logger.info("ledger %s: indexing %d stored chunks for the keyword index", dialect.name, len(ids))
    for at in range(0, len(ids), _BATCH):
        rows = tx.execute(
            dialect.sql(
                f"SELECT {dialect.chunk_read} FROM {{s}}chunks c{dialect.document_join} WHERE c.id = ANY(?)"
            ),
            (ids[at : at + _BATCH],),
        ).fetchall()
        chunks = [dialect.chunk(r, False, lambda key: None) for r in rows]
        write_chunks(tx, dialect, chunks, tok, partition_key)
    return len(ids)


# -- checks and repairs ----------------------------------------------------------------------------------
_LISTED = 5  # ids named in one problem sentence


def _some(ids: Sequence[str], count: int) -> str:
    named = ", ".join(ids[:_LISTED])
    return f"{named}, …" if count > _LISTED else named


def verify(dialect: PostgresDialect) -> list[str] | None:
    """Check the postings and statistics against the ledger's live chunks, in one snapshot: every live chunk
    indexed once, nothing else; each chunk's terms, counts, length and partition as its text gives them
    now (the recorded tokenizer); every posting of an indexed chunk; each partition's statistics the sum of
    its chunks'.  Returns one sentence a kind of problem found (empty: none); None: the ledger keeps no
    postings.  Reads every chunk once (a check: it grows with the corpus)."""
    from .base import COMPLETE

    with dialect.snapshot(), dialect.reading() as conn:
        row = conn.execute(dialect.sql("SELECT value FROM {s}info WHERE key = ?"), (INFO_KEY,)).fetchone()
        if row is None:
            return None
        recorded = json.loads(row[0])
        tok = tokenizer_from_dict(recorded["tokenizer"])
        key = recorded.get("partition_key")
        problems: list[str] = []
        missing: list[str] = []
        wrong: list[str] = []
        n_missing = n_wrong = 0
        expected: dict[str, list[int]] = {}  # part -> [chunks, tokens] the ledger's chunks give
        after = ""
        query = dialect.sql(
            f"SELECT {dialect.chunk_read}, k.doc, k.part, k.dl, k.parent_id FROM {{s}}chunks c"
            " JOIN {s}documents d ON d.id = c.parent_id LEFT JOIN {s}kw_docs k ON k.id = c.id"
            " WHERE d.state = ? AND c.id > ? ORDER BY c.id LIMIT ?"
        )
        postings_of = dialect.sql("SELECT doc, term, tf, dl, part FROM {s}kw_postings WHERE doc = ANY(?)")
        while True:
            rows = conn.execute(query, (COMPLETE, after, _BATCH)).fetchall()
            if not rows:
                break
            after = rows[-1][0]
            held: dict[int, list[tuple[str, int, int, str]]] = {}
            for doc, term, tf, dl, part in conn.execute(
                postings_of, ([r[6] for r in rows if r[6] is not None],)
            ):
                held.setdefault(int(doc), []).append((term, int(tf), int(dl), part))
            for r in rows:
                chunk = dialect.chunk(r[:6], False, lambda name: None)
                counts = Counter(tok(embedded_text(chunk.content, chunk.metadata)))
                dl = sum(counts.values())
                part = part_code(None if key is None else partition_group(user_metadata(chunk.metadata), key))
                entry = expected.setdefault(part, [0, 0])
                entry[0] += 1
                entry[1] += dl
                if r[6] is None:
                    n_missing += 1
                    if len(missing) < _LISTED:
                        missing.append(chunk.id)
                    continue
                postings = held.get(int(r[6]), [])
                why = None
                if (r[7], int(r[8]), r[9]) != (part, dl, chunk.parent_id):
                    why = f"length {r[8]} in partition {r[7]!r}, its text gives {dl} in {part!r}"
                elif {t: tf for t, tf, _, _ in postings} != dict(counts) or len(postings) != len(counts):
                    why = "its postings are not the terms of its text"
                elif any((pdl, ppart) != (dl, part) for _, _, pdl, ppart in postings):
                    why = "its postings carry another length or partition"
                if why is not None:
                    n_wrong += 1
                    if len(wrong) < _LISTED:
                        wrong.append(f"{chunk.id} ({why})")
        if n_missing:
            problems.append(f"{n_missing} live chunks have no postings ({_some(missing, n_missing)})")
        if n_wrong:
            problems.append(f"{n_wrong} chunks' postings do not match their text ({'; '.join(wrong)})")
        extra = [
            r[0]
            for r in conn.execute(
                dialect.sql(
                    "SELECT k.id FROM {s}kw_docs k WHERE NOT EXISTS (SELECT 1 FROM {s}chunks c"
                    " JOIN {s}documents d ON d.id = c.parent_id WHERE c.id = k.id AND d.state = ?)"
                    ' ORDER BY k.id COLLATE "C"'
                ),
                (COMPLETE,),
            )
        ]
        if extra:
            problems.append(
                f"{len(extra)} indexed chunks are not live chunks of the ledger ({_some(extra, len(extra))})"
            )
        stray = conn.execute(
            dialect.sql(
                "SELECT count(*) FROM {s}kw_postings p WHERE NOT EXISTS (SELECT 1 FROM {s}kw_docs k WHERE k.doc = p.doc)"
            )
        ).fetchone()
        if stray and int(stray[0]):
            problems.append(f"{int(stray[0])} postings belong to no indexed chunk")
        problems += _terms_problems(conn, dialect)
        stats = {
            str(p): (int(n), int(t))
            for p, n, t in conn.execute(dialect.sql("SELECT part, n_docs, total_len FROM {s}kw_stats"))
            if int(n) or int(t)
        }
        wanted = {p: (v[0], v[1]) for p, v in expected.items()}
        off = [
            f"{p or 'all'!r}: {stats.get(p, (0, 0))[0]} chunks, {stats.get(p, (0, 0))[1]} tokens recorded, "
            f"{wanted.get(p, (0, 0))[0]} and {wanted.get(p, (0, 0))[1]} in the ledger"
            for p in sorted(set(stats) | set(wanted))
            if stats.get(p, (0, 0)) != wanted.get(p, (0, 0))
        ]
        if off:
            problems.append(
                f"the statistics of {len(off)} partition groups are wrong ({'; '.join(off[:_LISTED])})"
            )
    return problems


def _terms_problems(conn: Any, dialect: PostgresDialect) -> list[str]:
    """Whether ``kw_terms`` holds each term's df as its postings count it (rows at 0 are none); not checked
    while a bulk load holds its additions back (:func:`terms_held`)."""
    if terms_held(conn, dialect):
        return []
    off = conn.execute(
        dialect.sql(
            "SELECT count(*) FROM (SELECT term, part, count(*) AS n FROM {s}kw_postings GROUP BY term, part) a"
            " FULL JOIN (SELECT term, part, df FROM {s}kw_terms WHERE df <> 0) b"
            ' ON b.term = a.term COLLATE "C" AND b.part = a.part WHERE a.n IS DISTINCT FROM b.df'
        )
    ).fetchone()
    n = int(off[0]) if off else 0
    return [f"the document frequencies of {n} terms are wrong (kw_terms)"] if n else []


def rebuild(dialect: PostgresDialect) -> int:
    """Build the postings and statistics again from the ledger's chunks (one transaction under the commit key:
    writes wait, searches see the old postings until it commits); returns how many chunks were indexed."""
    with dialect.writing() as tx:
        tx.execute("SELECT pg_advisory_xact_lock(%s)", (advisory_key("commit", dialect.schema),))
        row = tx.execute(dialect.sql("SELECT value FROM {s}info WHERE key = ?"), (INFO_KEY,)).fetchone()
        if row is None:
            raise ConfigurationError(
                f"ledger {dialect.name}: it keeps no engine-side keyword index to rebuild"
            )
        recorded = json.loads(row[0])
        ensure_terms(tx, dialect)
        for table in ("kw_postings", "kw_docs", "kw_stats", "kw_terms"):
            tx.execute(dialect.sql(f"DELETE FROM {{s}}{table}"))
        count = _index_stored(
            tx, dialect, tokenizer_from_dict(recorded["tokenizer"]), recorded.get("partition_key")
        )
    logger.info("ledger %s: keyword index rebuilt from %d chunks", dialect.name, count)
    return count


class EngineKeywordIndex:
    """The keyword leg scored in PostgreSQL (``location = LEDGER``: the ledger writes it in its transactions,
    every process reads the same postings); the search interface of
    :class:`~finderledge.keyword_store.KeywordStore`."""

    location = LEDGER

    def __init__(
        self, dialect: PostgresDialect, tokenizer: Tokenizer, k1: float, b: float, partition_key: str | None
    ):
        self.dialect = dialect
        self.tokenizer = tokenizer
        self.k1, self.b = float(k1), float(b)
        self.partition_key = partition_key
        self.path = None
        #: set aside the postings of common terms when they cannot change the top k (:meth:`_pruned`)
        self.prune = True
        self._size: tuple[float, int] = (-math.inf, 0)  # (when read, live chunks): whether pruning may pay

    # -- sizes ---------------------------------------------------------------------------------------
    def _stats(self, parts: Sequence[str] | None) -> tuple[int, int]:
        d = self.dialect
        query = "SELECT COALESCE(sum(n_docs), 0), COALESCE(sum(total_len), 0) FROM {s}kw_stats"
        args: list[Any] = []
        if parts is not None:
            query += " WHERE part = ANY(?)"
            args.append(list(parts))
        with d.reading() as conn:
            row = conn.execute(d.sql(query), args).fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def __len__(self) -> int:
        return self._stats(None)[0]

    def _parts(self) -> list[str]:
        with self.dialect.reading() as conn:
            return [
                r[0] for r in conn.execute(self.dialect.sql("SELECT part FROM {s}kw_stats WHERE n_docs > 0"))
            ]

    def _reached(self, value: str | PartitionFilter) -> list[str]:
        if isinstance(value, str):
            return [part_code(value)]
        return [p for p in self._parts() if value(group_of(p))]

    def partition_size(self, value: str | PartitionFilter) -> int:
        """Live chunks in partition ``value`` or in the partitions a filter reaches."""
        self._needs_key()
        return self._stats(self._reached(value))[0]

    def partition_ids(self, value: str | PartitionFilter) -> list[str]:
        """Ids of the live chunks in partition ``value`` (or those a filter reaches), sorted."""
        self._needs_key()
        d = self.dialect
        with d.reading() as conn:
            rows = conn.execute(
                d.sql('SELECT id FROM {s}kw_docs WHERE part = ANY(?) ORDER BY id COLLATE "C"'),
                (self._reached(value),),
            ).fetchall()
        return [r[0] for r in rows]

    def partition_sizes(self) -> dict[str, int]:
        """Live chunks per partition value."""
        self._needs_key()
        d = self.dialect
        with d.reading() as conn:
            rows = conn.execute(d.sql("SELECT part, n_docs FROM {s}kw_stats WHERE n_docs > 0")).fetchall()
        return {group_of(p): int(n) for p, n in rows if p.startswith("=")}  # type: ignore[misc]

    def _needs_key(self) -> None:
        if self.partition_key is None:
            raise ValueError("this keyword index has no partition_key")

    def ids(self) -> set[str]:
        """Ids of every indexed chunk (reads them all: for checks, never for a search)."""
        with self.dialect.reading() as conn:
            return {r[0] for r in conn.execute(self.dialect.sql("SELECT id FROM {s}kw_docs"))}

    # -- search --------------------------------------------------------------------------------------
    def _scope(self, flt: Mapping[str, Any] | None) -> tuple[list[str] | None, Mapping[str, Any] | None]:
        """The partition groups the statistics count (None: all) and the filter left to apply (None: none)."""
        key = self.partition_key
        if key is not None and flt:
            value = partition_of(flt, key)
            reach = partitions_of(flt, key) if value is None else None
            if value is not None or reach is not None:
                parts = self._reached(value if value is not None else reach)  # type: ignore[arg-type]
                return parts, None if pins_only(flt, key) else flt
        return None, flt or None

    def search(
        self, query: str, k: int = 10, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[str, float]]:
        """The ``k`` best chunks for ``query`` as ``(id, score)``, best first (scores > 0, ties by id)."""
        if k <= 0:
            return []
        return self._score(Counter(self.tokenizer(query)), k, filter)

    def search_many(
        self, queries: Sequence[str], k: int = 10, filter: Mapping[str, Any] | None = None
    ) -> list[list[tuple[str, float]]]:
        """:meth:`search` of each query."""
        return [self.search(q, k, filter) for q in queries]

    def get_scores(self, query: str, filter: Mapping[str, Any] | None = None) -> dict[str, float]:
        """The score of every chunk that matches ``query``."""
        return dict(self._score(Counter(self.tokenizer(query)), None, filter))

    def score_text(self, query: str, text: str) -> float:
        """The score ``text`` would get as a chunk of the whole corpus (not counted in its statistics)."""
        from ..keyword_store.scoring import score_text

        qcounts, dcounts = Counter(self.tokenizer(query)), Counter(self.tokenizer(text))
        dfs = self._dfs(list(qcounts), None)
        return score_text(qcounts, dcounts, self._stats(None), self.k1, self.b, lambda t: dfs.get(t, 0))

    def _dfs(self, terms: Sequence[str], parts: Sequence[str] | None) -> dict[str, int]:
        """Each term's df over ``parts`` (None: all): from ``kw_terms``, or counted from the postings while a
        bulk load holds its additions back (:func:`terms_held`, in the same snapshot)."""
        d = self.dialect
        args: list[Any] = [list(terms)]
        if parts is not None:
            args.append(list(parts))
        in_parts = " AND part = ANY(?)" if parts is not None else ""
        with d.snapshot(), d.reading() as conn:
            if terms_held(conn, d):
                query = "SELECT term, count(*) FROM {s}kw_postings WHERE term = ANY(?)" + in_parts
            else:
                query = "SELECT term, sum(df) FROM {s}kw_terms WHERE term = ANY(?)" + in_parts
            rows = conn.execute(d.sql(query + " GROUP BY term"), args).fetchall()
        return {t: int(n) for t, n in rows if int(n) > 0}

    def _score(
        self, qcounts: Mapping[str, int], k: int | None, flt: Mapping[str, Any] | None
    ) -> list[tuple[str, float]]:
        parts, rest = self._scope(flt)
        if not qcounts or (parts is not None and not parts):
            return []
        if k is not None and len(qcounts) > 1 and compile_filter(rest) is None and self._large():
            hits = self._pruned(qcounts, k, parts)
            if hits is not None:
                return hits
        return self._scored(qcounts, k, parts, rest)

    def _large(self) -> bool:
        """Whether pruning is on and the index holds enough chunks for it to pay (the count kept a while)."""
        if not self.prune:
            return False
        now = time.monotonic()
        if now - self._size[0] > _SIZE_TTL:
            self._size = (now, len(self))
        return self._size[1] >= _PRUNE_MIN_CHUNKS

    def _pruned(
        self, qcounts: Mapping[str, int], k: int, parts: Sequence[str] | None
    ) -> list[tuple[str, float]] | None:
        """The top ``k`` as :meth:`_scored` gives them, without scanning the postings of the common terms
        (MaxScore): a term adds less than its weight ``w`` (``tf / (tf + K) < 1``), so with the terms of least
        weight set aside ("non-essential", their weights summing to ``rest``), a chunk none of the others
        holds scores at most ``rest``.  The others' postings give every candidate a partial score; the
        candidates that can still reach the k-th best partial score get their full score (every term, read by
        chunk); if the k-th best full score exceeds ``rest`` no other chunk can enter the top ``k``.  None:
        nothing to set aside, or the bound does not hold (the caller scores every posting)."""
        d = self.dialect
        in_parts = " AND p.part = ANY(?)" if parts is not None else ""
        pargs: list[Any] = [list(parts)] if parts is not None else []
        terms = list(qcounts)
        with d.snapshot(), d.reading() as conn:  # one snapshot for the statements below
            # the statistics and each term's df (kw_terms: one look-up per term and part) and weight, as _scored
            # has them, and whether a bulk load holds its kw_terms additions back (terms_held, in this statement:
            # one round trip fewer), which makes them unusable here: then every posting is scored
            weights = conn.execute(
                d.sql(
                    "WITH h AS (SELECT EXISTS (SELECT 1 FROM {s}info WHERE key = ?) AS held),"
                    " st AS (SELECT sum(n_docs)::float8 AS n, sum(total_len)::float8 AS t FROM {s}kw_stats"
                    + (" WHERE part = ANY(?)" if parts is not None else "")
                    + "), q AS (SELECT * FROM unnest(?::text[], ?::float8[]) AS q(t, qtf)),"
                    " f AS MATERIALIZED (SELECT q.t AS term, (SELECT COALESCE(sum(p.df), 0) FROM {s}kw_terms p"
                    " WHERE p.term = q.t" + in_parts + ") AS df FROM q)"
                    " SELECT f.term, f.df, q.qtf * ln(1.0 + (st.n - f.df + 0.5) / (f.df + 0.5)) * (? + 1.0),"
                    " ?::float8 * ? / (st.t / st.n), h.held"
                    " FROM f JOIN q ON q.t = f.term CROSS JOIN st CROSS JOIN h"
                    " WHERE st.n > 0 AND st.t > 0 AND f.df > 0"
                ),
                [
                    bulk.POSTINGS_STATE_KEY,
                    *pargs,
                    terms,
                    [float(qcounts[t]) for t in terms],
                    *pargs,
                    self.k1,
                    self.k1,
                    self.b,
                ],
            ).fetchall()
            if len(weights) < 2 or weights[0][4]:
                return None
            c0, c1 = self.k1 * (1.0 - self.b), float(weights[0][3])
            ranked = sorted(
                ((float(w), int(df), t) for t, df, w, _, _ in weights), key=lambda x: (x[0], -x[1], x[2])
            )
            top = ranked[-1][0]
            rest = 0.0
            skipped = 0
            cut = 0
            for w, df, _ in ranked[
                :-1
            ]:  # the lightest terms, while together they weigh under half the heaviest
                if w < 0 or rest + w >= 0.5 * top:
                    break
                rest += w
                skipped += df
                cut += 1
            if skipped < _PRUNE_MIN_POSTINGS:
                return None
            essential = ranked[cut:]
            bound = rest * (1.0 + 1e-9) + 1e-12  # float rounding of the sums stays inside it
            contribution = "sum(q.w * p.tf / (p.tf + (?::float8 + ?::float8 * p.dl)))"
            cands = conn.execute(
                d.sql(
                    "WITH q AS (SELECT * FROM unnest(?::text[], ?::float8[]) AS q(t, w)),"
                    " s AS MATERIALIZED (SELECT p.doc, " + contribution + " AS score FROM q"
                    ' JOIN {s}kw_postings p ON p.term COLLATE "C" = q.t' + in_parts + " GROUP BY p.doc)"
                    " SELECT doc FROM s WHERE s.score + ? >= (SELECT min(score) FROM"
                    " (SELECT score FROM s ORDER BY score DESC LIMIT ?) x)"
                ),
                [[t for _, _, t in essential], [w for w, _, _ in essential], c0, c1, *pargs, bound, k],
            ).fetchall()
            if len(cands) < k:
                return None
            rows = conn.execute(
                d.sql(
                    "SELECT k.id, p.term, p.tf, p.dl FROM {s}kw_postings p JOIN {s}kw_docs k ON k.doc = p.doc"
                    " WHERE p.doc = ANY(?::bigint[]) AND p.term = ANY(?::text[])"
                ),
                [[int(r[0]) for r in cands], terms],
            ).fetchall()
        # each candidate's full score: the statement's float operations per term, added from 0.0 in the query's
        # order (the statement's sum() adds in its plan's order, so the last bit may differ; here equal texts
        # score exactly equal and ties break by id)
        weight = {t: w for w, _, t in ranked}
        found: dict[str, dict[str, float]] = {}
        for cid, term, tf, dl in rows:
            wt = weight.get(term)
            if wt is not None:
                found.setdefault(cid, {})[term] = wt * tf / (tf + (c0 + c1 * dl))
        full: list[tuple[str, float]] = []
        for cid, parts_of in found.items():
            score = 0.0
            for t in terms:
                if t in parts_of:
                    score += parts_of[t]
            full.append((cid, score))
        scores = sorted((s for _, s in full), reverse=True)
        if len(scores) < k or not scores[k - 1] > bound:
            return None
        theta = scores[k - 1]
        hits = [h for h in full if h[1] >= theta and h[1] > 0 and not math.isnan(h[1])]
        hits.sort(key=lambda h: (-h[1], h[0]))
        return hits[:k]

    def _scored(
        self,
        qcounts: Mapping[str, int],
        k: int | None,
        parts: Sequence[str] | None,
        rest: Mapping[str, Any] | None,
    ) -> list[tuple[str, float]]:
        """Every posting of the query's terms scored in one statement (the chunks scoring at least the k-th
        best score, or all of them with a filter left to check or without ``k``)."""
        k1, b = self.k1, self.b
        terms = list(qcounts)
        pred = compile_filter(rest)
        where, params = to_sql(rest, "v.metadata")
        d = self.dialect
        in_parts = " AND p.part = ANY(?)" if parts is not None else ""
        scored_join = ""
        if pred is not None:  # the filter's SQL has its own (%s) placeholders: not passed through d.sql
            scored_join = (
                d.sql(" JOIN {s}vectors v ON v.id = k.id AND (") + where + " OR v.exact_metadata IS NOT NULL)"
            )
        cols = ", v.metadata, v.exact_metadata" if pred is not None else ""
        # one statement, one snapshot: the scope's statistics, the idf of each term over the scope's postings,
        # each posting's contribution summed per chunk (the float operations of scoring.py), then the chunks
        # scoring at least the k-th best score (ties), by score and id
        sql = (
            "WITH st AS (SELECT sum(n_docs)::float8 AS n, sum(total_len)::float8 AS t FROM {s}kw_stats"
            + (" WHERE part = ANY(?)" if parts is not None else "")
            + "), q AS (SELECT * FROM unnest(?::text[], ?::float8[]) AS q(t, qtf)),"
            " p AS MATERIALIZED (SELECT p.term, p.doc, p.tf, p.dl FROM q JOIN {s}kw_postings p"
            ' ON p.term COLLATE "C" = q.t' + in_parts + "),"
            " w AS (SELECT f.term, q.qtf * ln(1.0 + (st.n - f.df + 0.5) / (f.df + 0.5)) * (? + 1.0) AS w,"
            " ?::float8 AS c0, ?::float8 * ? / (st.t / st.n) AS c1"
            " FROM (SELECT term, count(*) AS df FROM p GROUP BY term) f JOIN q ON q.t = f.term CROSS JOIN st"
            " WHERE st.n > 0 AND st.t > 0),"
            " s AS MATERIALIZED (SELECT p.doc, sum(w.w * p.tf / (p.tf + (w.c0 + w.c1 * p.dl))) AS score"
            " FROM p JOIN w ON w.term = p.term GROUP BY p.doc)"
            " SELECT k.id, s.score" + cols + " FROM s JOIN {s}kw_docs k ON k.doc = s.doc"
        )
        args: list[Any] = [list(parts)] if parts is not None else []
        args += [terms, [float(qcounts[t]) for t in terms]]
        if parts is not None:
            args.append(list(parts))
        args += [k1, k1 * (1.0 - b), k1, b, *params]
        tail = ""
        if k is not None and pred is None:
            tail += " WHERE s.score >= (SELECT min(score) FROM (SELECT score FROM s ORDER BY score DESC LIMIT ?) x)"
            args.append(k)
        tail += ' ORDER BY s.score DESC, k.id COLLATE "C"'
        with d.reading() as conn:
            rows = conn.execute(d.sql(sql) + scored_join + d.sql(tail), args).fetchall()
        hits: list[tuple[str, float]] = []
        for row in rows:
            if pred is not None:
                md = json.loads(row[3]) if row[3] is not None else row[2]
                if not pred(md):
                    continue
            score = float(row[1]) if row[1] is not None else 0.0
            if score > 0 and not math.isnan(score):
                hits.append((row[0], score))
        hits.sort(key=lambda h: (-h[1], h[0]))
        return hits if k is None else hits[:k]

    # -- the leg's life ------------------------------------------------------------------------------
    def flush(self) -> None:
        """Nothing to persist: the ledger's transactions wrote it."""

    def freeze(self) -> None:
        """Nothing is buffered here."""

    def close(self, *, flush: bool = True) -> None:
        """Nothing to close: reads use the ledger's connection pool."""


def open_engine_index(
    ledger: Any, tokenizer: Any, k1: float, b: float, partition_key: str | None
) -> EngineKeywordIndex:
    """The engine-side keyword leg of a :class:`~finderledge.ledgers.postgres.PostgresLedger` (enabled first)."""
    dialect = getattr(ledger, "dialect", None)
    if getattr(dialect, "postings", None) is None:
        raise ConfigurationError("setting 'keyword_index': 'engine' needs database_url (a PostgreSQL ledger)")
    recorded = enable(dialect, tokenizer, partition_key)
    return EngineKeywordIndex(dialect, tokenizer_from_dict(recorded["tokenizer"]), k1, b, partition_key)
