"""``finderledge check``: verify a persist directory against its ledger, in plain words, changing nothing.

What is checked (see :func:`check_directory`):

* the directory: no fixed-name file or folder is a symbolic link (:mod:`finderledge.storage.files`);
* the ledger: ``PRAGMA integrity_check`` (every page; this grows with the ledger, so it runs here and not at
  every open), FinderLedge's tables, every row decodes (metadata JSON, embedding blobs of the recorded
  dimension, chunk ids that match their ``parent_id``), every chunk's text matches the hash stored with it,
  every chunk's document exists;
* each local index (BM25, FAISS) against the ledger: its files' checksums, the chunk ids it holds against
  those the ledger held at its checkpoint, and (sampled) that its vectors are the ledger's;
* a local store whose files a third-party library reads itself (Chroma, qdrant-client's local mode): every
  file against its seal (:mod:`finderledge.storage.seals`), without opening the library (Chroma writes its files
  whenever it opens them, and qdrant-client unpickles its rows).

In Postgres mode (:func:`check_database`), the keyword index the database keeps (``keyword_index="engine"``:
postings and per-partition statistics, :mod:`finderledge.ledgers.postings`) against the ledger's live chunks;
``repair`` builds it again from them.

Repairs (``FinderLedge.check(repair=True)``) rebuild an index from the ledger, which holds every vector: no
embedding model is needed (:class:`finderledge.replica.ledger_vectors.LedgerVectors` stands in for it).  Damaged ledger rows cannot be rebuilt
from anything, so the report says what to do about them.  A full disk is no damage: what it kept from being
checked or repaired is listed in ``disk_full``.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import (
    FinderLedgeError,
    IncompatibleIndexError,
    IndexCorruptError,
    LockTimeoutError,
    StorageFullError,
    UnsafePathError,
)
from ..keyword_store import KeywordStore
from ..ledgers.base import REMOVED, REMOVED_GRACE_SECONDS, content_id
from ..ledgers.rows import (
    RowDamage,
    check_chunk_id,
    decode_chunk_metadata,
    decode_document_metadata,
    decode_embedding,
)
from ..metadata import embedded_text
from ..storage.files import Storage, full_disk_error
from ..storage.locking import WriteLock
from ..storage.seals import Seal
from ..vector_stores import chroma, qdrant
from ..vector_stores.ann_index import FLAT
from ..vector_stores.faiss import FaissVectorStore

__all__ = ["ENGINE_KEYWORD", "CheckReport", "check_database", "check_directory", "repair", "repair_database"]

logger = logging.getLogger(__name__)

LEDGER_FILE = "ledger.sqlite3"
_LISTED = 20  # problems of one kind listed one by one; the rest are counted
_SAMPLED_VECTORS = 200
# local stores a third-party library reads itself: checked against their seals, with FinderLedge's own files
SEALED = {"chroma": chroma.OWN_FILES, "qdrant": qdrant.OWN_FILES, "qdrant_keyword": qdrant.OWN_FILES}
QDRANT_KEYWORD = "index:keyword:qdrant_keyword"  # the keyword leg in a local Qdrant (keyword_index="engine")
_SQLITE_IOERR = 10


@dataclass
class CheckReport:
    """What :func:`check_directory` found: ``problems`` (damage), ``notes`` (fine, but worth knowing),
    ``repaired`` and ``not_repaired`` (with ``repair=True``), ``disk_full`` (what a full disk kept from being
    checked or repaired: no damage); each entry one sentence in plain words."""

    directory: str
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    not_repaired: list[str] = field(default_factory=list)
    damaged_indexes: dict[str, str] = field(default_factory=dict)  # "keyword"/"vector" -> why
    damaged_documents: dict[str, str] = field(default_factory=dict)  # document id -> why
    disk_full: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """No damage found."""
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "directory": self.directory,
            "clean": self.clean,
            "problems": self.problems,
            "notes": self.notes,
            "repaired": self.repaired,
            "not_repaired": self.not_repaired,
            "disk_full": self.disk_full,
        }

    def text(self) -> str:
        """The report as lines of plain text."""
        found = "no damage found" if self.clean else f"{len(self.problems)} problem(s)"
        if self.disk_full:
            found += "; the disk is full, so not everything could be checked or repaired"
        lines = [f"{self.directory}: {found}"]
        for title, items in (
            ("disk full", self.disk_full),
            ("problem", self.problems),
            ("repaired", self.repaired),
            ("not repaired", self.not_repaired),
            ("note", self.notes),
        ):
            lines += [f"  {title}: {item}" for item in items]
        return "\n".join(lines)


def check_directory(directory: str | Path) -> CheckReport:
    """Check the persist directory ``directory`` (read-only: nothing is written, moved or rebuilt)."""
    root = Path(directory)
    report = CheckReport(str(root))
    try:
        Storage(root).check_fixed_names()
    except UnsafePathError as exc:
        report.problems.append(str(exc))
        return report  # nothing in it is opened through a link
    ledger = root / LEDGER_FILE
    if not ledger.is_file():
        report.problems.append(f"{ledger} is missing: there is nothing to check the indexes against")
        return report
    try:
        con = sqlite3.connect(f"{ledger.resolve().as_uri()}?{_read_only(ledger)}", uri=True)
    except sqlite3.Error as exc:
        full = _disk_full(exc, root)
        if full is not None:
            report.disk_full.append(_not_checked(ledger, full))
        else:
            report.problems.append(f"{ledger} cannot be opened ({exc})")
        return report
    with closing(con):
        info = _check_ledger(con, ledger, report)
        if info is None:
            return report
        _check_indexes(root, con, info, report)
    return report


# -- the ledger ---------------------------------------------------------------------------------------
def _read_only(ledger: Path) -> str:
    """URI parameters that read the ledger without writing a byte: a ledger closed cleanly (no ``-wal``
    or ``-shm`` beside it) is read as immutable, since even a ``mode=ro`` connection creates both files."""
    journals = [ledger.with_name(ledger.name + suffix) for suffix in ("-wal", "-shm")]
    return "mode=ro" if any(j.exists() for j in journals) else "mode=ro&immutable=1"


def _check_ledger(con: sqlite3.Connection, ledger: Path, report: CheckReport) -> dict[str, str] | None:
    """Pages, tables and rows of the ledger; returns its info table, or None when it cannot be read."""
    try:
        rows = con.execute("PRAGMA integrity_check").fetchall()
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        full = _disk_full(exc, ledger.parent)
        if full is not None:  # reading a WAL ledger needs room for its shared-memory file
            report.disk_full.append(_not_checked(ledger, full))
        else:
            report.problems.append(f"{ledger} is damaged ({exc}); restore it from a backup")
        return None
    if rows != [("ok",)]:
        detail = "; ".join(str(r[0]) for r in rows[:3]).replace("\n", " ")[:500]
        report.problems.append(f"{ledger} is damaged ({detail}); restore it from a backup")
        return None
    try:
        info = {str(k): str(v) for k, v in con.execute("SELECT key, value FROM info")}
    except sqlite3.DatabaseError:
        report.problems.append(f"{ledger} holds no FinderLedge tables")
        return None
    dimension = int(info["embedding_dimension"]) if info.get("embedding_dimension", "").isdigit() else None
    documents: dict[str, str] = {}  # id -> state
    bad: list[str] = []
    for doc_id, metadata, state in con.execute("SELECT id, metadata, state FROM documents"):
        documents[doc_id] = state
        try:
            decode_document_metadata(doc_id, metadata)
        except RowDamage as exc:
            _damaged_row(report, bad, doc_id, state, f"document {doc_id}", exc)
    orphans = 0
    for cid, parent, split, metadata, blob, text_kind, parent_metadata, text, text_hash in con.execute(
        # a chunk may store its text and metadata as what its document's row says (schema version 5)
        "SELECT c.id, c.parent_id, c.split_index, c.metadata, c.embedding,"
        " CASE WHEN c.content = X'' THEN 'its document''s' ELSE typeof(c.content) END, d.metadata,"
        " CASE WHEN c.content = X'' THEN d.content ELSE c.content END, c.text_hash"
        " FROM chunks c LEFT JOIN documents d ON d.id = c.parent_id"
    ):
        try:
            check_chunk_id(cid, parent, split)
            if text_kind == "its document's" and parent_metadata is None:
                raise RowDamage(f"its text is its document's, and document {parent} is not in the ledger")
            if text_kind not in ("text", "its document's") or not isinstance(text, str):
                raise RowDamage(f"its text is a {text_kind} value, not text")
            decoded = decode_chunk_metadata(metadata, parent_metadata, cid, parent, int(split))
            _check_text_hash(embedded_text(text, decoded), text_hash)
            if blob is not None:
                decode_embedding(blob, dimension)
        except RowDamage as exc:
            owner = _owner(cid)
            _damaged_row(report, bad, owner, documents.get(owner), f"chunk {cid} (document {owner})", exc)
            continue
        if parent not in documents and "staged:" + parent not in info:  # staged: a big write under way
            orphans += 1
            if orphans <= _LISTED:
                bad.append(f"chunk {cid}: its document {parent} is not in the ledger")
    report.problems += [f"{ledger}: {b}" for b in bad[:_LISTED]]
    if len(bad) > _LISTED:
        report.problems.append(f"{ledger}: {len(bad) - _LISTED} more damaged rows")
    return info


def _disk_full(exc: BaseException, root: Path) -> StorageFullError | None:
    """The :class:`StorageFullError` for ``exc`` when it is the disk being full: said so, or an SQLite I/O
    error (``SQLITE_IOERR_SHMSIZE`` …) while the file system holding ``root`` has no free block."""
    full = full_disk_error(exc, root)
    code = getattr(exc, "sqlite_errorcode", None)
    if full is None and code is not None and code & 0xFF == _SQLITE_IOERR:
        with suppress(OSError):
            if os.statvfs(root).f_bavail == 0:
                full = StorageFullError(
                    root, f"{exc} ({getattr(exc, 'sqlite_errorname', code)}) with no free space"
                )
    return full


def _owner(chunk_id: str) -> str:
    """The document a chunk id belongs to (``<document id>-NNNN``)."""
    return chunk_id.rpartition("-")[0] or chunk_id


def _not_checked(path: Path, full: StorageFullError) -> str:
    return (
        f"{path}: not checked, the disk is full ({full.detail}); nothing was changed: free some space and "
        "run the check again"
    )


def _damaged_row(
    report: CheckReport, bad: list[str], doc_id: str, state: str | None, row: str, exc: RowDamage
) -> None:
    """Record damage in a row of document ``doc_id``; a removed document's rows are only kept for searches
    still under way (see REMOVED_GRACE_SECONDS), so their damage is a note, not a problem."""
    if state == REMOVED:
        note = (
            f"{row}: {exc}; the document was removed, and its rows are deleted with the other removed rows "
            f"at the first write {REMOVED_GRACE_SECONDS / 60:.0f} minutes or more after the removal"
        )
        if note not in report.notes:
            report.notes.append(note)
        return
    report.damaged_documents.setdefault(doc_id, f"{row.split(' (')[0]}: {exc}")
    bad.append(f"{row}: {exc}")


def _check_text_hash(text: str, stored: Any) -> None:
    """A chunk's embedded text (its text, below its ``context`` if any) must hash to the hash written with it
    (16 bytes, or 32 hex characters in a version 4 ledger); text changed in the ledger afterwards does not."""
    if isinstance(stored, bytes) and len(stored) == 16:
        stored = stored.hex()
    if not isinstance(stored, str) or len(stored) != 32:
        return  # no hash of a form this version wrote: nothing to compare with
    if content_id(text) != stored.lower():
        raise RowDamage(
            "its text does not match the hash written with it (it was changed in the ledger afterwards)"
        )


# -- the indexes --------------------------------------------------------------------------------------
def _ids_at(con: sqlite3.Connection, seq: int) -> set[str]:
    """The chunk ids the ledger held at change ``seq`` (what an index checkpointed there holds)."""
    rows = con.execute(
        "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.parent_id "
        "WHERE COALESCE(d.added_seq, 0) <= ? AND (d.state = 'complete' OR d.removed_seq > ?)",
        (seq, seq),
    )
    return {r[0] for r in rows}


def _check_indexes(root: Path, con: sqlite3.Connection, info: dict[str, str], report: CheckReport) -> None:
    settings = json.loads(info.get("settings") or "{}")
    kind = settings.get("vector_store") or "faiss"
    legs = [("keyword", "index:keyword", "bm25")]
    if QDRANT_KEYWORD in info or (root / "qdrant_keyword").is_dir():  # the keyword leg in a local Qdrant
        legs.append(("keyword", QDRANT_KEYWORD, "qdrant_keyword"))
        if "index:keyword" not in info and not (root / "bm25").is_dir():
            legs.pop(0)  # only that one: no local BM25 to report missing
    if kind == "faiss" or (kind in SEALED and not settings.get(f"{kind}_url")):
        legs.append(("vector", f"index:vector:{kind}", kind))
    dimension = int(info["embedding_dimension"]) if info.get("embedding_dimension", "").isdigit() else None
    for leg, key, folder in legs:
        path = root / folder
        record = json.loads(info[key]) if key in info else None
        if not path.is_dir() or record is None:
            report.notes.append(
                f"{path} has no checkpoint: it is rebuilt from the ledger when the index is opened"
            )
            continue
        if folder in SEALED:  # checked against its seal; the library itself is never opened here
            try:
                with _quiet(folder, path):
                    Seal(path, SEALED[folder]).verify()
            except IndexCorruptError as exc:
                report.problems.append(f"{leg} index: {exc}; the ledger can rebuild it (check --repair)")
                report.damaged_indexes[leg] = str(exc)
            except LockTimeoutError as exc:
                report.notes.append(f"{path} was not checked: another process kept writing it ({exc})")
            continue
        try:
            with _opened(folder, path, dimension, settings.get("vector_index") or FLAT) as store:
                # a document with a damaged row may be left out of an index rebuilt since: not the index's fault
                have = {i for i in store.ids() if _owner(i) not in report.damaged_documents}
                expected = {
                    i for i in _ids_at(con, int(record["seq"])) if _owner(i) not in report.damaged_documents
                }
                missing, extra = expected - have, have - expected
                if missing or extra:
                    raise IndexCorruptError(
                        path,
                        f"holds {len(have)} chunks; the ledger held {len(expected)} at its checkpoint "
                        f"({len(missing)} missing, {len(extra)} not in the ledger)",
                    )
                if leg == "vector":
                    _check_vectors(con, store, path, sorted(have), dimension or 0)
        except (IndexCorruptError, IncompatibleIndexError) as exc:
            report.problems.append(f"{leg} index: {exc}; the ledger can rebuild it (check --repair)")
            report.damaged_indexes[leg] = str(exc)
        except Exception as exc:  # noqa: BLE001 - whatever a damaged index makes its library raise is reported
            full = full_disk_error(exc, root)
            if full is not None:  # no damage: it could not be opened to be checked
                report.disk_full.append(_not_checked(path, full))
            elif isinstance(exc, FinderLedgeError):
                report.problems.append(f"{leg} index at {path}: {exc}")
            else:
                why = f"it cannot be read ({type(exc).__name__}: {str(exc)[:300]})"
                report.problems.append(
                    f"{leg} index at {path}: {why}; the ledger can rebuild it (check --repair)"
                )
                report.damaged_indexes[leg] = why
    for aside in sorted(p.name for p in root.iterdir() if ".corrupt-" in p.name):
        report.notes.append(
            f"{aside}: a damaged index moved aside earlier, kept for inspection (nothing reads it; you may "
            "delete it)"
        )
    if kind in SEALED:
        report.notes.append(
            f"{kind}'s own files carry no checksums: each was compared with the seal FinderLedge recorded"
        )


@contextmanager
def _quiet(folder: str, path: Path) -> Iterator[None]:
    """Chroma's lock held (a read hold: no owner note), so that no process writes its files while they are
    compared with their seal (qdrant-client's local mode serves one process at a time anyway)."""
    if folder != "chroma":
        yield
        return
    with WriteLock(path, 30.0).hold("checking the Chroma index", note=False):
        yield


@contextmanager
def _opened(folder: str, path: Path, dimension: int | None, vector_index: str = FLAT) -> Iterator[Any]:
    """The index in ``path`` opened read-only, every checksum verified: the FAISS store opened with the
    directory's recorded ``vector_index``, so that its approximate index file is read (and checked) too."""
    if folder == "bm25":
        store: Any = KeywordStore(path, verify=True)
        try:
            yield store
        finally:
            store.close(flush=False)
        return
    if dimension is None:
        raise IndexCorruptError(path, "the ledger records no embedding dimension for it")
    store = FaissVectorStore(path, dimension=dimension, vector_index=vector_index)  # checks every CRC32
    store.set_vector_index(FLAT)  # checked: the vectors are then compared by exact search (never written)
    try:
        yield store
    finally:
        with suppress(Exception):
            store.close()


def _check_vectors(con: sqlite3.Connection, store: Any, path: Path, ids: list[str], dimension: int) -> None:
    """A sample of the index's vectors must be the ledger's: each chunk its own nearest neighbour."""
    step = max(1, len(ids) // _SAMPLED_VECTORS)
    for cid in ids[::step][:_SAMPLED_VECTORS]:
        row = con.execute("SELECT embedding FROM chunks WHERE id=?", (cid,)).fetchone()
        if row is None or not isinstance(row[0], bytes) or len(row[0]) != 4 * dimension:
            continue  # reported with the ledger's rows
        query = np.frombuffer(row[0], dtype="<f4")
        hits = store.search(query, 5)
        if not any(hit == cid and score >= 0.999 for hit, score in hits):
            raise IndexCorruptError(path, f"the vector of chunk {cid} is not the ledger's")


#: the leg :func:`check_database` reports: the keyword index PostgreSQL keeps
ENGINE_KEYWORD = "engine-side keyword"


def check_database(ledger: Any) -> CheckReport:
    """Check what a PostgreSQL ledger keeps besides its rows (read-only): the engine-side keyword index's
    postings and statistics against the live chunks (:func:`finderledge.ledgers.postings.verify`)."""
    from ..ledgers import postings

    dialect = ledger.dialect
    report = CheckReport(dialect.name)
    found = postings.verify(dialect)
    if found is None:
        report.notes.append(
            "the database keeps no keyword index (keyword_index='local': each process builds its own replica)"
        )
    elif found:
        why = "; ".join(found)
        report.problems += [
            f"{ENGINE_KEYWORD} index: {p}; the ledger can rebuild it (check --repair)" for p in found
        ]
        report.damaged_indexes[ENGINE_KEYWORD] = why
    report.notes.append(
        "the ledger's own rows are kept by PostgreSQL (checked by its tools, not here); vectors live in its "
        "vectors table"
    )
    return report


def repair_database(ledger: Any, report: CheckReport) -> CheckReport:
    """Build the damaged engine-side keyword index of ``report`` again from the ledger's chunks."""
    from ..ledgers import postings

    return repair(
        report,
        lambda leg, why: postings.rebuild(ledger.dialect),
        done="rebuilt from the ledger's chunks",
    )


def repair(
    report: CheckReport,
    rebuild: Callable[[str, str], object],
    done: str = "moved aside and rebuilt from the ledger",
) -> CheckReport:
    """Rebuild each damaged index with ``rebuild(leg, reason)``; say what the ledger cannot rebuild."""
    for leg, why in report.damaged_indexes.items():
        try:
            rebuild(leg, why)
        except (FinderLedgeError, OSError) as exc:
            full = full_disk_error(exc, report.directory)
            if full is not None:
                report.disk_full.append(
                    f"{leg} index: its rebuild could not be saved, the disk is full ({full.detail}); the "
                    "ledger still holds everything: free some space and run check --repair again (or open "
                    "the directory, which rebuilds it)"
                )
            else:
                report.not_repaired.append(f"{leg} index: rebuilding it failed ({exc})")
        else:
            report.repaired.append(f"{leg} index: {done}")
    for doc_id, why in report.damaged_documents.items():
        report.not_repaired.append(
            f"{why}: the ledger is the only copy of this row, so it cannot be rebuilt; add the document "
            f"again, or remove it (finderledge remove {doc_id})"
        )
    if any("restore it from a backup" in p for p in report.problems):
        report.not_repaired.append("the ledger itself is damaged: restore it from a backup")
    return report
