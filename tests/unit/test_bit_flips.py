"""Silent damage is found: a flipped byte in any index file is an :class:`IndexCorruptError` and a
rebuild, never NaN scores, quietly missing results or a failed search.

Property: flip one random byte of one random file of a built directory's indexes (``bm25/``, ``faiss/``, with
the exact ``vector_index`` and with an HNSW one, whose ``index.faiss`` is among the files);
then every search answers exactly as a clean directory does: damage found at open or by a search (a file
read lazily) moves the index aside and rebuilds it from the ledger before the answer, never an error.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import FinderLedge

TEXTS = [
    f"Note {i}: {word} and {other} are discussed here, with {word} again."
    for i, (word, other) in enumerate(
        (w, o)
        for w in ("glaciers", "tides", "passwords", "orchards", "volcanoes", "harbours")
        for o in ("rain", "salt", "keys", "apples")
    )
]
QUERIES = ["glaciers rain", "passwords keys", "volcanoes", "harbours salt apples"]


def _open(root: Path) -> FinderLedge:
    return FinderLedge(
        root, embedding=DeterministicFakeEmbedding(size=24), show_progress=False, env_file=None
    )


def _answers(fl: FinderLedge) -> dict[str, list[tuple[str, float]]]:
    out = {}
    for q in QUERIES:
        for mode in ("keyword", "vector", "hybrid"):
            for flt in (None, {"half": 1}):  # a filter reads the per-chunk metadata files (lazily)
                hits = fl.search(q, search_mode=mode, k=8, filter=flt)
                assert all(math.isfinite(h.score) for h in hits), (q, mode, [h.score for h in hits])
                out[f"{q}|{mode}|{flt}"] = [(str(h.id), round(float(h.score), 5)) for h in hits]
    return out


@pytest.fixture(scope="module", params=["flat", "hnsw"])
def built(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, dict[str, Any], list[str]]]:
    kind = request.param
    patch = pytest.MonkeyPatch()
    patch.setattr("finderledge.vector_stores.faiss.MIN_ROWS", 4)  # an approximate index over these few rows
    root = tmp_path_factory.mktemp(f"flips-{kind}") / "index"
    fl = FinderLedge(
        root,
        vector_store="faiss",
        vector_index=kind,
        embedding=DeterministicFakeEmbedding(size=24),
        show_progress=False,
        env_file=None,
    )
    with fl:
        for start in range(0, len(TEXTS), 6):  # several segments
            fl.add_texts(TEXTS[start : start + 6], [{"half": i % 2} for i in range(start, start + 6)])
        fl.delete([fl.list_documents()[1].id])  # and a tombstone file
    with _open(root) as fl:
        expected = _answers(fl)
    files = sorted(
        str(p.relative_to(root))
        for folder in ("bm25", "faiss")
        for p in (root / folder).rglob("*")
        if p.is_file() and p.stat().st_size > 0
    )
    assert any(f.endswith("vectors.npy") for f in files) and any(f.endswith("docs.npy") for f in files)
    assert any(f.endswith("index.faiss") for f in files) == (kind != "flat")
    yield root, expected, files
    patch.undo()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_flipped_byte_anywhere_is_found_never_a_wrong_answer(
    built: tuple[Path, dict[str, Any], list[str]], data: st.DataObject
) -> None:
    source, expected, files = built
    name = data.draw(st.sampled_from(files), label="file")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "index"
        shutil.copytree(source, root)
        path = root / name
        raw = bytearray(path.read_bytes())
        at = data.draw(st.integers(0, len(raw) - 1), label="offset")
        raw[at] ^= data.draw(st.integers(1, 255), label="xor")
        path.write_bytes(bytes(raw))
        with _open(root) as fl:
            got = _answers(fl)
        assert got == expected, name
        asides = [p for p in os.listdir(root) if ".corrupt-" in p]
        assert len(asides) <= 1


def test_moved_aside_copies_are_bounded(
    built: tuple[Path, dict[str, Any], list[str]], tmp_path: Path
) -> None:
    """Damage found again and again keeps only the newest copies (KEEP_ASIDE), never fills the disk."""
    from finderledge.replica.core import KEEP_ASIDE

    root = tmp_path / "index"
    shutil.copytree(built[0], root)
    for round_ in range(KEEP_ASIDE + 3):
        for folder in ("bm25", "faiss"):
            (root / folder / "manifest.json").write_bytes(b"torn %d" % round_)
        with _open(root) as fl:
            assert _answers(fl) == built[1]
    for folder in ("bm25", "faiss"):
        asides = sorted(p.name for p in root.iterdir() if p.name.startswith(f"{folder}.corrupt-"))
        assert len(asides) == KEEP_ASIDE, asides
        kept = {(root / a / "manifest.json").read_bytes() for a in asides}
        assert kept == {b"torn %d" % r for r in range(3, KEEP_ASIDE + 3)}  # the newest ones
