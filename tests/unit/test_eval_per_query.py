"""Issue 31, item 3: ``finderledge eval`` shows each question's hits and warns about gold ids naming nothing.

A gold source written as the relative path given to ``add_document`` is resolved the same way; one that
matches no stored document is warned about once (and listed in the report) instead of scoring 0 silently.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import FinderLedge
from finderledge.evaluation import evaluate, format_report


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """mydocs/ beside the working folder work/, indexed as ``add_document("../mydocs")``."""
    docs = tmp_path / "mydocs"
    docs.mkdir()
    (docs / "refunds.txt").write_text("Refunds are paid within thirty days of the request.", encoding="utf-8")
    (docs / "passwords.txt").write_text("A password reset link stays valid for one hour.", encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    fl = FinderLedge(
        tmp_path / "index", embedding=DeterministicFakeEmbedding(size=16), show_progress=False, env_file=None
    )
    fl.add_document("../mydocs")
    yield fl
    fl.close()


def _questions(path: Path, rows: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_each_question_reports_its_gold_ids_and_their_ranks(
    project: FinderLedge, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    questions = _questions(
        tmp_path / "q.jsonl",
        [
            {"question": "how many days until refunds are paid", "gold_sources": ["../mydocs/refunds.txt"]},
            {"question": "password reset link valid", "gold_sources": ["../mydocs/passwords.txt", "gone.md"]},
            {"question": "refunds paid", "gold_sources": ["~/nowhere/at-all.txt"]},
        ],
    )
    with caplog.at_level(logging.WARNING, logger="finderledge"):
        report = evaluate(questions, ledger=project, modes=("keyword",), k=5)
    rows = report.modes[0].per_query
    assert [r["id"] for r in rows] == ["1", "2", "3"]
    assert rows[0]["hit"] and rows[0]["gold"] == [{"id": "../mydocs/refunds.txt", "rank": 1}]
    assert rows[1]["hits"] == 1 and rows[1]["gold"][0]["rank"] == 1 and rows[1]["gold"][1]["rank"] is None
    assert not rows[2]["hit"] and rows[2]["hits"] == 0
    assert report.modes[0].metrics["Retrieval@5"] == pytest.approx(2 / 3)  # the relative gold path counts
    # the gold ids naming nothing stored: warned once each, listed in the report
    assert report.settings["unmatched_gold"] == ["gone.md", "~/nowhere/at-all.txt"]
    warned = [r.getMessage() for r in caplog.records if "matches no stored document" in r.getMessage()]
    assert len(warned) == 2 and "'gone.md'" in warned[0]
    # always in the JSON; in the table only when asked
    data = json.loads(json.dumps(report.to_dict()))
    assert data["modes"][0]["per_query"][1]["gold"][1] == {"id": "gone.md", "rank": None}
    assert "per query" not in format_report(report)
    table = format_report(report, per_query=True)
    assert "2: hits keyword=1 | ../mydocs/passwords.txt 1; gone.md - | password reset link valid" in table
    assert "gold ids matching no stored document: gone.md" in table
