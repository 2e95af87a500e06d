"""The finderledge command line, driven through its real entry point."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from finderledge.cli.commands import main


def _json(capsys: pytest.CaptureFixture[str]) -> object:
    return json.loads(capsys.readouterr().out)


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m finderledge ARGS`` in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-m", "finderledge", *args],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", **env},
        timeout=120,
    )


def test_add_search_context_list_stats_remove(
    tmp_path: Path, example_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = str(tmp_path / "idx")
    assert main(["add", str(example_dir), "-d", d, "--vector-store", "faiss", "--no-progress", "--json"]) == 0
    report = _json(capsys)
    assert report["files_seen"] == 7 and len(report["added"]) == 7 and report["totals"]["documents"] == 7

    assert main(["search", "How long is a password reset link valid?", "-d", d, "-k", "2", "--json"]) == 0
    hits = _json(capsys)
    assert len(hits) == 2 and hits[0]["metadata"]["file_name"] == "password-reset.txt"
    assert (
        main(
            [
                "search",
                "返金の申請",
                "-d",
                d,
                "-m",
                "keyword",
                "--filter",
                '{"file_name": "sla-ja.md"}',
                "--json",
            ]
        )
        == 0
    )
    assert {h["metadata"]["file_name"] for h in _json(capsys)} == {"sla-ja.md"}
    assert main(["search", "qqzzxxyy", "-d", d, "-m", "keyword"]) == 1  # nothing found
    assert "no results" in capsys.readouterr().out

    assert main(["context", "password reset link", "-d", d, "-k", "1"]) == 0
    assert capsys.readouterr().out.startswith("[1] (source: ")

    assert main(["list", "-d", d, "--json"]) == 0
    docs = _json(capsys)
    assert len(docs) == 7
    assert main(["stats", "-d", d, "--json"]) == 0
    stats = _json(capsys)
    assert (
        stats["documents"] == 7
        and stats["keyword_index_chunks"] == stats["vector_index_chunks"] == stats["chunks"]
    )

    assert main(["remove", docs[0]["id"], "nope", "-d", d, "--json"]) == 1  # one removed, one not found
    assert _json(capsys) == {"removed": [docs[0]["id"]], "not_found": ["nope"]}
    assert main(["add", str(example_dir), "-d", d, "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert (
        "added 1, unchanged 6" in out and "embedded 0, from cache 1" in out
    )  # the removed file came back from cache


def test_bad_input_exit_code_and_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = str(tmp_path / "idx")
    assert main(["search", "x", "-d", d, "--filter", "{oops"]) == 2
    assert "--filter" in capsys.readouterr().err
    assert main(["add", str(tmp_path / "missing"), "-d", d]) == 2
    assert "missing" in capsys.readouterr().err


def test_python_m_help() -> None:
    for args in (["--help"], ["add", "--help"], ["eval", "--help"]):
        proc = _cli(*args)
        assert proc.returncode == 0 and "usage: finderledge" in proc.stdout


def test_eval_reads_the_default_directory_like_the_other_commands(
    tmp_path: Path, example_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    qa = tmp_path / "qa.jsonl"
    qa.write_text(
        '{"question": "How long is a password reset link valid?", "gold_sources": ["password-reset.txt"]}\n'
    )
    # no index yet: an error naming the directory, and nothing is created
    assert main(["eval", str(qa), "--no-progress"]) == 2
    assert ".finderledge" in capsys.readouterr().err and not Path(".finderledge").exists()
    assert main(["add", str(example_dir), "--no-progress"]) == 0  # into ./.finderledge
    capsys.readouterr()
    assert main(["eval", str(qa), "--no-progress", "--json", "--modes", "keyword", "-k", "3"]) == 0
    data = _json(capsys)
    assert data["documents"] == 7 and data["modes"][0]["Retrieval@3"] == 1.0
    # $FINDERLEDGE_PERSIST_DIRECTORY wins over the default, as for search
    monkeypatch.setenv("FINDERLEDGE_PERSIST_DIRECTORY", str(tmp_path / "elsewhere"))
    assert main(["eval", str(qa), "--no-progress"]) == 2
    assert "elsewhere" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"finderledge {version('finderledge')}\n"
    proc = _cli("--version")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"finderledge {version('finderledge')}\n", "")


def test_add_text(tmp_path: Path, example_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = str(tmp_path / "idx")
    assert (
        main(
            [
                "add",
                "--text",
                "The warranty covers the battery for two years.",
                "--text",
                "docs/faq.md",
                str(example_dir / "guides" / "billing-faq.md"),
                "-d",
                d,
                "--vector-store",
                "faiss",
                "--no-progress",
                "--json",
            ]
        )
        == 0
    )
    assert len(_json(capsys)["added"]) == 3
    assert main(["search", "warranty battery", "-d", d, "-m", "keyword", "-k", "1", "--json"]) == 0
    assert _json(capsys)[0]["content"] == "The warranty covers the battery for two years."
    # a --text that looks like a path is text
    assert main(["search", "faq", "-d", d, "-m", "keyword", "--json"]) == 0
    assert any(h["content"] == "docs/faq.md" for h in _json(capsys))


def _help(*args: str) -> str:
    proc = _cli(*args, "--help", COLUMNS="200")
    assert proc.returncode == 0
    return proc.stdout


def test_top_level_help_and_add_help_agree() -> None:
    top = _help()
    summary = next(line.split(None, 1)[1] for line in top.splitlines() if line.strip().startswith("add "))
    add = _help("add")
    assert summary.strip().lower() in add.lower()  # the one-line summary is add's description
    assert "--text" in summary and "--text TEXT" in add
    paths_help = next(line for line in add.splitlines() if line.strip().startswith("PATH "))
    assert "text" not in paths_help.split(None, 1)[1]  # the positional takes paths only
    for option in ("--debug", "--verbose", "--quiet", "--version"):
        assert option in top
    for option in ("--debug", "--verbose", "--quiet"):
        assert option in add


def _synthetic_report() -> object:
    from finderledge.evaluation import EvalReport, ModeReport

    ms = {"mean": 12345.6, "p50": 1.2, "p95": 99999.9}
    metrics = {"nDCG@10": 0.5, "Recall@100": 0.91234, "Retrieval@100": 1.0, "KeywordRecall@100": 0.25}
    modes = [
        ModeReport(name, dict(metrics), dict(ms), {"p50": 1.0}, {"p50": 12345.67})
        for name in ("hybrid", "keyword", "vector+rerank-long-name")
    ]
    return EvalReport("scifact", "beir", 10, 20, 5, None, None, modes)


def test_eval_table_columns_align() -> None:
    import re

    from finderledge.evaluation import format_report

    lines = format_report(_synthetic_report()).splitlines()  # type: ignore[arg-type]
    header = next(i for i, line in enumerate(lines) if line.startswith("mode"))
    table = lines[header : header + 4]

    def right_edges(line: str) -> list[int]:  # where each value ends (a mode name has no spaces)
        return [m.end() for m in re.finditer(r"\S+", line)][1:]

    edges = [right_edges(line) for line in table[1:]]
    assert all(e == edges[0] for e in edges), "\n".join(table)
    assert len({len(line) for line in table}) == 1, "\n".join(table)
    head = table[0]  # each header name ends where its column's values end
    assert all(head[e - 1] != " " and (e == len(head) or head[e] == " ") for e in edges[0]), "\n".join(table)


def test_eval_plot_legend_does_not_cover_the_bars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from finderledge.evaluation import plot_report

    figures: list[object] = []
    monkeypatch.setattr(plt, "close", lambda fig=None: figures.append(fig))
    plot_report(_synthetic_report(), tmp_path / "plot.png")  # type: ignore[arg-type]
    fig = figures[0]
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    for ax in fig.axes:  # type: ignore[attr-defined]
        legend = ax.get_legend()
        if legend is None:
            continue
        box = legend.get_window_extent(renderer)
        covered = [p for p in ax.patches if box.overlaps(p.get_window_extent(renderer))]
        assert not covered, f"the legend of {ax.get_title()!r} covers {len(covered)} bar(s)"


def test_list_shows_each_documents_chunk_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = str(tmp_path / "idx")
    assert (
        main(
            [
                "add",
                "--text",
                "one short text",
                "--text",
                "another short text",
                "-d",
                d,
                "--vector-store",
                "faiss",
                "--no-progress",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["list", "-d", d, "--json"]) == 0
    assert [doc["chunks"] for doc in _json(capsys)] == [1, 1]
    assert main(["list", "-d", d]) == 0
    assert capsys.readouterr().out.count("chunks=1") == 2


LONG_TEXTS = [
    "Refunds are paid within ten business days. " * 12,
    "Password reset links are valid for thirty minutes and can be used once. " * 8,
]


def test_reindex_splits_again_records_the_settings_and_switches_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = str(tmp_path / "idx")
    assert (
        main(["add", "--text", LONG_TEXTS[0], "--text", LONG_TEXTS[1], "-d", d, "--no-progress", "-q"]) == 0
    )
    capsys.readouterr()
    assert main(["reindex", "-d", d, "--chunk-size", "200", "--chunk-overlap", "20", "--no-progress"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert re.fullmatch(
        r"split 2 documents again into (\d+) chunks \(embedded \d+, from cache \d+\) in [\d.]+ s", out[0]
    ), out
    chunks = int(out[0].split(" into ")[1].split()[0])
    assert chunks > 4  # ~500 and ~580 characters in chunks of at most 200
    assert out[1:] == [
        (
            "recorded settings: chunk_size 200, chunk_overlap 20, chunk_unit weighted, chunk_context off, "
            "vector_store faiss, vector_index flat"
        ),
        f"index now holds 2 documents, {chunks} chunks",
    ]
    assert main(["stats", "-d", d, "--json"]) == 0  # a fresh open reads the recorded settings
    stats = _json(capsys)
    assert stats["chunks"] == stats["vector_index_chunks"] == stats["keyword_index_chunks"] == chunks
    assert (stats["settings"]["chunk_size"], stats["settings"]["chunk_overlap"]) == (200, 20)

    assert main(["reindex", "-d", d, "--vector-index", "ivf_sq8", "--json"]) == 0  # alone: no re-split
    data = _json(capsys)
    assert data["reindexed"] is None and data["settings"]["vector_index"] == "ivf_sq8"
    assert main(["stats", "-d", d, "--json"]) == 0
    assert _json(capsys)["settings"]["vector_index"] == "ivf_sq8"
    assert main(["reindex", "-d", d, "--vector-index", "flat", "--json"]) == 0  # chroma takes flat only
    capsys.readouterr()
    assert main(["reindex", "-d", d, "--vector-store", "chroma", "--json"]) == 0  # alone: no re-split
    data = _json(capsys)
    assert data["reindexed"] is None and data["settings"]["vector_store"] == "chroma"
    assert data["totals"] == {"documents": 2, "chunks": chunks}
    assert main(["search", "refunds business days", "-d", d, "-m", "vector", "-k", "1", "--json"]) == 0
    assert "Refunds" in _json(capsys)[0]["content"]
    assert main(["stats", "-d", d, "--json"]) == 0
    assert _json(capsys)["settings"]["vector_store"] == "chroma"

    assert main(["reindex", "-d", d, "--chunk-overlap", "400"]) == 2  # validated like any setting
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "chunk_overlap" in err
    assert main(["reindex", "-d", str(tmp_path / "none")]) == 2
    assert "no FinderLedge index at" in capsys.readouterr().err and not (tmp_path / "none").exists()
