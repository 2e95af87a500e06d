"""The keyword index on disk, kept through the shared segment layer (:mod:`finderledge.storage.segments`).

A segment is ``indptr.npy``/``docs.npy``/``tfs.npy``/``lens.npy`` (memory-mapped at open) and
``terms.json``/``ids.json``/``meta.json``; the manifest records the BM25 counters and the tokenizer.  The
format is documented in ``docs/keyword_store.md``; every check of what is read raises
:class:`~finderledge.keyword_store.KeywordIndexCorruptError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..storage.segments import (
    DELETES_DIR,
    FileInfo,
    SegmentFiles,
    SegmentWriter,
    file_info,
    non_negative,
    segment_number,
)
from .segment import KeywordIndexCorruptError, Segment

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "Opened", "manifest_body", "open_index", "save_segments"]

FORMAT_NAME = "finderledge.keyword_store"
FORMAT_VERSION = 1
# Files of one segment: name -> (dtype, what its length must equal).
NPY_FILES: dict[str, tuple[str, str]] = {
    "indptr.npy": ("<i8", "n_terms+1"),
    "docs.npy": ("<i4", "n_postings"),
    "tfs.npy": ("<i4", "n_postings"),
    "lens.npy": ("<i4", "n_docs"),
}
JSON_FILES = ("terms.json", "ids.json", "meta.json")


@dataclass
class Opened:
    """What a manifest and its segments describe."""

    segments: list[Segment]
    live_count: int
    total_len: int
    next_segment: int
    generation: int
    tokenizer: dict[str, Any]


# --------------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------------
def save_segments(files: SegmentFiles, segments: Sequence[Segment], generation: int) -> None:
    """Write the segments not on disk yet and the tombstones changed since the last flush."""
    files.prepare()
    for seg in segments:
        if not seg.persisted:
            _write_segment(files, seg)
        if seg.deletes_dirty or (seg.n_deleted and seg.deletes_file is None):
            name, info = files.write_tombstones(seg.name, generation, np.flatnonzero(~seg.live).astype("<i4"))
            seg.deletes_file, seg.deletes_info, seg.deletes_dirty = f"{DELETES_DIR}/{name}", info, False


def _write_segment(files: SegmentFiles, seg: Segment) -> None:
    def write(out: SegmentWriter) -> None:
        arrays = {"indptr.npy": seg.indptr, "docs.npy": seg.docs, "tfs.npy": seg.tfs, "lens.npy": seg.lens}
        for fname, arr in arrays.items():
            out.write_npy(fname, arr, NPY_FILES[fname][0])
        for fname, obj in (("terms.json", seg.terms), ("ids.json", seg.ids), ("meta.json", seg.load_metas())):
            out.write_json(fname, obj)

    seg.files = files.write_segment(seg.name, write)
    seg.meta_path = files.root / files.segment_file(seg.name, "meta.json")
    seg.persisted = True


def manifest_body(segments: Sequence[Segment], counters: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest's body: ``counters`` (generation, tokenizer, totals …) and the segments' records."""
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        **counters,
        "segments": [
            {
                "name": s.name,
                "n_docs": s.n_docs,
                "n_terms": len(s.terms),
                "n_postings": len(s.docs),
                "files": s.files,
                "deletes": (
                    {"file": s.deletes_file, "count": s.n_deleted, **s.deletes_info} if s.n_deleted else None
                ),
            }
            for s in segments
        ],
    }


# --------------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------------
def open_index(files: SegmentFiles, verify: bool) -> Opened:
    """Read and check the manifest and every segment it names (arrays memory-mapped)."""
    mpath, err = files.manifest_path, KeywordIndexCorruptError
    manifest = files.read_manifest(FORMAT_NAME, FORMAT_VERSION, "keyword index")
    if not isinstance(manifest.get("segments"), list) or not isinstance(manifest.get("tokenizer"), dict):
        raise err(mpath, "'segments' must be a list and 'tokenizer' an object")
    counters = {
        key: non_negative(manifest.get(key), key, mpath, err)
        for key in ("live_count", "total_length", "next_segment", "generation")
    }
    segments: list[Segment] = []
    live_count = total_len = 0
    for entry in manifest["segments"]:
        seg = open_segment(files, entry, verify)
        if any(seg.name == other.name for other in segments):
            raise err(mpath, f"segment {seg.name} is listed twice")
        if segment_number(seg.name) >= counters["next_segment"]:
            raise err(
                mpath, "a segment is newer than the manifest's next_segment"
            )  # a flush would overwrite it
        segments.append(seg)
        live_count += seg.n_live
        total_len += int(np.asarray(seg.lens, dtype=np.int64)[seg.live].sum())
    if live_count != counters["live_count"] or total_len != counters["total_length"]:
        raise err(
            mpath,
            f"segments hold {live_count} chunks / {total_len} tokens but the manifest says "
            f"{counters['live_count']} / {counters['total_length']}",
        )
    return Opened(
        segments,
        live_count,
        total_len,
        counters["next_segment"],
        counters["generation"],
        dict(manifest["tokenizer"]),
    )


