"""Evaluation: metrics agree with ir_measures on the same run file, BEIR loading, chunk→document mapping,
question files, and the ``finderledge eval`` command — with the real MiniLM model and real stores."""

from __future__ import annotations

import json
import random
from pathlib import Path

import ir_measures
import pytest
from ir_measures import RR, R, nDCG
from langchain_core.documents import Document
from paths import (
    DATASETS,
    dataset,
)

from finderledge import FinderLedge
from finderledge.cli.commands import main
from finderledge.evaluation import (
    evaluate,
    evaluate_modes,
    evaluate_questions,
    first_occurrence,
    format_report,
    index_beir,
    load_beir,
    load_questions,
    score_run,
    source_matches,
)
from finderledge.keyword_store import KeywordStore

MEASURES = {"nDCG@10": nDCG @ 10, "Recall@10": R @ 10, "Recall@100": R @ 100, "MRR@10": RR @ 10}


def _write_trec(
    tmp_path: Path, qrels: dict[str, dict[str, int]], run: dict[str, list[str]]
) -> tuple[Path, Path]:
    """A TREC qrels file and a TREC run file (strictly decreasing scores, so no tie-breaking differs)."""
    qrels_path, run_path = tmp_path / "qrels.txt", tmp_path / "run.txt"
    qrels_path.write_text("".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items()))
    run_path.write_text(
        "".join(
            f"{q} Q0 {d} {r} {1000 - r} test\n"
            for q, docs in run.items()
            for r, d in enumerate(docs, start=1)
        )
    )
    return qrels_path, run_path


def _assert_same_as_ir_measures(
    tmp_path: Path, qrels: dict[str, dict[str, int]], run: dict[str, list[str]]
) -> None:
    qrels_path, run_path = _write_trec(tmp_path, qrels, run)
    # ours, from the files (the same input ir_measures reads)
    our_qrels: dict[str, dict[str, int]] = {}
    for q in ir_measures.read_trec_qrels(str(qrels_path)):
        our_qrels.setdefault(q.query_id, {})[q.doc_id] = q.relevance
    our_run: dict[str, list[str]] = {}
    for s in sorted(ir_measures.read_trec_run(str(run_path)), key=lambda s: (s.query_id, -s.score)):
        our_run.setdefault(s.query_id, []).append(s.doc_id)
    ours = score_run(our_run, our_qrels)
    theirs = ir_measures.calc_aggregate(
        list(MEASURES.values()),
        ir_measures.read_trec_qrels(str(qrels_path)),
        ir_measures.read_trec_run(str(run_path)),
    )
    for name, measure in MEASURES.items():
        assert ours[name] == pytest.approx(theirs[measure], abs=1e-9), name


def test_metrics_match_ir_measures_with_graded_qrels(tmp_path: Path) -> None:
    rng = random.Random(7)
    docs = [f"d{i}" for i in range(300)]
    qrels = {
        f"q{q}": {d: rng.choice([0, 1, 1, 2, 3]) for d in rng.sample(docs, rng.randint(1, 12))}
        for q in range(60)
    }
    for grades in qrels.values():  # BEIR skips queries without a relevant document
        if not any(grades.values()):
            grades[next(iter(grades))] = 1
    run = {}
    for q, grades in qrels.items():  # some relevant documents near the top, so the metrics are not all ~0
        ranked = [d for d in rng.sample(docs, 120) if d not in grades]
        for d in grades:
            if rng.random() < 0.6:
                ranked.insert(rng.randint(0, 15), d)
        run[q] = ranked
    _assert_same_as_ir_measures(tmp_path, qrels, run)
    assert score_run(run, qrels)["nDCG@10"] > 0.1


def test_metrics_match_ir_measures_on_a_real_bm25_run(tmp_path: Path) -> None:
    dataset("msmarco-5k")  # skips (CI: fails) when the shared dataset is missing
    data = load_beir(DATASETS / "msmarco-5k")  # graded qrels (0-3)
    assert any(g >= 2 for grades in data.qrels.values() for g in grades.values())
    store = KeywordStore()
    store.add(list(data.corpus), [f"{t}\n\n{x}".strip() for t, x in data.corpus.values()])
    run = {q: [d for d, _ in store.search(text, k=100)] for q, text in data.queries.items()}
    _assert_same_as_ir_measures(tmp_path, data.qrels, run)


