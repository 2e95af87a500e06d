"""Issue 44, "the CLI reaches the API": ``add --metadata``, ``--score-threshold``, ``--mmr`` (``--fetch-k``,
``--lambda-mult``) and the ``answer`` command (extractive, or an LLM through the same settings as ``serve`` and
``mcp``), through the real entry point and, for the LLM, a real command process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_openai import REPLY, fake_openai

from finderledge import NO_CONTEXT, FinderLedge
from finderledge.cli.commands import main
from finderledge.rag.answer import EXTRACTIVE_NOTE

NONSENSE = "qqzzxxyy wibble"


def _out(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().out


@pytest.fixture
def index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """Three near-copies about refunds, one text on shipping, one Japanese text with its metadata."""
    d = str(tmp_path / "idx")
    texts = [
        "Refunds are accepted within 30 days of delivery.",
        "Refunds are accepted within 30 days of the delivery date.",
        "Refunds are accepted within thirty days of delivery.",
        "Refunds of shipping costs: shipping is refunded only for damaged parcels.",
    ]
    assert main(["add", "-d", d, "--no-progress", *[a for t in texts for a in ("--text", t)]]) == 0
    assert (
        main(
            [
                "add",
                "-d",
                d,
                "--text",
                "返金は商品到着から30日以内に申請できます。",
                "--metadata",
                '{"lang": "ja"}',
            ]
        )
        == 0
    )
    capsys.readouterr()
    return d


def test_add_metadata_reaches_list_filter_and_search(index: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "-d", index, "--filter", '{"lang": "ja"}', "--json"]) == 0  # the README's own line
    listed = json.loads(_out(capsys))
    assert len(listed) == 1 and listed[0]["chars"] == len("返金は商品到着から30日以内に申請できます。")
    assert main(["search", "返金", "-d", index, "--filter", '{"lang": "ja"}', "--json"]) == 0
    assert [h["metadata"]["lang"] for h in json.loads(_out(capsys))] == ["ja"]


def test_add_metadata_on_files_wins_over_front_matter_keys_it_shares(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text(
        "---\nlang: en\nteam: billing\n---\n# Invoices\n\nInvoices are sent monthly.\n"
    )
    (folder / "b.txt").write_text("Backups run every night.")
    d = str(tmp_path / "idx")
    assert (
        main(["add", str(folder), "-d", d, "--metadata", '{"lang": "ja", "tenant": "a"}', "--no-progress"])
        == 0
    )
    capsys.readouterr()
    assert main(["list", "-d", d, "--filter", '{"tenant": "a"}', "--json"]) == 0
    assert len(json.loads(_out(capsys))) == 2  # every file of the call
    with FinderLedge(d, show_progress=False) as fl:
        stored = {Path(doc.metadata["source"]).name: doc.metadata for doc in fl.list_documents()}
    assert stored["a.md"]["lang"] == "ja" and stored["a.md"]["team"] == "billing"  # shared key: --metadata's
    assert stored["b.txt"]["lang"] == "ja"


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("{lang: ja}", "--metadata: expected a JSON object"),
        ('["ja"]', '--metadata: expected a JSON object such as \'{"lang": "ja"}\', got list'),
        ('{"_finderledge": 1}', "--metadata: key '_finderledge' holds FinderLedge's own fields"),
    ],
)
def test_a_bad_metadata_option_is_named_and_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str, said: str
) -> None:
    d = tmp_path / "idx"
    assert main(["add", "--text", "hello", "-d", str(d), "--metadata", given]) == 2
    assert said in capsys.readouterr().err and not d.exists()


def test_score_threshold_leaves_a_nonsense_query_without_results(
    index: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["search", NONSENSE, "-d", index]) == 0  # without a threshold: the nearest texts, scored ~0
    assert main(["search", NONSENSE, "-d", index, "--score-threshold", "0.2"]) == 1
    assert _out(capsys).endswith("no results (none scored at least --score-threshold 0.2)\n")
    assert main(["search", NONSENSE, "-d", index, "--score-threshold", "0.2", "--json"]) == 1
    assert json.loads(_out(capsys)) == []
    assert main(["context", NONSENSE, "-d", index, "--score-threshold", "0.2"]) == 1
    assert _out(capsys) == NO_CONTEXT + "\n"
    assert main(["answer", NONSENSE, "-d", index, "--score-threshold", "0.2", "--json"]) == 1
    assert json.loads(_out(capsys))["sources"] == []
    # a real question keeps the results that pass it
    assert (
        main(["search", "How long do refunds take?", "-d", index, "--score-threshold", "0.2", "--json"]) == 0
    )
    assert all(h["score"] >= 0.2 for h in json.loads(_out(capsys)))
    assert (
        main(["context", "How long do refunds take?", "-d", index, "--score-threshold", "0.2", "-k", "1"])
        == 0
    )
    assert _out(capsys).startswith("[1] (source: ")
    assert main(["search", "x", "-d", index, "--score-threshold", "1.5"]) == 2
    assert "--score-threshold: expected a number in [0, 1], got '1.5'" in capsys.readouterr().err


def test_mmr_gives_the_python_apis_results(index: str, capsys: pytest.CaptureFixture[str]) -> None:
    query = "refunds accepted within 30 days"
    assert main(["search", query, "-d", index, "-k", "3", "--json"]) == 0
    plain = [h["content"] for h in json.loads(_out(capsys))]
    args = [
        "search",
        query,
        "-d",
        index,
        "-k",
        "3",
        "--mmr",
        "--fetch-k",
        "5",
        "--lambda-mult",
        "0.3",
        "--json",
    ]
    assert main(args) == 0
    diverse = json.loads(_out(capsys))
    with FinderLedge(index, show_progress=False) as fl:
        api = fl.search(query, k=3, mmr=True, fetch_k=5, lambda_mult=0.3)
    assert [h["id"] for h in diverse] == [r.id for r in api]
    assert all("Refunds are accepted" in text for text in plain)  # three near-copies
    assert any("shipping" in h["content"] for h in diverse)  # MMR brings the other text in
    assert main(["context", query, "-d", index, "-k", "3", "--mmr", "--lambda-mult", "0.3"]) == 0
    assert "shipping" in _out(capsys)
    assert main(["search", query, "-d", index, "--fetch-k", "5"]) == 2
    assert "--fetch-k: applies with --mmr only" in capsys.readouterr().err


def test_answer_without_an_llm_is_extractive_and_cites_its_sources(
    index: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["answer", "How long do I have to ask for a refund?", "-d", index, "-k", "2"]) == 0
    out = _out(capsys)
    assert out.startswith(EXTRACTIVE_NOTE) and "\n[1] Refunds" in out
    assert "\nsources:\n[1] text:" in out and "\n[2] text:" in out
    assert main(["answer", "How long do I have to ask for a refund?", "-d", index, "-k", "2", "--json"]) == 0
    data = json.loads(_out(capsys))
    assert data["extractive"] is True and data["model"] is None and len(data["sources"]) == 2
    assert data["sources"][0]["passage"].startswith("Refunds")


def test_answer_with_an_llm_named_by_option_or_variable(
    index: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with fake_openai() as (url, handler):
        question = "How long do I have to ask for a refund?"
        argv = [
            "answer",
            question,
            "-d",
            index,
            "-k",
            "2",
            "--llm",
            "openai:local-test-model",
            "--llm-base-url",
            url,
        ]
        assert main(argv) == 0
        out = _out(capsys)
        assert out.startswith("".join(REPLY)) and "\nsources:\n[1] text:" in out
        sent = handler.requests[-1]
        assert "[1] (source: text:" in sent["messages"][0]["content"]
        assert sent["messages"][-1] == {"role": "user", "content": question}
        # the variables serve and mcp read
        monkeypatch.setenv("FINDERLEDGE_LLM", "openai:from-the-environment")
        monkeypatch.setenv("FINDERLEDGE_LLM_BASE_URL", url)
        assert main(["answer", question, "-d", index, "--json"]) == 0
        data = json.loads(_out(capsys))
        assert data["model"] == "from-the-environment" and data["extractive"] is False
        assert data["answer"] == "".join(REPLY) and data["sources"]
        # in a command process of its own, as a user runs it
        done = subprocess.run(
            [sys.executable, "-m", "finderledge", "answer", question, "-d", index, "-k", "1"],
            capture_output=True,
            text=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("".join(REPLY)) and "sources:\n[1] text:" in done.stdout
        handler.fail = True
        assert main(["answer", question, "-d", index]) == 2
        assert "model crashed" in capsys.readouterr().err
    assert main(["answer", "refund", "-d", index, "--llm", "nope:model"]) == 2
    assert "llm: unknown provider 'nope'" in capsys.readouterr().err


def test_help_lists_the_new_options() -> None:
    from finderledge.cli.commands import build_parser

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert "answer" in parser.format_help()
    for name in ("search", "context", "answer"):
        text = commands[name].format_help()
        for option in ("--score-threshold", "--mmr", "--fetch-k", "--lambda-mult"):
            assert option in text, (name, option)
    assert (
        "--llm" in commands["answer"].format_help() and "--llm-base-url" in commands["answer"].format_help()
    )
    assert "--metadata" in commands["add"].format_help()
