"""Damaged or crafted persist directories: never harm anything outside, never destroy data inside.

Every test starts from a real FinderLedge directory (the example folder, each vector store), damages or
crafts one file the way a torn disk or a hostile archive would, and checks that opening it either refuses
with a :class:`~finderledge.errors.FinderLedgeError` (the ledger, which nothing can rebuild) or moves the
damaged index aside and rebuilds it from the ledger, with the same answers as before.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from finderledge import FinderLedge
from finderledge.cli.commands import main
from finderledge.errors import FinderLedgeError, IndexCorruptError, LedgerCorruptError
from finderledge.storage.durable import manifest_checksum, npy_bytes

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "data"
QUERIES = [
    "How long is a password reset link valid?",
    "返金の申請期限",
    "upload large files resume",
    "retry backoff",
]
MODES = ("hybrid", "keyword", "vector")
LEDGER = "ledger.sqlite3"
SEGMENT = "seg-00000000"


# ---------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------
def _answers(fl: FinderLedge) -> dict[str, Any]:
    out: dict[str, Any] = {
        f"{q}|{m}": [r.id for r in fl.search(q, search_mode=m, k=5)] for q in QUERIES for m in MODES
    }
    out["count"] = fl.count()
    return out


def _tree(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (links not followed) with a digest of its content."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = "link:" + os.readlink(path)
            elif path.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _open(root: Path, minilm: Any, **kwargs: Any) -> FinderLedge:
    return FinderLedge(root, embedding=minilm, show_progress=False, **kwargs)


def _asides(root: Path, name: str) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.name.startswith(f"{name}.corrupt-"))


def _manifest(index_dir: Path) -> dict[str, Any]:
    return json.loads((index_dir / "manifest.json").read_text(encoding="utf-8"))


def _write_manifest(index_dir: Path, manifest: dict[str, Any]) -> None:
    """Write a manifest whose checksum vouches for it (a crafted one recomputes it, as anybody can)."""
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    (index_dir / "manifest.json").write_text(
        json.dumps({**body, "checksum": manifest_checksum(body)}), encoding="utf-8"
    )


def _info(data: bytes) -> dict[str, int]:
    return {"bytes": len(data), "crc32": zlib.crc32(data)}


def _replace_segment_file(index_dir: Path, fname: str, data: bytes, segment: int = 0) -> None:
    """Replace a file of a segment and make the manifest vouch for it (size, CRC32, checksum)."""
    manifest = _manifest(index_dir)
    entry = manifest["segments"][segment]
    (index_dir / "segments" / entry["name"] / fname).write_bytes(data)
    entry["files"][fname] = _info(data)
    _write_manifest(index_dir, manifest)


def _leaf_pages(db: Path, table: str) -> list[int]:
    """The leaf pages of ``table`` (read from a copy: a reader of a WAL database leaves files behind)."""
    copy = db.with_name(db.name + ".copy")
    shutil.copyfile(db, copy)
    con = sqlite3.connect(copy)
    try:
        return [
            r[0]
            for r in con.execute(
                "SELECT pageno FROM dbstat WHERE name=? AND pagetype='leaf' ORDER BY pageno", (table,)
            )
        ]
    except sqlite3.OperationalError:
        pytest.skip("this SQLite has no dbstat table")
    finally:
        con.close()
        copy.unlink()


def _spoil_text(db: Path, table: str, needle: bytes) -> int:
    """Put an invalid UTF-8 byte into the middle of ``needle`` in a live row of ``table`` (same size);
    returns its offset."""
    pages = _leaf_pages(db, table)
    data = bytearray(db.read_bytes())
    size = int.from_bytes(data[16:18], "big")
    for page in pages:
        at = data.rfind(needle, (page - 1) * size, page * size)  # cells fill a page from its end
        if at >= 0:
            data[at + len(needle) // 2] = 0xFF
            db.write_bytes(bytes(data))
            return at + len(needle) // 2
    raise AssertionError(f"{needle!r} not found in {table}")


OPEN_SCRIPT = """
import json, sys
from finderledge import FinderLedge
fl = FinderLedge(sys.argv[1], show_progress=False)
out = {f"{q}|{m}": [r.id for r in fl.search(q, search_mode=m, k=5)] for q in json.loads(sys.argv[2])
       for m in ("hybrid", "keyword", "vector")}
