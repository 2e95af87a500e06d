"""Tests for finderledge.keyword_store (real numpy/bm25s/Sudachi, real files, no mocks)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import bm25s
import numpy as np
import pytest

from finderledge.keyword_store import KeywordIndexCorruptError, KeywordStore
from finderledge.tokenizer import AutoTokenizer, SimpleTokenizer

WORDS = [
    "protein",
    "cell",
    "gene",
    "expression",
    "tumor",
    "cancer",
    "immune",
    "response",
    "patient",
    "treatment",
    "therapy",
    "risk",
    "study",
    "trial",
    "mouse",
    "model",
    "signal",
    "pathway",
    "receptor",
    "binding",
    "virus",
    "infection",
    "vaccine",
    "dose",
    "brain",
    "neuron",
    "memory",
    "learning",
    "heart",
    "blood",
    "pressure",
    "insulin",
    "glucose",
    "diabetes",
    "obesity",
    "diet",
    "exercise",
    "sleep",
    "stress",
    "inflammation",
    "antibody",
    "mutation",
    "dna",
    "rna",
    "sequence",
    "genome",
    "population",
    "cohort",
]


def make_corpus(n: int, seed: int = 0) -> tuple[list[str], list[str], list[dict[str, object]]]:
    """Deterministic Zipf-ish corpus with varied lengths and simple metadata."""
    rng = random.Random(seed)
    weights = [1.0 / (r + 1) for r in range(len(WORDS))]
    ids, texts, metas = [], [], []
    for i in range(n):
        length = rng.randint(3, 40)
        texts.append(" ".join(rng.choices(WORDS, weights=weights, k=length)))
        ids.append(f"doc-{i}")
        metas.append({"group": i % 5, "lang": "en" if i % 2 else "de", "even": i % 2 == 0})
    return ids, texts, metas


QUERIES = [
    "protein expression in tumor cells",
    "vaccine dose",
    "insulin glucose diabetes",
    "sleep",
    "cohort genome dna",
]


def scores_close(a: dict[str, float], b: dict[str, float], tol: float = 1e-9) -> bool:
    return a.keys() == b.keys() and all(abs(a[k] - b[k]) <= tol * max(1.0, abs(b[k])) for k in a)


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# ----------------------------------------------------------------------------------------------------
def test_add_search_len_contains_ids() -> None:
    ks = KeywordStore()
    ks.add(["a", "b", "c"], ["the cat sat on the mat", "dogs and cats", "quantum physics"])
    assert len(ks) == 3 and "a" in ks and "zzz" not in ks and 5 not in ks
    assert ks.ids() == {"a", "b", "c"}
    hits = ks.search("cat", k=10)
    assert {h[0] for h in hits} == {"a", "b"}
    assert all(s > 0 for _, s in hits)
    assert hits == sorted(hits, key=lambda h: -h[1])


def test_upsert_replaces_and_delete_unknown_is_noop() -> None:
    ks = KeywordStore(buffer_size=2)
    ks.add(["a", "b", "c"], ["apple banana", "banana cherry", "cherry durian"])
    ks.add(["a"], ["elderberry fig"])
    assert len(ks) == 3
    assert "a" not in {i for i, _ in ks.search("apple")}
    assert [i for i, _ in ks.search("elderberry")] == ["a"]
    ks.delete(["nope", "also-nope"])
    assert len(ks) == 3
    ks.delete(["b"])
    assert len(ks) == 2 and "b" not in ks
    assert {i for i, _ in ks.search("banana cherry")} == {"c"}
    # Duplicate ids inside one call: the last text wins.
    ks.add(["x", "x"], ["first text", "second text"])
    assert [i for i, _ in ks.search("second")] == ["x"] and ks.search("first") == []


@pytest.mark.parametrize("k1,b", [(1.5, 0.75), (1.2, 0.4), (0.9, 1.0)])
@pytest.mark.parametrize("buffer_size", [10_000, 7])
def test_scores_agree_with_bm25s_lucene(k1: float, b: float, buffer_size: int) -> None:
    ids, texts, _ = make_corpus(300)
    tok = AutoTokenizer()
    ks = KeywordStore(tokenizer=tok, k1=k1, b=b, buffer_size=buffer_size, merge_factor=4)
    for start in range(0, 300, 20):  # several segments + buffer when buffer_size is small
        ks.add(ids[start : start + 20], texts[start : start + 20])
    ref = bm25s.BM25(method="lucene", k1=k1, b=b, dtype="float64")
    ref.index([tok(t) for t in texts], show_progress=False)
    for q in QUERIES:
        expected = ref.get_scores(tok(q)) * (k1 + 1)  # bm25s leaves out the constant (k1 + 1)
        ours = ks.get_scores(q)
        got = np.array([ours.get(i, 0.0) for i in ids])
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
        assert all(v > 0 for v in ours.values())
        top = ks.search(q, k=10)
        order = sorted(range(len(ids)), key=lambda i: (-expected[i], ids[i]))[:10]
        assert [i for i, _ in top] == [ids[i] for i in order]


def test_idf_and_avgdl_after_delete_equal_fresh_index() -> None:
    ids, texts, metas = make_corpus(400, seed=1)
    ks = KeywordStore(buffer_size=16, merge_factor=3)
    for start in range(0, 400, 50):
        ks.add(ids[start : start + 50], texts[start : start + 50], metas[start : start + 50])
    rng = random.Random(3)
    gone = set(rng.sample(ids, 120))
    ks.delete(sorted(gone))
    changed = {i: f"vaccine sleep {i}" for i in rng.sample(sorted(set(ids) - gone), 20)}
    ks.add(list(changed), list(changed.values()))
    remaining = [(i, changed.get(i, t)) for i, t in zip(ids, texts) if i not in gone]
    fresh = KeywordStore()
    fresh.add([i for i, _ in remaining], [t for _, t in remaining])
    assert len(ks) == len(fresh) == 280
    for q in QUERIES:
        assert scores_close(ks.get_scores(q), fresh.get_scores(q), 1e-12)
        assert [i for i, _ in ks.search(q, 7)] == [i for i, _ in fresh.search(q, 7)]


def test_filters_three_matches_and_operators() -> None:
    ks = KeywordStore(buffer_size=50)
    ids, texts, metas = make_corpus(200, seed=2)
    for m in metas:
        m["tag"] = "common"
    ks.add(ids, texts, metas)
    special = ["s1", "s2", "s3"]
    ks.add(special, ["vaccine dose trial", "completely unrelated words", "zebra"], [{"tag": "rare"}] * 3)
    # Only one of the three rare chunks matches the query: it alone is returned.
    assert [i for i, _ in ks.search("vaccine", k=10, filter={"tag": "rare"})] == ["s1"]
    # A query none of them matches returns nothing, never zero-score chunks.
    assert ks.search("insulin", k=10, filter={"tag": "rare"}) == []
    # All three match: at most 3 results.
    res = ks.search("vaccine words zebra", k=10, filter={"tag": "rare"})
    assert {i for i, _ in res} == {"s1", "s2", "s3"}
    # Filtered results equal the unfiltered scores restricted to the allowed set.
    full = ks.get_scores("protein tumor")
    flt = {"$or": [{"group": {"$in": [1, 3]}}, {"lang": "de", "even": True}]}
    got = ks.search("protein tumor", k=1000, filter=flt)
    allowed = {
        i for i, m in zip(ids, metas) if m["group"] in (1, 3) or (m["lang"] == "de" and m["even"] is True)
    }
    assert got and {i for i, _ in got} == {i for i in full if i in allowed}
    assert all(abs(full[i] - s) < 1e-12 for i, s in got)
    ranged = ks.search("protein", 5, filter={"group": {"$gte": 3}})
    assert len(ranged) == 5 and all(metas[ids.index(i)]["group"] >= 3 for i, _ in ranged)
    with pytest.raises(ValueError):
        ks.search("protein", filter={"group": {"$regex": "x"}})


def test_filter_cache_sees_writes() -> None:
    ks = KeywordStore(buffer_size=3)
    ks.add(["a", "b"], ["alpha beta", "alpha gamma"], [{"t": 1}, {"t": 2}])
    assert [i for i, _ in ks.search("alpha", filter={"t": 1})] == ["a"]
    ks.add(["c"], ["alpha"], [{"t": 1}])  # into the buffer
    assert {i for i, _ in ks.search("alpha", filter={"t": 1})} == {"a", "c"}
    ks.add(["d", "e", "f"], ["alpha x", "alpha y", "alpha z"], [{"t": 1}, {"t": 2}, {"t": 1}])
    assert {i for i, _ in ks.search("alpha", filter={"t": 1})} == {"a", "c", "d", "f"}
    ks.add(["a"], ["alpha"], [{"t": 2}])  # upsert changes the metadata
    assert {i for i, _ in ks.search("alpha", filter={"t": 1})} == {"c", "d", "f"}
    ks.delete(["d"])
    assert {i for i, _ in ks.search("alpha", filter={"t": 1})} == {"c", "f"}
    assert ks.get_metadata("a") == {"t": 2} and ks.get_metadata("zz") is None


def test_zero_score_never_returned() -> None:
    ks = KeywordStore()
    ks.add(["a", "b", "c"], ["red apple", "green pear", "blue sky"])
    assert [i for i, _ in ks.search("apple", k=100)] == ["a"]
    assert ks.search("nothing matches here", k=100) == []
    assert ks.search("", k=5) == [] and ks.search("apple", k=0) == []
    assert KeywordStore().search("apple") == []


def test_japanese_query_finds_japanese_doc_where_whitespace_tokens_do_not() -> None:
    docs = {
        "ja1": "東京都庁は新宿区にあり、展望室から富士山が見えることもある。",
        "ja2": "大阪城は豊臣秀吉によって築かれた城である。",
        "en1": "Tokyo is the capital of Japan.",
    }
    query = "都庁の展望室から何が見えますか"
    ks = KeywordStore()
    ks.add(list(docs), list(docs.values()))
    assert ks.search(query, k=1)[0][0] == "ja1"
    naive = KeywordStore(tokenizer=SimpleTokenizer())
    naive.add(list(docs), list(docs.values()))
    assert naive.search(query) == []


def test_mixed_text_matches_english_queries() -> None:
    ks = KeywordStore()
    ks.add(
        ["ja", "en", "other"],
        ["FinderLedgeの使い方を説明します", "Installing FinderLedges with pip", "何か別の話題"],
    )
    assert {i for i, _ in ks.search("finderledge")} == {"ja", "en"}
    assert ks.search("使い方", k=1)[0][0] == "ja"
    assert {i for i, _ in ks.search("FinderLedgeについて")} == {"ja", "en"}


def test_persistence_reopen_same_scores(tmp_path: Path) -> None:
    ids, texts, metas = make_corpus(500, seed=4)
    path = tmp_path / "idx"
    ks = KeywordStore(path, buffer_size=64, merge_factor=3)
    for start in range(0, 500, 37):
        ks.add(ids[start : start + 37], texts[start : start + 37], metas[start : start + 37])
    ks.delete(ids[::7])
    ks.add(["new"], ["vaccine vaccine sleep"], [{"group": 9}])
    before = {q: ks.get_scores(q) for q in QUERIES}
    filtered = ks.search("vaccine", 5, filter={"group": 9})
    ks.close()
    with pytest.raises(RuntimeError):
        ks.search("x")
    again = KeywordStore(path)
    assert len(again) == 500 - len(ids[::7]) + 1
    assert again.ids() == (set(ids) - set(ids[::7])) | {"new"}
    for q in QUERIES:
        assert again.get_scores(q) == before[q]
    assert again.search("vaccine", 5, filter={"group": 9}) == filtered
    assert again.get_metadata("new") == {"group": 9}
    # Writes after reopening persist too.
    again.delete(["new"])
    again.flush()
    assert "new" not in KeywordStore(path)


def test_reopen_uses_stored_tokenizer_and_rejects_a_different_one(tmp_path: Path) -> None:
    tok = AutoTokenizer(stem=False, stopwords=False)
    with KeywordStore(tmp_path, tokenizer=tok) as ks:
        ks.add(["a"], ["The running dogs"])
    again = KeywordStore(tmp_path)
    assert again.tokenizer.to_dict() == tok.to_dict()
    assert again.search("running")[0][0] == "a" and again.search("run") == []
    with pytest.raises(ValueError, match="tokenizer"):
        KeywordStore(tmp_path, tokenizer=AutoTokenizer())
    KeywordStore(tmp_path, tokenizer=AutoTokenizer(stem=False, stopwords=False))  # same settings: fine


def test_flush_is_incremental_and_noop_when_unchanged(tmp_path: Path) -> None:
    ids, texts, _ = make_corpus(300, seed=5)
    ks = KeywordStore(tmp_path, buffer_size=1000)
    ks.add(ids, texts)
    ks.flush()
    manifest = tmp_path / "manifest.json"
    seg_dirs = sorted((tmp_path / "segments").iterdir())
    stamp = {p: (p / "docs.npy").stat().st_mtime_ns for p in seg_dirs}
    m1 = manifest.stat().st_mtime_ns
    ks.flush()  # nothing changed: nothing written
    assert manifest.stat().st_mtime_ns == m1
    ks.add(["extra"], ["vaccine"])
    ks.flush()
    assert json.loads(manifest.read_text())["generation"] == 2
    for p, t in stamp.items():  # untouched segments are not rewritten
        assert (p / "docs.npy").stat().st_mtime_ns == t
    assert len(list((tmp_path / "segments").iterdir())) == len(seg_dirs) + 1


def test_merge_removes_old_files_only_after_commit(tmp_path: Path) -> None:
    ks = KeywordStore(tmp_path, buffer_size=2, merge_factor=3)
    for i in range(40):
        ks.add([f"d{i}"], [f"word{i % 4} common"])
        ks.flush()
    committed = json.loads((tmp_path / "manifest.json").read_text())
    names = {s["name"] for s in committed["segments"]}
    on_disk = {p.name for p in (tmp_path / "segments").iterdir()}
    assert on_disk == names  # garbage collected, nothing stray
    assert len(names) <= 2 * 3
    assert len(KeywordStore(tmp_path)) == 40


def _corrupt_index(tmp_path: Path) -> Path:
    ids, texts, metas = make_corpus(200, seed=6)
    path = tmp_path / "idx"
    with KeywordStore(path, buffer_size=64) as ks:
        ks.add(ids, texts, metas)
        ks.delete(ids[:10])
    return path


@pytest.mark.parametrize(
    "damage,match",
    [
        ("truncate_npy", "truncated"),
        ("flip_npy", "checksum"),
        ("flip_ids", "checksum"),
        ("manifest_garbage", "not valid JSON"),
        ("manifest_edit", "checksum"),
        ("missing_file", "missing"),
        ("truncate_deletes", "truncated"),
    ],
)
def test_corruption_raises_and_leaves_files_untouched(tmp_path: Path, damage: str, match: str) -> None:
    path = _corrupt_index(tmp_path)
    seg = min((path / "segments").iterdir())
    if damage == "truncate_npy":
        data = (seg / "docs.npy").read_bytes()
        (seg / "docs.npy").write_bytes(data[: len(data) // 2])
    elif damage == "flip_npy":
        data = bytearray((seg / "tfs.npy").read_bytes())
        data[-1] ^= 0xFF
        (seg / "tfs.npy").write_bytes(bytes(data))
    elif damage == "flip_ids":
        data = (seg / "ids.json").read_bytes()
        (seg / "ids.json").write_bytes(data.replace(b"doc-1", b"doc-X", 1))
    elif damage == "manifest_garbage":
        (path / "manifest.json").write_bytes(b'{"format": "finderledge.keyword_sto')
    elif damage == "manifest_edit":
        m = json.loads((path / "manifest.json").read_text())
        m["live_count"] += 1
        (path / "manifest.json").write_text(json.dumps(m))
    elif damage == "missing_file":
        (seg / "lens.npy").unlink()
    elif damage == "truncate_deletes":
        dfile = next((path / "deletes").iterdir())
        dfile.write_bytes(dfile.read_bytes()[:-4])
    before = snapshot(path)
    with pytest.raises(KeywordIndexCorruptError, match=match) as info:
        KeywordStore(path)
    assert str(path) in str(info.value)
    assert snapshot(path) == before


def test_failed_flush_keeps_old_index_readable(tmp_path: Path) -> None:
    path = tmp_path / "idx"
    with KeywordStore(path) as ks:
        ks.add(["a", "b"], ["apple", "banana"])
    ks = KeywordStore(path)
    ks.add(["c"], ["cherry"])
    real_replace = os.replace

    def failing_replace(src: object, dst: object, **kwargs: object) -> None:  # the manifest: by folder fd
        raise OSError("simulated crash before the manifest is replaced")

    os.replace = failing_replace  # type: ignore[assignment]
    try:
        with pytest.raises(OSError, match="simulated"):
            ks.flush()
    finally:
        os.replace = real_replace
    reopened = KeywordStore(path)  # the old manifest is still in place
    assert reopened.ids() == {"a", "b"}
    reopened.add(["d"], ["date"])
    reopened.flush()  # overwrites the stray uncommitted segment without trouble
    assert KeywordStore(path).ids() == {"a", "b", "d"}


def test_automatic_merging_keeps_results_identical() -> None:
    ids, texts, metas = make_corpus(600, seed=7)
    incremental = KeywordStore(buffer_size=8, merge_factor=3)
    for i, t, m in zip(ids, texts, metas):
        incremental.add([i], [t], [m])
    stats = incremental.stats()
    assert len(stats["segments"]) <= 3 * 5  # bounded: < merge_factor per tier
    assert any(s["docs"] > 8 * 3 for s in stats["segments"])  # merges happened
    bulk = KeywordStore()
    bulk.add(ids, texts, metas)
    for q in QUERIES:
        assert incremental.search(q, 10) == bulk.search(q, 10)
        assert incremental.search(q, 10, filter={"group": 2}) == bulk.search(q, 10, filter={"group": 2})
        assert scores_close(incremental.get_scores(q), bulk.get_scores(q), 1e-12)
    # Heavy deletes trigger tombstone compaction.
    incremental.delete(ids[:450])
    for s in incremental.stats()["segments"]:
        assert s["deleted"] <= 0.3 * s["docs"]
    incremental.compact()
    assert len(incremental.stats()["segments"]) == 1
    fresh = KeywordStore()
    fresh.add(ids[450:], texts[450:], metas[450:])
    for q in QUERIES:
        assert incremental.search(q, 10) == fresh.search(q, 10)


def test_invalid_inputs() -> None:
    ks = KeywordStore()
    with pytest.raises(ValueError):
        ks.add(["a", "b"], ["only one"])
    with pytest.raises(TypeError):
        ks.add(["a"], ["x"], [{"bad": object()}])
    with pytest.raises(TypeError):
        ks.add("ab", "xy")
    with pytest.raises(TypeError):
        ks.delete("a")
    with pytest.raises(ValueError):
        KeywordStore(k1=-1)
    assert len(ks) == 0


@pytest.mark.slow
def test_100k_index_reopens_in_fresh_process(tmp_path: Path) -> None:
    """A large persisted index opens in a new process and answers exactly as before (the open-time
    target, < 1 s, is measured in benchmarks/bench_keyword_store.py, not asserted here)."""
    rng = random.Random(8)
    vocab = [f"w{i}" for i in range(20_000)]
    texts = [" ".join(rng.choices(vocab, k=20)) for _ in range(100_000)]
    ids = [f"chunk-{i}" for i in range(100_000)]
    with KeywordStore(tmp_path, tokenizer=SimpleTokenizer()) as ks:
        ks.add(ids, texts, [{"n": i} for i in range(100_000)])
        expected = [[i, round(s, 6)] for i, s in ks.search("w1 w2 w300", k=20)]
        expected_filtered = [
            [i, round(s, 6)] for i, s in ks.search("w1 w2", k=5, filter={"n": {"$lt": 50_000}})
        ]
    code = textwrap.dedent(
        f"""
        import json
        from finderledge.keyword_store import KeywordStore
        ks = KeywordStore({str(tmp_path)!r})
        print(json.dumps([len(ks), [[i, round(s, 6)] for i, s in ks.search("w1 w2 w300", k=20)],
                          [[i, round(s, 6)] for i, s in ks.search("w1 w2", k=5, filter={{"n": {{"$lt": 50_000}}}})]]))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [100_000, expected, expected_filtered]
    assert len(expected) == 20 and expected_filtered