def test_metric_values_by_hand() -> None:
    qrels = {"q": {"a": 2, "b": 1, "c": 0, "d": 1}}
    scores = score_run({"q": ["c", "a", "x", "b"]}, qrels)
    # DCG = 2/log2(3) + 1/log2(5); IDCG = 2 + 1/log2(3) + 1/2
    assert scores["nDCG@10"] == pytest.approx(0.5405857679, abs=1e-9)
    assert scores["Recall@10"] == pytest.approx(2 / 3)
    assert scores["MRR@10"] == pytest.approx(0.5)
    assert score_run({}, qrels)["nDCG@10"] == 0.0  # a query without results counts as 0


def _beir_folder(root: Path) -> Path:
    root.mkdir()
    corpus = [
        {
            "_id": "pw",
            "title": "Password reset",
            "text": "A password reset link is valid for 30 minutes. " * 30,
        },
        {"_id": "bill", "title": "Billing", "text": "Invoices are sent on the first day of each month."},
        {
            "_id": "dc",
            "title": "データセンター",
            "text": "東京リージョンのデータセンターは二つの拠点で冗長化されています。",
        },
        {"_id": "tea", "title": "Green tea", "text": "Green tea is brewed at 80 degrees for two minutes."},
    ]
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(d, ensure_ascii=False) for d in corpus) + "\n")
    queries = [
        {"_id": "1", "text": "how long is the password reset link valid"},
        {"_id": "2", "text": "when are invoices sent"},
        {"_id": "3", "text": "東京のデータセンター"},
        {"_id": "4", "text": "a query whose only judgement is non-relevant"},
    ]
    (root / "queries.jsonl").write_text("\n".join(json.dumps(q, ensure_ascii=False) for q in queries) + "\n")
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n1\tpw\t1\n2\tbill\t2\n2\ttea\t0\n3\tdc\t1\n4\ttea\t0\n"
    )
    return root


def test_load_beir_keeps_queries_with_relevant_documents(tmp_path: Path) -> None:
    data = load_beir(_beir_folder(tmp_path / "mini"))
    assert set(data.queries) == {"1", "2", "3"}  # query 4 has no relevant document: skipped
    assert data.qrels["2"] == {"bill": 2, "tea": 0}
    with pytest.raises(FileNotFoundError, match="qrels/train.tsv"):
        load_beir(tmp_path / "mini", "train")


def test_chunks_map_back_to_their_document_first_occurrence_wins(tmp_path: Path, minilm) -> None:
    assert first_occurrence(["a", "b", "a", "c", "b"]) == ["a", "b", "c"]
    data = load_beir(_beir_folder(tmp_path / "mini"))
    with FinderLedge(
        embedding=minilm, chunk_size=200, chunk_overlap=0, show_progress=False, env_file=None
    ) as fl:
        index_beir(fl, data, show_progress=False)
        assert fl.count()["chunks"] > len(data.corpus)  # the password document was split
        reports = evaluate_modes(fl, data, ("hybrid", "keyword"), k=20, show_progress=False)
    for report in reports:
        for ranked in report.run.values():
            assert len(ranked) == len(set(ranked))  # one entry per document
        assert report.run["1"][0] == "pw"
        assert report.metrics["nDCG@10"] == pytest.approx(1.0)
        assert report.latency_ms["p50"] > 0 and report.search_ms["p50"] <= report.latency_ms["p50"] + 1e-6


def test_question_files_both_formats(tmp_path: Path) -> None:
    a = tmp_path / "qa.json"
    a.write_text(
        json.dumps(
            [
                {
                    "query": "How long is a reset link valid?",
                    "expected_source": "password-reset.txt",
                    "expected_keywords": ["30 minutes"],
                }
            ]
        )
    )
    b = tmp_path / "qa.jsonl"
    b.write_text('{"question": "What does the refund cover?", "gold_sources": ["billing-faq.md", "x.md"]}\n')
    qa, qb = load_questions(a), load_questions(b)
    assert (qa[0].query, qa[0].gold_sources, qa[0].expected_keywords) == (
        "How long is a reset link valid?",
        ["password-reset.txt"],
        ["30 minutes"],
    )
    assert qb[0].gold_sources == ["billing-faq.md", "x.md"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "no gold here"}\n')
    with pytest.raises(ValueError, match="item 1"):
        load_questions(bad)
    assert source_matches("/home/u/data/docs/faq.md", "docs/faq.md")
    assert source_matches("/home/u/data/docs/faq.md", "faq.md")
    assert not source_matches("/home/u/data/docs/faq.md", "q.md")