out["count"] = fl.count()
fl.close()
print(json.dumps(out))
"""


def _open_in_subprocess(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(OPEN_SCRIPT), str(root), json.dumps(QUERIES)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


# ---------------------------------------------------------------------------------------------------
# Fixtures: one directory built per vector store, copied for every test
# ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="session", params=["chroma", "faiss"])
def template(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, minilm: Any
) -> tuple[str, Path, dict[str, Any]]:
    kind = str(request.param)
    base = tmp_path_factory.mktemp(f"template-{kind}")
    data = base / "data"
    shutil.copytree(EXAMPLES, data)
    root = base / "index"
    fl = FinderLedge(root, vector_store=kind, embedding=minilm, show_progress=False)
    fl.add_document(data)
    expected = _answers(fl)
    fl.close()
    return kind, root, expected


@pytest.fixture
def built(template: tuple[str, Path, dict[str, Any]], tmp_path: Path) -> tuple[str, Path, dict[str, Any]]:
    """A private copy of the built directory: (vector store, directory, expected answers)."""
    kind, source, expected = template
    root = tmp_path / "index"
    shutil.copytree(source, root, symlinks=True)
    return kind, root, expected


def _victim(root: Path) -> Path:
    """Another FinderLedge directory next to ``root`` (``../other``), which nothing may touch."""
    other = root.parent / "other"
    shutil.copytree(root, other, symlinks=True)
    return other


# ---------------------------------------------------------------------------------------------------
# 1. A lost ledger next to indexes: refused, nothing changed
# ---------------------------------------------------------------------------------------------------
def _lose_ledger(path: Path, damage: str) -> None:
    if damage == "missing":
        path.unlink()
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "not sqlite":
        path.write_bytes(b"this is not a database, just some text that was written over it\n" * 100)
    elif damage == "blank sqlite":  # a valid SQLite file without the ledger's tables
        path.unlink()
        sqlite3.connect(path).close()
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE unrelated (x)")
        con.commit()
        con.close()


@pytest.mark.parametrize("damage", ["missing", "empty", "not sqlite", "blank sqlite"])
def test_lost_ledger_next_to_indexes_is_refused_and_changes_nothing(
    built: tuple[str, Path, dict[str, Any]], minilm: Any, damage: str
) -> None:
    kind, root, expected = built
    ledger = root / LEDGER
    saved = ledger.read_bytes()
    _lose_ledger(ledger, damage)
    before = _tree(root)
    with pytest.raises(IndexCorruptError) as info:
        _open(root, minilm)
    assert isinstance(info.value, FinderLedgeError)
    message = str(info.value)
    assert str(ledger) in message and "backup" in message  # names the file and what to do
    assert _tree(root) == before  # no ledger created, no index emptied, no setting forgotten
    ledger.write_bytes(saved)  # restoring the ledger brings everything back
    fl = _open(root, minilm)
    try:
        assert fl.settings.vector_store == kind
        assert _answers(fl) == expected
    finally:
        fl.close()


def test_a_fresh_ledger_next_to_full_indexes_never_empties_them(
    built: tuple[str, Path, dict[str, Any]], minilm: Any, tmp_path: Path
) -> None:
    """A valid but new ledger (from another directory) is not the one the indexes were built from."""
    kind, root, expected = built
    fresh = _open(tmp_path / "fresh", minilm, vector_store=kind)
    fresh.close()
    saved = (root / LEDGER).read_bytes()
    shutil.copyfile(tmp_path / "fresh" / LEDGER, root / LEDGER)
    kept = ["bm25", "faiss"] if kind == "faiss" else ["bm25"]  # Chroma rewrites its own files on every open
    indexes = {name: _tree(root / name) for name in kept}
    fl = _open(root, minilm)
    try:
        with pytest.raises(IndexCorruptError, match="never recorded a document"):
            fl.vector_store  # noqa: B018 - opened lazily: the index is compared with the ledger, and refused
    finally:
        fl.close()
    assert {name: _tree(root / name) for name in kept} == indexes
    if kind == "chroma":
        from finderledge.vector_stores.chroma import ChromaVectorStore

        chroma = ChromaVectorStore(root / "chroma")
        assert len(chroma) == expected["count"]["chunks"]
        chroma.close()
    (root / LEDGER).write_bytes(saved)
    for extra in ("-wal", "-shm"):
        (root / (LEDGER + extra)).unlink(missing_ok=True)
    fl = _open(root, minilm)
    try:
        assert _answers(fl) == expected
    finally:
        fl.close()


@pytest.mark.parametrize("lost", ["bm25 folder", "vector folder", "bm25 manifest", "vector manifest"])
def test_a_lost_index_folder_or_manifest_is_refilled_from_the_ledger(
    built: tuple[str, Path, dict[str, Any]], minilm: Any, lost: str
) -> None:
    kind, root, expected = built
    folder = root / ("bm25" if lost.startswith("bm25") else kind)
    if lost.endswith("folder"):
        shutil.rmtree(folder)
    elif kind == "chroma" and lost == "vector manifest":
        (folder / "chroma.sqlite3").unlink()
        for sub in folder.iterdir():
            if sub.is_dir():
                shutil.rmtree(sub)
    else:
        (folder / "manifest.json").unlink()
    fl = _open(root, minilm)
    try:
        assert _answers(fl) == expected  # not silently empty
    finally:
        fl.close()


@pytest.mark.parametrize("layout", ["new", "existing empty", "empty index folders"])
def test_a_new_or_empty_directory_still_opens(
    tmp_path: Path, minilm: Any, store_kind: str, layout: str
) -> None:
    root = tmp_path / "index"
    if layout != "new":
        root.mkdir()
    if layout == "empty index folders":
        for name in ("bm25", store_kind):
            (root / name).mkdir()
    fl = _open(root, minilm, vector_store=store_kind)
    try:
        fl.add_texts(["Glaciers retreat in warm summers."])
        assert fl.search("glaciers", k=1)[0].content.startswith("Glaciers")
    finally:
        fl.close()


# ---------------------------------------------------------------------------------------------------
# 2. Flipped bytes in the ledger: reported naming the file (at open, or when first read), and by check
# ---------------------------------------------------------------------------------------------------
def test_flipped_bytes_in_the_ledger_are_reported_at_first_use_and_by_check(
    built: tuple[str, Path, dict[str, Any]], minilm: Any
) -> None:
    """Every page is checked by ``finderledge check`` (PRAGMA integrity_check); opening checks what costs
    the same at any size (issue 27: quick_check at every open took seconds at 100k chunks)."""
    _, root, _ = built
    ledger = root / LEDGER
    _flip_chunk_pages(ledger)  # before the fix: it opened, then searches raised sqlite3.DatabaseError
    before = _tree(root)
    error: BaseException | None
    try:
        fl = _open(root, minilm)
    except FinderLedgeError as exc:
        error = exc
    else:
        try:
            error = _raised(lambda: fl.search(QUERIES[0], search_mode="keyword"))
        finally:
            fl.close()
    assert isinstance(error, LedgerCorruptError), error
    assert str(ledger) in str(error) and "backup" in str(error)
    assert {k: v for k, v in _tree(root).items() if not k.startswith(LEDGER + "-")} == {
        k: v for k, v in before.items() if not k.startswith(LEDGER + "-")
    }
    assert main(["check", "--dir", str(root)]) == 1


def _flip_chunk_pages(ledger: Path) -> None:
    """Flip the b-tree page headers of the chunks table: reading a chunk fails."""
    pages = _leaf_pages(ledger, "chunks")
    data = bytearray(ledger.read_bytes())
    size = int.from_bytes(data[16:18], "big")
    for page in pages:
        for i in range(8):
            data[(page - 1) * size + i] ^= 0xFF
    ledger.write_bytes(bytes(data))


def test_ledger_damage_found_after_open_is_reported_as_such(
    built: tuple[str, Path, dict[str, Any]], minilm: Any
) -> None:
    _, root, _ = built
    fl = _open(root, minilm)
    try:
        _flip_chunk_pages(root / LEDGER)
        errors: list[BaseException] = []
        worker = threading.Thread(  # a new thread reads through a new connection: from the damaged file
            target=lambda: errors.append(_raised(lambda: fl.search(QUERIES[0], search_mode="keyword")))
        )
        worker.start()
        worker.join()
        assert isinstance(errors[0], LedgerCorruptError), errors
        assert str(root / LEDGER) in str(errors[0])
    finally:
        fl.close()


def _raised(call: Any) -> BaseException | None:
    try:
        call()
    except BaseException as exc:  # noqa: BLE001 - handed to the test thread
        return exc
    return None


# ---------------------------------------------------------------------------------------------------
# 3. Paths read from index files never leave the index directory
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "craft",
    [
        "relative segment name",
        "absolute segment name",
        "segment name of a differing index",
        "tombstone file outside",
    ],
)
def test_crafted_bm25_paths_never_reach_outside(
    built: tuple[str, Path, dict[str, Any]], minilm: Any, craft: str
) -> None:
    _, root, expected = built
    other = _victim(root)
    precious = root.parent / "precious.npy"
    precious.write_bytes(npy_bytes(np.array([0], dtype="<i4")))
    bm25 = root / "bm25"
    manifest = _manifest(bm25)
    entry = manifest["segments"][0]
    if craft == "relative segment name":
        entry["name"] = f"../../../other/bm25/segments/{entry['name']}"
    elif craft == "absolute segment name":
        entry["name"] = str(other / "bm25" / "segments" / entry["name"])
    elif craft == "segment name of a differing index":
        docs = other / "bm25" / "segments" / entry["name"] / "docs.npy"
        docs.write_bytes(docs.read_bytes() + b"\0")  # the files do not match: opening fails on them
        entry["name"] = f"../../../other/bm25/segments/{entry['name']}"
    else:  # tombstones at ../../precious.npy: one chunk "deleted", counts adjusted to match
        lens = np.load(bm25 / "segments" / entry["name"] / "lens.npy")
        entry["deletes"] = {"file": "../../precious.npy", "count": 1, **_info(precious.read_bytes())}
        manifest["live_count"] -= 1
        manifest["total_length"] -= int(lens[0])
    _write_manifest(bm25, manifest)
    crafted = _tree(bm25)
    outside = _tree(other), precious.read_bytes()
    fl = _open(root, minilm)
    try:
        assert _answers(fl) == expected
        for doc in fl.list_documents()[:3]:  # tombstones, a segment rewrite and garbage collection
            fl.remove_document(str(doc.id))
        fl.add_texts(["Glaciers retreat in warm summers."])
    finally:
        fl.close()
    assert (_tree(other), precious.read_bytes()) == outside  # nothing outside was written, moved or deleted
    aside = _asides(root, "bm25")
    assert len(aside) == 1 and _tree(aside[0]) == crafted  # the crafted index is kept for inspection


@pytest.mark.parametrize("manifest", ["kept", "removed"])
@pytest.mark.parametrize("index", ["bm25", "faiss"])
def test_a_symlinked_segments_folder_is_not_followed(
    built: tuple[str, Path, dict[str, Any]], minilm: Any, index: str, manifest: str
) -> None:
    kind, root, expected = built
    if index == "faiss" and kind != "faiss":
        pytest.skip("the FAISS layout only")
    other = _victim(root)
    shutil.rmtree(root / index / "segments")
    (root / index / "segments").symlink_to(other / index / "segments", target_is_directory=True)
    if manifest == "removed":  # a new, empty index would write its first segment through the link
        (root / index / "manifest.json").unlink()
    outside = _tree(other)
    fl = _open(root, minilm)
    try:
        assert _answers(fl) == expected
        for doc in fl.list_documents()[:3]:
            fl.remove_document(str(doc.id))
        fl.add_texts(["Glaciers retreat in warm summers."])
    finally:
        fl.close()
    assert _tree(other) == outside
    assert len(_asides(root, index)) == 1


# ---------------------------------------------------------------------------------------------------
# 4. Sizes are checked against the file before anything is allocated
# ---------------------------------------------------------------------------------------------------
def _huge_npy(dtype: str, length: int, data: bytes) -> bytes:
    """An .npy header claiming ``length`` items, followed by ``data`` (a few bytes)."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": (length,)})
    return buf.getvalue() + data