def open_segment(files: SegmentFiles, entry: Any, verify: bool) -> Segment:
    """Open one segment the manifest lists: its name, sizes, shapes and (with ``verify``, else on first
    use) CRC32s are checked; ``meta.json`` stays open and is parsed when a filter or merge needs it."""
    mpath, err = files.manifest_path, KeywordIndexCorruptError
    if not isinstance(entry, dict):
        raise err(mpath, "a segment entry is not an object")
    name = files.segment_name(entry.get("name"))
    path_of = {
        fname: files.segment_file(name, fname) for fname in (*NPY_FILES, *JSON_FILES)
    }  # checks the name
    n_docs, n_terms, n_postings = (
        non_negative(entry.get(key), f"{name} {key}", mpath, err)
        for key in ("n_docs", "n_terms", "n_postings")
    )
    listed = entry.get("files")
    if not isinstance(listed, dict):
        raise err(mpath, f"segment {name}: bad file list")
    infos = {fname: file_info(listed.get(fname), f"{name}/{fname}", mpath, err) for fname in path_of}
    arrays, unverified = _map_arrays(
        files, path_of, infos, {"n_terms+1": n_terms + 1, "n_postings": n_postings, "n_docs": n_docs}, verify
    )
    terms = files.json(path_of["terms.json"], infos["terms.json"])
    ids = files.json(path_of["ids.json"], infos["ids.json"])
    if not isinstance(terms, list) or len(terms) != n_terms or not all(isinstance(t, str) for t in terms):
        raise err(files.root / path_of["terms.json"], f"expected {n_terms} terms")
    if not isinstance(ids, list) or len(ids) != n_docs or not all(isinstance(i, str) for i in ids):
        raise err(files.root / path_of["ids.json"], f"expected {n_docs} ids")
    indptr = arrays["indptr.npy"]
    if indptr[0] != 0 or indptr[-1] != n_postings:
        raise err(files.root / path_of["indptr.npy"], "offsets do not span the postings")
    if verify:
        files.read(path_of["meta.json"], infos["meta.json"])
    seg = Segment(
        name=name,
        terms=terms,
        indptr=indptr,
        docs=arrays["docs.npy"],
        tfs=arrays["tfs.npy"],
        lens=arrays["lens.npy"],
        ids=ids,
        metas=None,
        live=np.ones(n_docs, dtype=bool),
        persisted=True,
        files=infos,
        meta_path=files.root / path_of["meta.json"],
        meta_file=files.open(path_of["meta.json"], infos["meta.json"]),  # another process may delete it
        unverified=unverified,
    )
    _apply_tombstones(files, seg, entry.get("deletes"))
    return seg


def _map_arrays(
    files: SegmentFiles,
    path_of: Mapping[str, str],
    infos: Mapping[str, FileInfo],
    lengths: Mapping[str, int],
    verify: bool,
) -> tuple[dict[str, np.ndarray], dict[str, tuple[bytes, int]]]:
    """Memory-map a segment's arrays; returns them and, unless ``verify`` checked them now, the header
    bytes and CRC32 to check on first use."""
    arrays: dict[str, np.ndarray] = {}
    unverified: dict[str, tuple[bytes, int]] = {}
    for fname, (dtype, length_key) in NPY_FILES.items():
        arrays[fname], head = files.map_npy(path_of[fname], infos[fname], dtype, (lengths[length_key],))
        if verify:
            files.verify_crc(path_of[fname], infos[fname])
        else:
            unverified[fname] = (head, infos[fname]["crc32"])
    return arrays, unverified


def _apply_tombstones(files: SegmentFiles, seg: Segment, deletes: Any) -> None:
    """Read a segment's tombstone file (as the manifest entry ``deletes`` names it) into ``seg.live``."""
    if not deletes:
        return
    mpath, err = files.manifest_path, KeywordIndexCorruptError
    if not isinstance(deletes, dict):
        raise err(mpath, f"segment {seg.name}: 'deletes' is not an object")
    rel = deletes.get("file")
    prefix = f"{DELETES_DIR}/"
    if (
        not isinstance(rel, str)
        or not rel.startswith(prefix)
        or not rel[len(prefix) :].startswith(f"{seg.name}.")
    ):
        raise err(mpath, f"segment {seg.name}: tombstones {str(rel)[:200]!r} belong to another segment")
    info = file_info(deletes, f"{seg.name} deletes", mpath, err)
    count = non_negative(deletes.get("count"), f"{seg.name} deletes count", mpath, err)
    dead = files.read_tombstones(files.deletes_file(rel[len(prefix) :]), info, count, seg.n_docs)
    seg.live[dead] = False
    seg.n_deleted = count
    seg.deletes_file, seg.deletes_info = rel, info
