"""FaissVectorStore persistence: round trips, incremental flushes, merging, crash safety, corruption."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import pytest

from finderledge.errors import IncompatibleIndexError, IndexCorruptError
from finderledge.storage.durable import manifest_checksum
from finderledge.vector_stores.faiss import FaissVectorStore, VectorIndexCorruptError

D = 8


class Crash(BaseException):
    """Stands for the process dying: nothing in the store may catch it."""


def _vectors(rng: np.random.Generator, n: int, d: int = D) -> np.ndarray:
    return rng.standard_normal((n, d)).astype(np.float32)


def _normalised(v: np.ndarray) -> np.ndarray:
    v = np.ascontiguousarray(np.asarray(v, dtype=np.float32))
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def _snapshot(root: Path) -> dict[str, tuple[int, int, int]]:
    out = {}
    for p in root.rglob("*"):
        if p.is_file():
            st = p.stat()
            out[str(p.relative_to(root))] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return out


def _bytes_written(
    before: Mapping[str, tuple[int, int, int]], after: Mapping[str, tuple[int, int, int]]
) -> int:
    """Sum of the sizes of files that are new or changed (every write goes to a new file or inode)."""
    return sum(v[0] for p, v in after.items() if before.get(p) != v)


def _manifest(root: Path) -> dict[str, Any]:
    return json.loads((root / "manifest.json").read_text(encoding="utf-8"))


def _write_manifest(root: Path, manifest: dict[str, Any], *, fix_checksum: bool = True) -> None:
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    if fix_checksum:
        manifest = {**body, "checksum": manifest_checksum(body)}
    (root / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")


def _disk_state(root: Path) -> dict[str, tuple[np.ndarray, dict[str, Any]]]:
    """Every live row on disk, read straight from the files: id -> (vector, metadata)."""
    out: dict[str, tuple[np.ndarray, dict[str, Any]]] = {}
    for seg in _manifest(root)["segments"]:
        sdir = root / "segments" / seg["name"]
        ids = json.loads((sdir / "ids.json").read_text(encoding="utf-8"))
        metas = json.loads((sdir / "meta.json").read_text(encoding="utf-8"))
        vectors = np.load(sdir / "vectors.npy", allow_pickle=False)
        live = np.ones(len(ids), dtype=bool)
        if seg["deletes"]:
            name = f"{seg['name']}.{seg['deletes']['gen']:08d}.npy"
            live[np.load(root / "deletes" / name, allow_pickle=False)] = False
        for i in np.flatnonzero(live).tolist():
            assert ids[i] not in out
            out[ids[i]] = (vectors[i], metas[i])
    return out


def _unreferenced(root: Path) -> set[str]:
    """Entries under segments/ and deletes/ the manifest does not name (must be empty after a flush)."""
    manifest = _manifest(root)
    names = {s["name"] for s in manifest["segments"]}
    dels = {f"{s['name']}.{s['deletes']['gen']:08d}.npy" for s in manifest["segments"] if s["deletes"]}
    return {p.name for p in (root / "segments").iterdir() if p.name not in names} | {
        p.name for p in (root / "deletes").iterdir() if p.name not in dels
    }


def _state(store: FaissVectorStore, seed: int = 99) -> tuple[Any, ...]:
    """What a caller can observe: ids, and results for fixed queries with and without filters."""
    rng = np.random.default_rng(seed)
    queries = _vectors(rng, 5, store.dimension)
    return (
        sorted(store.ids()),
        len(store),
        [store.search(q, 7) for q in queries],
        [store.search(q, 5, {"group": 1}) for q in queries],
        [store.search(q, 5, {"$or": [{"group": 0}, {"tag": "b"}]}) for q in queries],
    )


class Reference:
    """What the store must hold, and the results of the old single-index store (insertion order)."""

    def __init__(self, d: int = D) -> None:
        self.d = d
        self.rows: dict[str, tuple[np.ndarray, dict[str, Any]]] = {}

    def add(self, ids: list[str], vectors: np.ndarray, metas: list[dict[str, Any]]) -> None:
        normalised = _normalised(vectors)
        for sid, vec, md in zip(ids, normalised, metas):
            self.rows.pop(sid, None)  # an upsert moves the row to the end, like a delete + add
            self.rows[sid] = (vec, dict(md))

    def delete(self, ids: list[str]) -> None:
        for sid in ids:
            self.rows.pop(sid, None)

    def search(self, q: np.ndarray, k: int, flt: Mapping[str, Any] | None = None) -> list[tuple[str, float]]:
        from finderledge.filters import compile_filter

        if not self.rows:
            return []
        ids = list(self.rows)
        index = faiss.IndexIDMap2(faiss.IndexFlatIP(self.d))
        index.add_with_ids(np.stack([self.rows[i][0] for i in ids]), np.arange(len(ids), dtype=np.int64))
        query = np.asarray(q, dtype=np.float32).reshape(1, -1)
        query = query / max(float(np.linalg.norm(query)), 1e-12)
        params, limit = None, len(ids)
        if flt:
            pred = compile_filter(flt)
            assert pred is not None
            allowed = np.array([n for n, i in enumerate(ids) if pred(self.rows[i][1])], dtype=np.int64)
            if len(allowed) == 0:
                return []
            params, limit = faiss.SearchParameters(sel=faiss.IDSelectorBatch(allowed)), len(allowed)
        scores, found = index.search(query, min(k, limit), params=params)
        return [(ids[int(i)], float(s)) for s, i in zip(scores[0], found[0]) if i >= 0]


def _fill(store: FaissVectorStore, ref: Reference | None, ids: list[str], rng: np.random.Generator) -> None:
    vectors = _vectors(rng, len(ids), store.dimension)
    metas = [{"group": int(g), "tag": "ab"[int(g) % 2], "none": None} for g in rng.integers(0, 3, len(ids))]
    store.add(ids, vectors, metas)
    if ref is not None:
        ref.add(ids, vectors, metas)


# ---------------------------------------------------------------------------------------------------
# Round trip and equality with the single-index behaviour
# ---------------------------------------------------------------------------------------------------
def test_round_trip(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    store, ref = FaissVectorStore(tmp_path / "f", dimension=D), Reference()
    _fill(store, ref, [f"c{i}" for i in range(300)], rng)
    store.flush()
    _fill(store, ref, [f"c{i}" for i in range(250, 400)], rng)  # 50 upserts, 100 new
    store.delete(["c3", "c7", "c260", "missing"])
    ref.delete(["c3", "c7", "c260"])
    store.flush()
    expected = _state(store)
    reopened = FaissVectorStore(tmp_path / "f", dimension=D)
    assert _state(reopened) == expected
    assert reopened.ids() == set(ref.rows) and len(reopened) == len(ref.rows) == 397
    q = _vectors(rng, 1)[0]
    assert reopened.search(q, 10) == ref.search(q, 10)
    assert reopened.search(q, 10, {"group": 2}) == ref.search(q, 10, {"group": 2})
    assert all(dict(ref.rows)[i][1]["group"] == 2 for i, _ in reopened.search(q, 50, {"group": 2}))
    assert reopened.search(q, 5, {"group": 7}) == []
    on_disk = _disk_state(tmp_path / "f")
    assert set(on_disk) == set(ref.rows)
    for sid, (vec, md) in ref.rows.items():
        assert np.array_equal(on_disk[sid][0], vec) and on_disk[sid][1] == md
    reopened.close()


def test_ties_keep_insertion_order_after_reopen(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    store, ref = FaissVectorStore(tmp_path / "f", dimension=D), Reference()
    same = np.repeat(_vectors(rng, 1), 12, axis=0)
    for batch in (["t5", "t1", "t9"], ["t0", "t7"], ["t3", "t1", "t8"]):  # t1 is moved to the end
        store.add(batch, same[: len(batch)], [{"group": 1}] * len(batch))
        ref.add(batch, same[: len(batch)], [{"group": 1}] * len(batch))
        store.flush()
    store.delete(["t0"])
    ref.delete(["t0"])
    store.flush()
    reopened = FaissVectorStore(tmp_path / "f", dimension=D)
    for k in (1, 3, 7):
        assert store.search(same[0], k) == reopened.search(same[0], k) == ref.search(same[0], k)


def test_in_memory_store_and_input_checks() -> None:
    store = FaissVectorStore(dimension=D)
    store.add(["a", "b", "a"], np.eye(3, D), [{"n": 1}, {"n": 2}, {"n": 3}])  # the last "a" wins
    assert store.ids() == {"a", "b"}
    assert [i for i, _ in store.search(np.eye(3, D)[2], 3)] == ["a", "b"]
    assert store.search(np.eye(3, D)[2], 3, {"n": 1}) == []
    store.flush()  # no path: nothing to do
    with pytest.raises(ValueError):
        store.add(["x"], np.ones((1, D + 1)), [{}])
    with pytest.raises(ValueError):
        store.add(["x", "y"], np.ones((2, D)), [{}])
    assert store.search(np.ones(D), 0) == []


# ---------------------------------------------------------------------------------------------------
# Incremental flushes, merging, compaction
# ---------------------------------------------------------------------------------------------------
def test_flush_writes_bytes_in_proportion_to_the_changes(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    root = tmp_path / "f"
    store = FaissVectorStore(root, dimension=16)
    _fill(store, None, [f"chunk-{i:06d}" for i in range(20_000)], rng)
    s0 = _snapshot(tmp_path)
    store.flush()
    s1 = _snapshot(tmp_path)
    full = _bytes_written(s0, s1)
    assert full > 20_000 * 16 * 4

    _fill(store, None, ["one-more"], rng)
    store.flush()
    s2 = _snapshot(tmp_path)
    assert 0 < _bytes_written(s1, s2) < 0.01 * full

    store.delete(["chunk-000123"])
    store.flush()
    s3 = _snapshot(tmp_path)
    assert 0 < _bytes_written(s2, s3) < 0.01 * full

    _fill(store, None, ["chunk-000500"], rng)  # an upsert: a tombstone plus a one-row segment
    store.flush()
    assert 0 < _bytes_written(s3, _snapshot(tmp_path)) < 0.01 * full
    assert _unreferenced(root) == set()
    assert len(FaissVectorStore(root, dimension=16)) == 20_000


def test_random_cycles_match_a_reference(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    root = tmp_path / "f"
    store, ref = FaissVectorStore(root, dimension=D), Reference()
    max_segments = 0
    for cycle in range(80):
        n_add = int(rng.choice([1, 3, 20, 150]))
        _fill(store, ref, [f"k{int(x)}" for x in np.unique(rng.integers(0, 3000, n_add))], rng)
        if ref.rows and rng.random() < 0.7:
            victims = [
                str(x)
                for x in rng.choice(
                    list(ref.rows), size=min(len(ref.rows), int(rng.integers(1, 60))), replace=False
                )
            ]
            store.delete(victims + ["never-there"])
            ref.delete(victims)
        store.flush()
        max_segments = max(max_segments, len(_manifest(root)["segments"]))
        if cycle % 20 == 19:
            on_disk = _disk_state(root)
            assert set(on_disk) == set(ref.rows) == store.ids()
            for sid, (vec, md) in ref.rows.items():
                assert np.array_equal(on_disk[sid][0], vec) and on_disk[sid][1] == md
            assert _unreferenced(root) == set()
            reopened = FaissVectorStore(root, dimension=D)
            assert _state(reopened) == _state(store)
            q = _vectors(rng, 1)[0]
            assert store.search(q, 10) == ref.search(q, 10)
            assert store.search(q, 10, {"tag": "a"}) == ref.search(q, 10, {"tag": "a"})
            store = reopened  # go on with the reopened store
    # tiers of 8x: at most 7 segments per tier, and few tiers for a few thousand rows
    assert max_segments <= 7 * 5
    assert len(_manifest(root)["segments"]) <= 7 * 5


def test_small_flushes_are_merged(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    root = tmp_path / "f"
    store = FaissVectorStore(root, dimension=D)
    counts = []
    for i in range(200):
        _fill(store, None, [f"r{i}"], rng)
        store.flush()
        counts.append(len(_manifest(root)["segments"]))
    assert max(counts) <= 7 * 3  # 1-7, 8-63, 64-511 rows: at most 7 of each
    assert sum(s["rows"] for s in _manifest(root)["segments"]) == 200
    expected = _state(store)
    assert _state(FaissVectorStore(root, dimension=D)) == expected


def test_segment_with_many_deletions_is_rewritten(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    root = tmp_path / "f"
    store = FaissVectorStore(root, dimension=D)
    _fill(store, None, [f"r{i}" for i in range(1000)], rng)
    store.flush()
    (first,) = _manifest(root)["segments"]
    store.delete([f"r{i}" for i in range(200)])  # 20 %: tombstones only
    store.flush()
    (seg,) = _manifest(root)["segments"]
    assert seg["name"] == first["name"] and seg["deletes"]["count"] == 200
    store.delete([f"r{i}" for i in range(200, 400)])  # 40 %: rewritten without them
    store.flush()
    (seg,) = _manifest(root)["segments"]
    assert seg["name"] != first["name"] and seg["deletes"] is None and seg["rows"] == 600
    assert not (root / "segments" / first["name"]).exists() and _unreferenced(root) == set()
    expected = _state(store)
    assert _state(FaissVectorStore(root, dimension=D)) == expected
    store.delete(list(store.ids()))
    store.flush()
    assert _manifest(root)["segments"] == [] and len(FaissVectorStore(root, dimension=D)) == 0


def test_a_reader_survives_another_writers_garbage_collection(tmp_path: Path) -> None:
    rng = np.random.default_rng(15)
    root = tmp_path / "f"
    writer = FaissVectorStore(root, dimension=D)
    _fill(writer, None, [f"r{i}" for i in range(500)], rng)
    writer.flush()
    reader = FaissVectorStore(root, dimension=D)  # another process, in effect
    expected = _state(reader)
    writer.delete([f"r{i}" for i in range(300)])  # the segment is rewritten and the old one deleted
    writer.flush()
    assert _unreferenced(root) == set() and len(_manifest(root)["segments"]) == 1
    assert _state(reader) == expected  # filters included: nothing is read from the deleted files


def test_close_releases_without_flushing_and_the_store_stays_usable(tmp_path: Path) -> None:
    rng = np.random.default_rng(16)
    root = tmp_path / "f"
    store = FaissVectorStore(root, dimension=D)
    _fill(store, None, [f"r{i}" for i in range(100)], rng)
    store.flush()
    _fill(store, None, ["unflushed"], rng)
    store.close()
    assert "unflushed" not in FaissVectorStore(root, dimension=D).ids()  # flush() persists, close() does not
    store.delete([f"r{i}" for i in range(50)])  # rewrites the segment: its vectors are mapped again
    store.flush()
    assert _state(FaissVectorStore(root, dimension=D)) == _state(store)


# ---------------------------------------------------------------------------------------------------
# Crash safety
# ---------------------------------------------------------------------------------------------------
def _crash_setup(root: Path) -> FaissVectorStore:
    """An index with a large segment and seven 10-row segments (one tier below merging)."""
    rng = np.random.default_rng(6)
    store = FaissVectorStore(root, dimension=D)
    _fill(store, None, [f"big{i}" for i in range(100)], rng)
    store.flush()
    for j in range(7):
        _fill(store, None, [f"s{j}-{i}" for i in range(10)], rng)
        store.flush()
    return store


def _crash_changes(store: FaissVectorStore) -> None:
    """A flush of these writes a tombstone file, a new segment that triggers a merge, and the manifest."""
    rng = np.random.default_rng(7)
    store.delete(["big3", "s2-4"])
    _fill(store, None, [f"n{i}" for i in range(10)] + ["big5"], rng)


@pytest.fixture
def count_calls(monkeypatch: pytest.MonkeyPatch) -> Callable[[str, int | None], list[int]]:
    """Patch ``os.<name>`` to count its calls and raise :class:`Crash` on call number ``crash_at``."""

    def install(name: str, crash_at: int | None) -> list[int]:
        real = getattr(os, name)
        calls = [0]

        def patched(*args: Any, **kwargs: Any) -> Any:
            calls[0] += 1
            if calls[0] == crash_at:
                raise Crash(f"{name} #{crash_at}")
            return real(*args, **kwargs)

        monkeypatch.setattr(os, name, patched)
        return calls

    return install


def test_a_crash_at_any_fsync_leaves_the_old_or_the_new_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count_calls: Callable[[str, int | None], list[int]]
) -> None:
    base = tmp_path / "base"
    store = _crash_setup(base)
    old_state = _state(store)
    _crash_changes(store)
    new_state = _state(store)
    assert new_state != old_state
    probe = tmp_path / "probe"
    shutil.copytree(base, probe)
    probe_store = FaissVectorStore(probe, dimension=D)
    _crash_changes(probe_store)
    calls = count_calls("fsync", None)
    probe_store.flush()
    n_fsync = calls[0]
    monkeypatch.undo()
    assert n_fsync >= 8
    outcomes = set()
    for crash_at in range(1, n_fsync + 1):
        root = tmp_path / f"crash{crash_at}"
        shutil.copytree(base, root)
        crashing = FaissVectorStore(root, dimension=D)
        _crash_changes(crashing)
        manifest_before = (root / "manifest.json").read_bytes()
        count_calls("fsync", crash_at)
        with pytest.raises(Crash):
            crashing.flush()
        monkeypatch.undo()
        committed = (root / "manifest.json").read_bytes() != manifest_before
        assert _state(FaissVectorStore(root, dimension=D)) == (new_state if committed else old_state)
        outcomes.add(committed)
        crashing.flush()  # the same store finishes the job
        assert _state(FaissVectorStore(root, dimension=D)) == new_state
        assert _unreferenced(root) == set()
    assert outcomes == {False, True}


def test_a_crash_leaves_files_that_the_next_open_and_flush_clean_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count_calls: Callable[[str, int | None], list[int]]
) -> None:
    root = tmp_path / "f"
    store = _crash_setup(root)
    old_state = _state(store)
    _crash_changes(store)
    count_calls("fsync", 4)  # inside the merged segment's temporary directory
    with pytest.raises(Crash):
        store.flush()
    monkeypatch.undo()
    assert any(p.name.endswith(".tmp") for p in (root / "segments").iterdir())
    (root / "manifest.json.tmp").write_bytes(b"half a manif")
    reopened = FaissVectorStore(root, dimension=D)
    assert _state(reopened) == old_state
    _crash_changes(reopened)
    reopened.flush()
    assert _unreferenced(root) == set()
    assert _state(FaissVectorStore(root, dimension=D)) == _state(reopened)


def test_failed_manifest_replace_keeps_the_previous_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "f"
    store = _crash_setup(root)
    old_state = _state(store)
    _crash_changes(store)
    new_state = _state(store)
    real_replace = os.replace

    def failing_replace(src: Any, dst: Any, **kwargs: Any) -> None:  # the manifest is replaced by folder fd
        if str(dst).endswith("manifest.json"):
            raise OSError(28, "No space left on device")
        real_replace(src, dst, **kwargs)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="No space"):
        store.flush()
    monkeypatch.undo()
    assert _state(FaissVectorStore(root, dimension=D)) == old_state
    assert _state(store) == new_state  # the in-memory store is unchanged and flushes again
    store.flush()
    assert _state(FaissVectorStore(root, dimension=D)) == new_state
    assert _unreferenced(root) == set()


_CHILD = textwrap.dedent(
    """
    import os, sys
    import numpy as np
    from finderledge.vector_stores.faiss import FaissVectorStore

    path, mode = sys.argv[1], sys.argv[2]
    store = FaissVectorStore(path, dimension=8)
    rng = np.random.default_rng(11)
    store.add([f"new{i}" for i in range(9)], rng.standard_normal((9, 8)), [{"group": 1}] * 9)
    store.delete(["big1", "s0-1"])
    real_replace = os.replace

    def dying_replace(src, dst, **kwargs):
        if str(dst).endswith("manifest.json"):
            if mode == "before":
                os._exit(9)
            real_replace(src, dst, **kwargs)
            os._exit(9)
        real_replace(src, dst, **kwargs)

    os.replace = dying_replace
    store.flush()
    os._exit(0)
    """
)


@pytest.mark.parametrize("mode", ["before", "after"])
def test_killed_process_during_flush(tmp_path: Path, mode: str) -> None:
    root = tmp_path / "f"
    store = _crash_setup(root)
    old_state = _state(store)
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, str(root), mode], capture_output=True, timeout=120, check=False
    )
    assert result.returncode == 9, result.stderr.decode()
    reopened = FaissVectorStore(root, dimension=D)
    if mode == "before":
        assert _state(reopened) == old_state
    else:
        assert {f"new{i}" for i in range(9)} <= reopened.ids() and "big1" not in reopened.ids()
    _fill(reopened, None, ["after-crash"], np.random.default_rng(12))
    reopened.flush()
    assert _unreferenced(root) == set()
    assert _state(FaissVectorStore(root, dimension=D)) == _state(reopened)


# ---------------------------------------------------------------------------------------------------
# Corruption
# ---------------------------------------------------------------------------------------------------
def _biggest_segment(root: Path) -> Path:
    seg = max(_manifest(root)["segments"], key=lambda s: s["rows"])
    return root / "segments" / seg["name"]


def _truncate_vectors(root: Path) -> None:
    path = _biggest_segment(root) / "vectors.npy"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _edit_meta_same_size(root: Path) -> None:
    path = _biggest_segment(root) / "meta.json"
    data = path.read_bytes()
    assert b'"tag":"a"' in data
    path.write_bytes(data.replace(b'"tag":"a"', b'"tag":"b"', 1))


def _edit_meta_longer(root: Path) -> None:
    path = _biggest_segment(root) / "meta.json"
    path.write_bytes(path.read_bytes() + b" ")


def _edit_ids(root: Path) -> None:
    path = _biggest_segment(root) / "ids.json"
    path.write_bytes(path.read_bytes().replace(b"r1", b"x1", 1))


def _bad_manifest_checksum(root: Path) -> None:
    manifest = _manifest(root)
    manifest["live_count"] += 1
    _write_manifest(root, manifest, fix_checksum=False)


def _manifest_not_json(root: Path) -> None:
    (root / "manifest.json").write_bytes(b'{"format": "finderledge.faiss_store", "vers')


def _missing_segment_dir(root: Path) -> None:
    shutil.rmtree(_biggest_segment(root))


def _missing_tombstones(root: Path) -> None:
    for p in (root / "deletes").iterdir():
        p.unlink()


def _path_traversal(root: Path) -> None:
    manifest = _manifest(root)
    manifest["segments"][0]["name"] = "../../etc"
    _write_manifest(root, manifest)


def _replace_vectors(root: Path, arr: np.ndarray) -> None:
    """Swap a segment's vectors.npy and make the manifest vouch for it (sizes, CRC, checksum)."""
    import zlib

    sdir = _biggest_segment(root)
    np.save(sdir / "vectors.npy", arr, allow_pickle=False)
    data = (sdir / "vectors.npy").read_bytes()
    manifest = _manifest(root)
    for seg in manifest["segments"]:
        if seg["name"] == sdir.name:
            seg["files"]["vectors.npy"] = {"bytes": len(data), "crc32": zlib.crc32(data)}
    _write_manifest(root, manifest)