@pytest.mark.parametrize("target", ["faiss seq.npy", "faiss tombstones", "bm25 tombstones"])
def test_npy_shapes_are_checked_against_the_file_size(
    built: tuple[str, Path, dict[str, Any]], minilm: Any, target: str
) -> None:
    kind, root, expected = built
    if target.startswith("faiss") and kind != "faiss":
        pytest.skip("the FAISS layout only")
    index = root / target.split()[0]
    claimed = 600_000_000  # 4.8 GB of int64 / 2.4 GB of int32
    manifest = _manifest(index)
    entry = manifest["segments"][0]
    if target == "faiss seq.npy":
        _replace_segment_file(index, "seq.npy", _huge_npy("<i8", claimed, b"\0" * 64))
    else:
        gen = manifest["generation"]
        data = _huge_npy("<i8" if kind == "faiss" else "<i4", claimed, b"\0" * 8)
        rel = f"deletes/{entry['name']}.{gen:08d}.npy"
        (index / rel).write_bytes(data)
        if target == "faiss tombstones":
            entry["deletes"] = {"gen": gen, "count": claimed, **_info(data)}
        else:
            entry["deletes"] = {"file": rel, "count": claimed, **_info(data)}
        _write_manifest(index, manifest)
    tracemalloc.start()
    try:
        fl = _open(root, minilm)
        try:
            fl.vector_store  # noqa: B018 - opened lazily
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            fl.close()
    finally:
        tracemalloc.stop()
    assert peak < 500 << 20, f"opening allocated {peak >> 20} MB"
    assert len(_asides(root, index.name)) == 1
    fl = _open(root, minilm)
    try:
        assert _answers(fl) == expected
    finally:
        fl.close()