def test_question_metrics_on_a_real_index(ledger: FinderLedge) -> None:
    from finderledge.evaluation import QaItem

    items = [
        QaItem("1", "How long is a password reset link valid?", ["password-reset.txt"], ["password"]),
        QaItem("2", "How long is a password reset link valid?", ["no-such-file.md", "password-reset.txt"]),
        QaItem(
            "3", "How long is a password reset link valid?", ["no-such-file.md"], ["zzqx-not-in-any-text"]
        ),
    ]
    (report,) = evaluate_questions(ledger, items, ("keyword",), k=3, show_progress=False)
    # Retrieval@3: 1, 1, 0; Recall@3: 1, 1/2, 0; KeywordRecall@3: 1, 0
    assert report.metrics["Retrieval@3"] == pytest.approx(2 / 3)
    assert report.metrics["Recall@3"] == pytest.approx(0.5)
    assert report.metrics["KeywordRecall@3"] == pytest.approx(0.5)


def test_cli_eval_prints_the_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _beir_folder(tmp_path / "mini")
    assert main(["eval", str(folder), "--one-chunk", "--no-progress", "--vector-store", "faiss"]) == 0
    out = capsys.readouterr().out
    assert "mini: 4 documents, 4 chunks, 3 queries" in out
    for mode in ("hybrid", "vector", "keyword"):
        assert any(line.startswith(mode) for line in out.splitlines())
    assert "nDCG@10" in out and "Recall@100" in out
    assert not Path(".finderledge").exists()  # without --dir a BEIR corpus never goes into the default index
    index = tmp_path / "idx"
    assert (
        main(
            [
                "eval",
                str(folder),
                "--one-chunk",
                "--no-progress",
                "--json",
                "--dir",
                str(index),
                "--modes",
                "keyword",
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["index_seconds"] > 0 and data["embedding_seconds"] > 0
    assert [m["mode"] for m in data["modes"]] == ["keyword"]
    assert data["modes"][0]["nDCG@10"] == pytest.approx(1.0)
    # the persist directory is reused: nothing is indexed again
    again = evaluate(folder, persist_directory=index, modes=("keyword",), show_progress=False)
    assert again.index_seconds is None and again.chunks == 4
    assert "reused index" in format_report(again)
    assert main(["eval", str(tmp_path / "missing")]) == 2


def test_cli_eval_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    folder = _beir_folder(tmp_path / "mini")
    png = tmp_path / "modes.png"
    assert main(["eval", str(folder), "--one-chunk", "--no-progress", "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_eval_question_file_over_an_existing_index(
    tmp_path: Path, example_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = tmp_path / "idx"
    assert main(["add", str(example_dir), "--dir", str(index), "--no-progress", "--json"]) == 0
    capsys.readouterr()
    qa = tmp_path / "qa.jsonl"
    qa.write_text(
        '{"question": "How long is a password reset link valid?", "gold_sources": ["password-reset.txt"]}\n'
        '{"question": "How long is a password reset link valid?", "gold_sources": ["regions.json"]}\n'
    )
    assert main(["eval", str(qa), "--dir", str(index), "-k", "1", "--json", "--modes", "hybrid,keyword"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "questions" and data["queries"] == 2 and data["index_seconds"] is None
    for mode in data["modes"]:
        assert mode["Retrieval@1"] == pytest.approx(0.5)  # the first question is answered, the second not
    assert main(["eval", str(qa), "--no-progress"]) == 2  # a question file needs --dir


# -- issue 11: gold at file, page/row and chunk level; custom models; --reranker; warm-up ------------------
TODAIJI = [
    "東大寺は奈良県奈良市にある華厳宗の大本山の寺院である。",
    "盧舎那仏像は聖武天皇の発願で造立された大仏である。",
    "正倉院には聖武天皇の遺品を中心とする宝物が収められている。",
    "二月堂では毎年三月にお水取りの行事が行われる。",
]


def _make_pdf(path: Path, pages: list[str]) -> Path:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    for text in pages:
        c.drawString(72, 720, text)
        c.showPage()
    c.save()
    return path


def _mixed_corpus(root: Path) -> Path:
    """manual.pdf (3 pages), data.csv (2 rows) and, added separately, a Japanese text split into 4 chunks."""
    root.mkdir()
    _make_pdf(
        root / "manual.pdf",
        [
            "Installation requires a grounded power outlet.",
            "Cleaning: wipe the filter with a damp cloth.",
            "Refunds are accepted within fourteen days of purchase.",
        ],
    )
    (root / "data.csv").write_text(
        "name,notes\nkettle,boils water in ninety seconds\ntoaster,browns bread on both sides\n"
    )
    return root


def _todaiji() -> Document:
    return Document(page_content="\n\n".join(TODAIJI), metadata={"source": "jawiki:東大寺の仏像"})


def test_gold_level_is_chosen_from_the_gold_id() -> None:
    from finderledge.evaluation import gold_level, gold_matches

    assert [
        gold_level(g)
        for g in (
            "docs/faq.md",
            "manual.pdf:p3",
            "data.csv:r1",
            "jawiki:東大寺の仏像#2",
            "manual.pdf:p3#0",
            "jawiki:東大寺の仏像",
        )
    ] == ["file", "page", "page", "chunk", "chunk", "file"]
    page3 = {"source": "/x/docs/manual.pdf", "source_id": "manual.pdf:p3", "locator": "p3", "split_index": 0}
    assert gold_matches("manual.pdf", page3) and gold_matches("docs/manual.pdf", page3)
    assert gold_matches("manual.pdf:p3", page3) and gold_matches("docs/manual.pdf:p3", page3)
    assert not gold_matches("manual.pdf:p2", page3) and not gold_matches("other.pdf:p3", page3)
    assert gold_matches("manual.pdf:p3#0", page3) and not gold_matches("manual.pdf:p3#1", page3)
    chunk2 = {"source": "jawiki:東大寺の仏像", "_finderledge": {"split_index": 2, "split_count": 4}}
    assert gold_matches("jawiki:東大寺の仏像#2", chunk2) and gold_matches("jawiki:東大寺の仏像", chunk2)
    assert not gold_matches("jawiki:東大寺の仏像#1", chunk2) and not gold_matches("jawiki:東大寺#2", chunk2)
    row1 = {"source": "/x/data.csv", "source_id": "data.csv:r1", "locator": "r1", "split_index": 0}
    assert gold_matches("data.csv:r1", row1) and not gold_matches("data.csv:r2", row1)


def test_cli_eval_matches_gold_at_page_row_and_chunk_level(
    tmp_path: Path, minilm, capsys: pytest.CaptureFixture[str]
) -> None:
    index = tmp_path / "idx"
    with FinderLedge(index, embedding=minilm, chunk_size=100, chunk_overlap=0, show_progress=False) as fl:
        fl.add_document(_mixed_corpus(tmp_path / "docs"))
        fl.add_document(_todaiji())
        assert len(fl.get_split_documents(fl.list_documents(source="jawiki:東大寺の仏像")[0].id)) == 4
    qa = tmp_path / "qa.json"
    qa.write_text(
        json.dumps(
            [
                {"query": "refunds within fourteen days", "expected_source": "manual.pdf:p3"},
                {"query": "kettle boils water", "expected_source": "data.csv:r1"},
                {"query": "正倉院の宝物", "expected_source": "jawiki:東大寺の仏像#2"},
                {"query": "refunds within fourteen days", "expected_source": "manual.pdf"},
            ],
            ensure_ascii=False,
        )
    )
    assert (
        main(
            ["eval", str(qa), "--dir", str(index), "-k", "5", "--json", "--modes", "keyword", "--no-progress"]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["modes"][0]["Recall@5"] == pytest.approx(1.0)
    assert data["settings"]["gold_levels"] == {"file": 1, "page": 2, "chunk": 1}
    # the level matters: at k=1 the wrong page, row or chunk is not counted
    wrong = tmp_path / "wrong.json"
    wrong.write_text(
        json.dumps(
            [
                {"query": "refunds within fourteen days", "expected_source": "manual.pdf:p2"},
                {"query": "kettle boils water", "expected_source": "data.csv:r2"},
                {"query": "正倉院の宝物", "expected_source": "jawiki:東大寺の仏像#1"},
            ],
            ensure_ascii=False,
        )
    )
    assert (
        main(
            [
                "eval",
                str(wrong),
                "--dir",
                str(index),
                "-k",
                "1",
                "--json",
                "--modes",
                "keyword",
                "--no-progress",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["modes"][0]["Recall@1"] == 0.0


@pytest.fixture(scope="module")
def custom_models(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A sentence-transformers model saved to a path of its own (so its id is not the default's) and a cross-encoder."""
    from sentence_transformers import CrossEncoder, SentenceTransformer

    from finderledge.embeddings import default_model_path

    root = tmp_path_factory.mktemp("models")
    SentenceTransformer(default_model_path(), device="cpu").save(str(root / "my-embedder"))
    CrossEncoder(default_model_path(), num_labels=1, device="cpu").save(str(root / "my-cross-encoder"))
    return str(root / "my-embedder"), str(root / "my-cross-encoder")


def test_cli_eval_reopens_an_index_built_with_a_custom_model_and_reranks(
    tmp_path: Path, example_dir: Path, custom_models: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    embedder, cross_encoder = custom_models
    index = str(tmp_path / "idx")
    assert (
        main(
            [
                "add",
                str(example_dir),
                "--dir",
                index,
                "--embedding",
                f"sentence-transformers:{embedder}",
                "--no-progress",
            ]
        )
        == 0
    )
    qa = tmp_path / "qa.jsonl"
    qa.write_text(
        '{"question": "How long is a password reset link valid?", "gold_sources": ["password-reset.txt"]}\n'
    )
    capsys.readouterr()
    # without the model: refused, and the message says which option to pass
    assert main(["eval", str(qa), "--dir", index, "--no-progress"]) == 2
    assert "--embedding" in capsys.readouterr().err
    assert (
        main(
            [
                "eval",
                str(qa),
                "--dir",
                index,
                "--embedding",
                f"sentence-transformers:{embedder}",
                "--reranker",
                f"cross-encoder:{cross_encoder}",
                "--json",
                "--no-progress",
                "-k",
                "5",
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["settings"]["reranker"] == f"cross-encoder:{cross_encoder}"
    assert data["settings"]["rerank_candidates"] == 20
    assert {m["mode"] for m in data["modes"]} == {"hybrid", "vector", "keyword"}
    assert all(0.0 <= m["Retrieval@5"] <= 1.0 for m in data["modes"])  # an untrained head: order, not quality
    # a reranker that cannot be loaded is an error, not a silent first-stage evaluation
    assert (
        main(
            [
                "eval",
                str(qa),
                "--dir",
                index,
                "--embedding",
                f"sentence-transformers:{embedder}",
                "--reranker",
                str(tmp_path / "no-such-model"),
                "--no-progress",
            ]
        )
        == 2
    )
    assert "reranker" in capsys.readouterr().err


def test_each_mode_is_warmed_up_before_latency_is_timed(minilm) -> None:
    import time

    from finderledge.evaluation import QaItem

    calls = []

    def slow_first_reranker(query: str, documents: list) -> list[float]:  # a model that loads on first use
        calls.append(query)
        if len(calls) == 1:
            time.sleep(6)  # far above any search's own time, however loaded the machine
        return [0.0] * len(documents)

    with FinderLedge(
        embedding=minilm, reranker=slow_first_reranker, show_progress=False, env_file=None
    ) as fl:
        fl.add_texts(["A password reset link is valid for 30 minutes."], metadata={"source": "reset.txt"})
        items = [QaItem("1", "password reset link", ["reset.txt"])]
        reports = evaluate_questions(fl, items, ("hybrid", "keyword"), k=3, show_progress=False)
    assert len(calls) == 4  # one untimed warm-up search per mode, then the timed one
    for report in reports:
        assert report.latency_ms["p95"] < 3000, report.latency_ms


def test_one_chunk_does_not_change_a_reused_index(tmp_path: Path, minilm) -> None:
    folder = _beir_folder(tmp_path / "mini")
    index = tmp_path / "idx"
    evaluate(folder, persist_directory=index, modes=("keyword",), show_progress=False, embedding=minilm)
    evaluate(
        folder,
        persist_directory=index,
        modes=("keyword",),
        show_progress=False,
        embedding=minilm,
        one_chunk=True,
    )
    with FinderLedge(index, embedding=minilm, show_progress=False, env_file=None) as fl:
        assert (fl.settings.chunk_size, fl.settings.chunk_overlap) == (1000, 100)


def test_modes_run_interleaved_so_none_pays_for_another(minilm) -> None:
    """Timed searches alternate modes query by query (after every mode's warm-up): a slow phase of the
    process (a model settling, a burst of load) falls on every mode alike, not on whichever runs first."""
    from finderledge.evaluation import QaItem

    with FinderLedge(embedding=minilm, show_progress=False, env_file=None) as fl:
        fl.add_texts(["A password reset link is valid for 30 minutes."], metadata={"source": "reset.txt"})
        order: list[tuple[str, str]] = []
        search = fl.search

        def recording(query: str, **kw):  # type: ignore[no-untyped-def]
            order.append((kw["search_mode"], query))
            return search(query, **kw)

        fl.search = recording  # type: ignore[method-assign]
        items = [QaItem(str(i), f"reset link {i}", ["reset.txt"]) for i in range(3)]
        evaluate_questions(fl, items, ("hybrid", "vector", "keyword"), k=3, show_progress=False)
    modes = ["hybrid", "vector", "keyword"]
    assert order[:3] == [(m, "reset link 0") for m in modes]  # warm-up
    assert order[3:] == [(m, f"reset link {i}") for i in range(3) for m in modes]
