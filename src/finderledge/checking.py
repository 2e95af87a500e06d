"""``finderledge check``: verify a persist directory against its ledger, in plain words, changing nothing.

What is checked (see :func:`check_directory`):

* the directory: no fixed-name file or folder is a symbolic link (:mod:`finderledge.storage`);
* the ledger: ``PRAGMA integrity_check`` (every page; this grows with the ledger, so it runs here and not at
  every open), FinderLedge's tables, every row decodes (metadata JSON, embedding blobs of the recorded
  dimension, chunk ids that match their ``parent_id``), every chunk's document exists;
* each local index (BM25, FAISS) against the ledger: its files' checksums, the chunk ids it holds against
  those the ledger held at its checkpoint, and (sampled) that its vectors are the ledger's;
* a local store whose files a third-party library reads itself (Chroma, qdrant-client's local mode): every
  file against its seal (:mod:`finderledge.seals`), without opening the library (Chroma writes its files
  whenever it opens them, and qdrant-client unpickles its rows).

Repairs (``FinderLedge.check(repair=True)``) rebuild an index from the ledger; damaged ledger rows cannot
be rebuilt from anything, so the report says what to do about them.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import (
    FinderLedgeError,
    IncompatibleIndexError,
    IndexCorruptError,
    LockTimeoutError,
    UnsafePathError,
)
from .keyword_store import KeywordStore
from .ledgers.rows import (
    RowDamage,
    check_chunk_id,
    decode_chunk_metadata,
    decode_document_metadata,
    decode_embedding,
)
from .locking import WriteLock
from .seals import Seal
from .storage import Storage
from .vector_stores import chroma, qdrant
from .vector_stores.faiss import FaissVectorStore

__all__ = ["CheckReport", "check_directory", "repair"]

logger = logging.getLogger(__name__)

LEDGER_FILE = "ledger.sqlite3"
_LISTED = 20  # problems of one kind listed one by one; the rest are counted
_SAMPLED_VECTORS = 200
# local stores a third-party library reads itself: checked against their seals, with FinderLedge's own files
SEALED = {"chroma": chroma.OWN_FILES, "qdrant": qdrant.OWN_FILES}


@dataclass
class CheckReport:
    """What :func:`check_directory` found: ``problems`` (damage), ``notes`` (fine, but worth knowing),
    ``repaired`` and ``not_repaired`` (with ``repair=True``); each entry one sentence in plain words."""

    directory: str
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    not_repaired: list[str] = field(default_factory=list)
    damaged_indexes: dict[str, str] = field(default_factory=dict)  # "keyword"/"vector" -> why
    damaged_documents: dict[str, str] = field(default_factory=dict)  # document id -> why

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
        }

    def text(self) -> str:
        """The report as lines of plain text."""
        lines = [
            f"{self.directory}: " + ("no damage found" if self.clean else f"{len(self.problems)} problem(s)")
        ]
        for title, items in (
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
    documents: set[str] = set()
    bad: list[str] = []
    for doc_id, metadata in con.execute("SELECT id, metadata FROM documents"):
        documents.add(doc_id)
        try:
            decode_document_metadata(doc_id, metadata)
        except RowDamage as exc:
            report.damaged_documents.setdefault(doc_id, f"document {doc_id}: {exc}")
            bad.append(f"document {doc_id}: {exc}")
    orphans = 0
    for cid, parent, split, metadata, blob, text_kind, parent_metadata in con.execute(
        # a chunk may store its text and metadata as what its document's row says (schema version 5)
        "SELECT c.id, c.parent_id, c.split_index, c.metadata, c.embedding,"
        " CASE WHEN c.content = X'' THEN 'its document''s' ELSE typeof(c.content) END, d.metadata"
        " FROM chunks c LEFT JOIN documents d ON d.id = c.parent_id"
    ):
        try:
            check_chunk_id(cid, parent, split)
            if text_kind == "its document's" and parent_metadata is None:
                raise RowDamage(f"its text is its document's, and document {parent} is not in the ledger")
            if text_kind not in ("text", "its document's"):
                raise RowDamage(f"its text is a {text_kind} value, not text")
            decode_chunk_metadata(metadata, parent_metadata, cid, parent, int(split))
            if blob is not None:
                decode_embedding(blob, dimension)
        except RowDamage as exc:
            owner = cid.rpartition("-")[0] or cid
            report.damaged_documents.setdefault(owner, f"chunk {cid}: {exc}")
            bad.append(f"chunk {cid} (document {owner}): {exc}")
            continue
        if parent not in documents and "staged:" + parent not in info:  # staged: a big write under way
            orphans += 1
            if orphans <= _LISTED:
                bad.append(f"chunk {cid}: its document {parent} is not in the ledger")
    report.problems += [f"{ledger}: {b}" for b in bad[:_LISTED]]
    if len(bad) > _LISTED:
        report.problems.append(f"{ledger}: {len(bad) - _LISTED} more damaged rows")
    return info


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
            with _opened(folder, path, dimension) as store:
                have = store.ids()
                expected = _ids_at(con, int(record["seq"]))
                missing, extra = expected - have, have - expected
                if missing or extra:
                    raise IndexCorruptError(
                        path,
                        f"holds {len(have)} chunks; the ledger held {len(expected)} at its checkpoint "
                        f"({len(missing)} missing, {len(extra)} not in the ledger)",
                    )
                if leg == "vector":
                    _check_vectors(con, store, path, sorted(have))
        except (IndexCorruptError, IncompatibleIndexError) as exc:
            report.problems.append(f"{leg} index: {exc}; the ledger can rebuild it (check --repair)")
            report.damaged_indexes[leg] = str(exc)
        except FinderLedgeError as exc:
            report.problems.append(f"{leg} index at {path}: {exc}")
    for aside in sorted(p.name for p in root.iterdir() if ".corrupt-" in p.name):
        report.notes.append(
            f"{aside}: a damaged index moved aside earlier (kept for inspection; rebuilt since)"
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
def _opened(folder: str, path: Path, dimension: int | None) -> Iterator[Any]:
    """The index in ``path`` opened read-only, every checksum verified."""
    if folder == "bm25":
        store: Any = KeywordStore(path, verify=True)
        try:
            yield store
        finally:
            store.close(flush=False)
        return
    if dimension is None:
        raise IndexCorruptError(path, "the ledger records no embedding dimension for it")
    store = FaissVectorStore(path, dimension=dimension, verify=True)
    try:
        yield store
    finally:
        with suppress(Exception):
            store.close()


def _check_vectors(con: sqlite3.Connection, store: Any, path: Path, ids: list[str]) -> None:
    """A sample of the index's vectors must be the ledger's: each chunk its own nearest neighbour."""
    step = max(1, len(ids) // _SAMPLED_VECTORS)
    for cid in ids[::step][:_SAMPLED_VECTORS]:
        row = con.execute("SELECT embedding FROM chunks WHERE id=?", (cid,)).fetchone()
        if row is None or row[0] is None or len(row[0]) % 4:
            continue  # reported with the ledger's rows
        query = np.frombuffer(row[0], dtype="<f4")
        hits = store.search(query, 5)
        if not any(hit == cid and score >= 0.999 for hit, score in hits):
            raise IndexCorruptError(path, f"the vector of chunk {cid} is not the ledger's")


def repair(report: CheckReport, rebuild: Callable[[str, str], None]) -> CheckReport:
    """Rebuild each damaged index with ``rebuild(leg, reason)``; say what the ledger cannot rebuild."""
    for leg, why in report.damaged_indexes.items():
        try:
            rebuild(leg, why)
        except (FinderLedgeError, OSError) as exc:
            report.not_repaired.append(f"{leg} index: rebuilding it failed ({exc})")
        else:
            report.repaired.append(f"{leg} index: moved aside and rebuilt from the ledger")
    for doc_id, why in report.damaged_documents.items():
        report.not_repaired.append(
            f"{why}: the ledger is the only copy, so it cannot be rebuilt; the document is left out of "
            f"results until you add it again or remove it (finderledge remove {doc_id})"
        )
    if any("restore it from a backup" in p for p in report.problems):
        report.not_repaired.append("the ledger itself is damaged: restore it from a backup")
    return report