# ---------------------------------------------------------------------------------------------------
# 5. Every parse or validation error of an index file is IndexCorruptError: moved aside, rebuilt
# ---------------------------------------------------------------------------------------------------
NESTED = ("[" * 100_000 + "]" * 100_000).encode()


def _craft(root: Path, kind: str, craft: str) -> str:
    """Apply ``craft``; returns the index folder it damaged."""
    bm25 = root / "bm25"
    if craft == "bm25 manifest nested":
        (bm25 / "manifest.json").write_bytes(NESTED)
    elif craft == "bm25 tokenizer unknown argument":
        manifest = _manifest(bm25)
        manifest["tokenizer"]["bogus"] = 1
        _write_manifest(bm25, manifest)
    elif craft == "bm25 tokenizer bad value":
        manifest = _manifest(bm25)
        manifest["tokenizer"]["language"] = "klingon"
        _write_manifest(bm25, manifest)
    elif craft == "bm25 tokenizer nested":
        manifest = _manifest(bm25)
        manifest["tokenizer"]["stopwords"] = json.loads("[" * 500 + "]" * 500)
        _write_manifest(bm25, manifest)
    elif craft == "bm25 terms.json nested":
        _replace_segment_file(bm25, "terms.json", NESTED)
    elif craft == "faiss manifest nested":
        (root / "faiss" / "manifest.json").write_bytes(NESTED)
    elif craft == "faiss ids.json nested":
        _replace_segment_file(root / "faiss", "ids.json", NESTED)
    return craft.split()[0]