def _wrong_dtype(root: Path) -> None:
    arr = np.load(_biggest_segment(root) / "vectors.npy")
    _replace_vectors(root, arr.astype(np.float64))


def _wrong_shape(root: Path) -> None:
    arr = np.load(_biggest_segment(root) / "vectors.npy")
    _replace_vectors(root, np.ascontiguousarray(arr[:, :-1]))


def _live_count_lies(root: Path) -> None:
    manifest = _manifest(root)
    manifest["live_count"] += 1
    _write_manifest(root, manifest)


def _counters_behind(root: Path) -> None:
    manifest = _manifest(root)
    manifest["next_segment"] = 1  # the next flush would reuse (and first delete) a committed segment's name
    _write_manifest(root, manifest)


DAMAGE: dict[str, Callable[[Path], None]] = {
    "truncated vectors.npy": _truncate_vectors,
    "meta.json edited, same size": _edit_meta_same_size,
    "meta.json edited, longer": _edit_meta_longer,
    "ids.json edited": _edit_ids,
    "bad manifest checksum": _bad_manifest_checksum,
    "manifest not JSON": _manifest_not_json,
    "missing segment directory": _missing_segment_dir,
    "missing tombstone file": _missing_tombstones,
    "segment name ../../etc": _path_traversal,
    "float64 vectors": _wrong_dtype,
    "vectors of the wrong dimension": _wrong_shape,
    "live count does not add up": _live_count_lies,
    "next_segment behind the segments": _counters_behind,
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_corruption_is_detected(tmp_path: Path, damage: str) -> None:
    root = tmp_path / "f"
    store = FaissVectorStore(root, dimension=D)
    _fill(store, None, [f"r{i}" for i in range(200)], np.random.default_rng(8))
    store.flush()
    _fill(store, None, [f"q{i}" for i in range(5)], np.random.default_rng(9))
    store.delete(["r5", "r6"])
    store.flush()
    DAMAGE[damage](root)
    before = _snapshot(root)
    with pytest.raises(VectorIndexCorruptError) as info:
        FaissVectorStore(root, dimension=D)
    assert isinstance(info.value, IndexCorruptError)
    assert info.value.reason and str(info.value.path)
    assert _snapshot(root) == before  # nothing was changed
    if damage == "segment name ../../etc":
        assert "invalid segment name" in info.value.reason


def test_verify_checks_the_vectors_crc(tmp_path: Path) -> None:
    root = tmp_path / "f"
    store = FaissVectorStore(root, dimension=D)
    _fill(store, None, [f"r{i}" for i in range(50)], np.random.default_rng(10))
    store.flush()
    path = _biggest_segment(root) / "vectors.npy"
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF  # same size, same shape: only the CRC tells
    path.write_bytes(bytes(data))
    # every vector is read at open anyway: the CRC32 is always checked (a flip was NaN rows before)
    with pytest.raises(VectorIndexCorruptError, match="checksum"):
        FaissVectorStore(root, dimension=D)


def test_dimension_mismatch_is_incompatible(tmp_path: Path) -> None:
    root = tmp_path / "f"
    store = FaissVectorStore(root, dimension=D)
    _fill(store, None, ["a", "b"], np.random.default_rng(0))
    store.flush()
    with pytest.raises(IncompatibleIndexError, match="dimension"):
        FaissVectorStore(root, dimension=D * 2)