CRAFTS = [
    "bm25 manifest nested",
    "bm25 tokenizer unknown argument",
    "bm25 tokenizer bad value",
    "bm25 tokenizer nested",
    "bm25 terms.json nested",
    "faiss manifest nested",
    "faiss ids.json nested",
]


@pytest.mark.parametrize("craft", CRAFTS)
def test_crafted_index_files_are_moved_aside_and_rebuilt(
    built: tuple[str, Path, dict[str, Any]], minilm: Any, craft: str
) -> None:
    kind, root, expected = built
    if craft.startswith("faiss") and kind != "faiss":
        pytest.skip("the FAISS layout only")
    index = _craft(root, kind, craft)
    crafted = _tree(root / index)
    fl = _open(root, minilm)
    try:
        assert _answers(fl) == expected
    finally:
        fl.close()
    aside = _asides(root, index)
    assert len(aside) == 1 and _tree(aside[0]) == crafted


def test_bm25_metadata_that_is_not_objects_is_moved_aside_and_rebuilt(
    built: tuple[str, Path, dict[str, Any]], minilm: Any
) -> None:
    _, root, expected = built
    bm25 = root / "bm25"
    n = _manifest(bm25)["segments"][0]["n_docs"]
    _replace_segment_file(bm25, "meta.json", json.dumps(list(range(n))).encode())
    flt = {"doc_type_detected": "markdown"}
    fl = _open(root, minilm)
    try:
        # the metadata is read lazily: the first filtered search finds the damage, moves the index aside,
        # rebuilds it from the ledger and answers
        hits = fl.search(QUERIES[0], search_mode="keyword", filter=flt)
        assert hits and all(h.metadata["doc_type_detected"] == "markdown" for h in hits)
        assert _answers(fl) == expected
    finally:
        fl.close()
    assert len(_asides(root, "bm25")) == 1


# ---------------------------------------------------------------------------------------------------
# 6. A damaged chroma.sqlite3 is moved aside and rebuilt (run in a subprocess: Chroma may abort it)
# ---------------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    "damage",
    ["migrations text (Rust panic)", "queued vector metadata (log replay)", "schema text (process abort)"],
)
def test_a_damaged_chroma_database_is_moved_aside_and_rebuilt(
    built: tuple[str, Path, dict[str, Any]], damage: str
) -> None:
    kind, root, expected = built
    if kind != "chroma":
        pytest.skip("the Chroma layout only")
    db = root / "chroma" / "chroma.sqlite3"
    if damage.startswith("migrations"):
        spoiled = _spoil_text(db, "migrations", b"CREATE TABLE")
    elif damage.startswith("queued"):
        spoiled = _spoil_text(db, "embeddings_queue", b'{"')
    else:
        spoiled = _spoil_text(db, "sqlite_schema", b"CREATE TABLE")
    proc = _open_in_subprocess(root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == json.loads(json.dumps(expected))
    aside = _asides(root, "chroma")
    assert len(aside) == 1
    kept = (aside[0] / "chroma.sqlite3").read_bytes()  # Chroma itself writes a few bytes before it fails
    assert kept[spoiled] == 0xFF


# ---------------------------------------------------------------------------------------------------
# 7. Two move-asides in the same second both succeed and both are kept
# ---------------------------------------------------------------------------------------------------
def test_move_asides_in_the_same_second_do_not_collide(
    built: tuple[str, Path, dict[str, Any]], minilm: Any
) -> None:
    _, root, expected = built
    now = time.time()
    earlier = []
    for dt in range(3):  # what a move-aside named by the second alone would have made this second
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now + dt))
        previous = root / f"bm25.corrupt-{stamp}"
        previous.mkdir()
        (previous / "manifest.json").write_text("an earlier damaged index", encoding="utf-8")
        earlier.append(previous)
    (root / "bm25" / "manifest.json").write_bytes(b'{"format": "finderledge.keyword_sto')
    fl = _open(root, minilm)
    try:
        assert _answers(fl) == expected
    finally:
        fl.close()
    (root / "bm25" / "manifest.json").write_bytes(b"torn again")
    fl = _open(root, minilm)
    try:
        assert _answers(fl) == expected
    finally:
        fl.close()
    aside = _asides(root, "bm25")
    assert len(aside) == 3  # the two new ones, none overwritten, and the newest earlier one (bounded)
    assert (
        sum((p / "manifest.json").read_text(encoding="utf-8") == "an earlier damaged index" for p in aside)
        == 1
    )
    contents = {(p / "manifest.json").read_bytes() for p in aside if p not in earlier}
    assert contents == {b'{"format": "finderledge.keyword_sto', b"torn again"}


def test_a_vector_index_error_never_moves_folders_above_the_directory(tmp_path: Path, minilm: Any) -> None:
    """A persist directory inside a folder named like an index (``…/faiss/index``): only its own index moves."""
    root = tmp_path / "faiss" / "index"
    fl = _open(root, minilm, vector_store="faiss")
    fl.add_texts(["Glaciers retreat in warm summers."])
    fl.close()
    (root / "faiss" / "manifest.json").write_bytes(b"torn")
    fl = _open(root, minilm)
    try:
        assert fl.search("glaciers", search_mode="vector", k=1)[0].content.startswith("Glaciers")
    finally:
        fl.close()
    assert (tmp_path / "faiss").is_dir() and (tmp_path / "faiss" / "index" / LEDGER).exists()
    assert len(_asides(root, "faiss")) == 1


@pytest.fixture(autouse=True)
def _no_stray_asides(tmp_path: Path) -> Iterator[None]:
    yield
    assert not list(tmp_path.parent.glob("*.corrupt-*")), "an index above the test directory was moved"
