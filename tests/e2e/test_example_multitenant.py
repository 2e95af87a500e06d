"""examples/multitenant: no strategy ever returns another tenant's document.

Every strategy (basic, multi_query, decompose, hyde, compression, parent_document), for every user, through
``retrieve`` and through the LangChain retriever, with LLMs scripted to search for the OTHER users' secrets;
per-call filters that try to widen the view; dataset narrowing; the no-LLM and LLM-failure paths; and the
README's commands, run as written (the LLM ones against tests/fake_openai.py's server).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from conftest import ROOT
from fake_openai import fake_openai
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel

EXAMPLE = ROOT / "examples" / "multitenant"
USERS = ("alice", "bob", "carol", "dave")
# text found in one user's documents only (checked by test_markers_are_distinctive): a leak would show it
MARKERS = {
    "alice": ("Alice", "7,200,000", "Ken Sato", "Kestrel", "Heron", "アリス", "60万円", "佐藤健"),
    "bob": ("Bob", "9,850,000", "Yuki Mori", "Marlin", "Pelican", "Osaka", "ボブ", "82万円", "森由紀"),
    "carol": ("Carol", "4417", "キャロル"),
    "dave": ("Dave", "8812"),
}
DAVE_TEXTS = [
    "Dave's locker code is 8812 and his salary review is in May 2025.",
    "Dave の給与は月給45万円です。",
]
QUESTIONS = (
    "What is my salary?",
    "給与の振込日と手当は？",
    "When is the next salary review and who is the manager?",
    "Bob Ishikawa 9,850,000 yen Project Marlin Yuki Mori",
    "アリスの月給 60万円 Kestrel",
)
ALL = 20  # more than any tenant's chunks: every chunk the scope allows comes back, so a leak could not hide


def load_app() -> ModuleType:
    spec = importlib.util.spec_from_file_location("multitenant_app", EXAMPLE / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up
    spec.loader.exec_module(module)
    return module


app = load_app()


def others(user: str) -> list[str]:
    return [m for u, ms in MARKERS.items() if u != user for m in ms]


def attack_llm(strategy: str, user: str) -> FakeListChatModel:
    """An LLM whose every plan asks for the other users' secrets (rephrasings, sub-questions, a fake answer)."""
    theirs = [u for u in USERS if u != user]
    lines = [f"{' '.join(MARKERS[u][:4])} salary" for u in theirs] + [
        " ".join(MARKERS[u][-3:]) for u in theirs
    ]
    reply = " ".join(lines) if strategy == "hyde" else "\n".join(lines)
    return FakeListChatModel(responses=[reply])


def assert_isolated(docs: list[Document], user: str, dataset: str | None = None) -> None:
    for doc in docs:
        assert doc.metadata["user_id"] == user, (user, doc.metadata)
        if dataset is not None:
            assert doc.metadata["dataset"] == dataset, (dataset, doc.metadata)
        leaked = [m for m in others(user) if m in doc.page_content]
        assert not leaked, f"{user} sees {leaked} in {doc.page_content!r}"


@pytest.fixture(scope="module")
def rag(minilm: Any) -> Iterator[Any]:
    """Every tenant in one in-memory index: the sample folder (add_document) and dave's texts (add_texts)."""
    with app.TenantRAG(embedding=minilm) as tenants:
        documents, chunks = tenants.add_folder(EXAMPLE / "data")
        assert documents == 9 and chunks > documents  # small chunks: several per document
        tenants.add_texts("dave", "notes", DAVE_TEXTS)
        yield tenants


def test_markers_are_distinctive() -> None:
    """Each marker is in its user's documents and in nobody else's (else the leak checks would prove nothing)."""
    texts = {
        u: " ".join(p.read_text(encoding="utf-8") for p in (EXAMPLE / "data" / u).rglob("*.md"))
        for u in USERS
        if u != "dave"
    }
    texts["dave"] = " ".join(DAVE_TEXTS)
    for user, markers in MARKERS.items():
        for marker in markers:
            assert marker in texts[user], (user, marker)
            assert not any(marker in texts[o] for o in USERS if o != user), (user, marker)


def test_without_the_scope_the_attack_queries_do_reach_other_tenants(rag: Any) -> None:
    """The control: the searches the attacking LLMs write find other users' documents when nothing scopes them."""
    for user in USERS:
        for text in attack_llm("multi_query", user).responses[0].splitlines():
            owners = {r.metadata["user_id"] for r in rag.fl.search(text, k=ALL)}
            assert owners - {user}, text


@pytest.mark.parametrize("strategy", app.STRATEGIES)
def test_no_strategy_returns_another_tenants_document(
    rag: Any, strategy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for user in USERS:
        monkeypatch.setattr(rag, "llm", attack_llm(strategy, user))
        view = rag.for_user(user)
        seen: set[str] = set()
        for question in QUESTIONS:
            got = view.retrieve(question, strategy, k=ALL)
            assert_isolated(got.documents, user)
            seen |= {d.metadata.get("source") or d.page_content for d in got.documents}
            if strategy in app.LLM_STRATEGIES:  # the LLM's plan ran: the other users' secrets were searched
                assert got.fallback is None
                assert any(m in " ".join(got.sub_queries) for m in others(user)), got.sub_queries
            if strategy != "compression":  # retrieve() is already that retriever's invoke
                assert_isolated(view.retriever(strategy, k=ALL).invoke(question), user)
        if strategy != "compression":  # the user does see their own documents, all of them
            own = (
                {str(p) for p in (EXAMPLE / "data" / user).rglob("*.md")}
                if user != "dave"
                else set(DAVE_TEXTS)
            )
            assert seen == own, (user, strategy)
        else:
            assert seen, (user, strategy)


WIDENING = [
    {"user_id": "bob"},
    {"user_id": {"$ne": "alice"}},
    {"user_id": {"$in": ["bob", "carol", "dave"]}},
    {"dataset": "travel"},
]


@pytest.mark.parametrize("strategy", app.STRATEGIES)
def test_a_per_call_filter_cannot_widen_the_view(
    rag: Any, strategy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rag, "llm", attack_llm(strategy, "alice"))
    alice = rag.for_user("alice")
    for flt in WIDENING:  # AND-ed with user_id=alice: empty
        assert alice.retrieve("Bob's salary 9,850,000 yen", strategy, k=ALL, filter=flt).documents == [], flt
        assert alice.retriever(strategy, k=ALL).invoke("Bob's salary", filter=flt) == [], flt
        assert alice.retriever(strategy, k=ALL, filter=flt).invoke("Bob's salary") == [], flt
    either = {"$or": [{"user_id": "bob"}, {"user_id": "alice"}]}
    docs = alice.retrieve("salary", strategy, k=ALL, filter=either).documents
    assert docs
    assert_isolated(docs, "alice")
    narrowed = alice.retrieve("project budget", strategy, k=ALL, filter={"dataset": "projects"}).documents
    assert narrowed
    assert_isolated(narrowed, "alice", "projects")


@pytest.mark.parametrize(
    ("user", "dataset", "files"),
    [
        ("alice", "hr", {"salary.md", "給与.md"}),
        ("alice", "projects", {"kestrel.md"}),
        ("bob", "projects", {"marlin.md"}),
        ("bob", "travel", {"osaka-trip.md"}),
        ("alice", "travel", set()),
    ],
)
def test_a_dataset_narrows_the_users_view(rag: Any, user: str, dataset: str, files: set[str]) -> None:
    for strategy in ("basic", "parent_document", "compression"):
        docs = rag.for_user(user, dataset).retrieve("salary budget trip 給与", strategy, k=ALL).documents
        assert_isolated(docs, user, dataset)
        if strategy != "compression":
            assert {Path(d.metadata["source"]).name for d in docs} == files


def test_parent_document_returns_whole_files_of_matched_chunks(rag: Any) -> None:
    [parent] = (
        rag.for_user("alice", "hr")
        .retrieve("Who is my manager at the next review?", "parent_document", k=1)
        .documents
    )
    assert parent.page_content == (EXAMPLE / "data/alice/hr/salary.md").read_text(encoding="utf-8")
    matched = parent.metadata["_finderledge"]["matched_chunk_id"]
    assert "Ken Sato" in rag.fl.get_document(matched).page_content
    chunks = (
        rag.for_user("alice", "hr").retrieve("Who is my manager at the next review?", "basic", k=1).documents
    )
    assert len(chunks[0].page_content) < len(parent.page_content)  # a chunk, not the file


def test_compression_keeps_the_relevant_sentences(rag: Any) -> None:
    docs = rag.for_user("alice").retrieve("What is my annual base salary?", "compression").documents
    assert docs
    assert "7,200,000" in docs[0].page_content
    assert all(len(d.page_content) <= 160 for d in docs)  # sentences, not whole chunks


def test_llm_strategies_without_an_llm_say_so(rag: Any) -> None:
    assert rag.llm is None
    for strategy in app.LLM_STRATEGIES:
        with pytest.raises(app.NeedsLLM, match=f"strategy '{strategy}' needs an LLM: set LLM=openai:<model>"):
            rag.for_user("alice").retrieve("salary", strategy)
        with pytest.raises(app.NeedsLLM):
            rag.for_user("alice").retriever(strategy)


def test_an_llm_failure_falls_back_to_the_scoped_search(
    rag: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(rag, "llm", FakeListChatModel(responses=[""]))  # answers nothing usable
    for strategy in app.LLM_STRATEGIES:
        got = rag.for_user("alice").retrieve("Bob Ishikawa 9,850,000 Marlin", strategy, k=ALL)
        assert got.fallback and "wrote no" in got.fallback
        assert got.documents
        assert_isolated(got.documents, "alice")
    assert "searching the question as it is" in caplog.text


# -- the command line and the README's commands -------------------------------------------------------------------
@pytest.fixture
def cli(minilm: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    """``app.main(argv)`` in this process with the already-loaded model (the same MiniLM the CLI loads):
    returns (status, stdout, stderr)."""
    real = app.TenantRAG
    monkeypatch.setattr(app, "TenantRAG", lambda *a, **kw: real(*a, embedding=minilm, **kw))
    monkeypatch.delenv("LLM", raising=False)
    monkeypatch.delenv("LLM_BASE_URL", raising=False)

    def main(*argv: str) -> tuple[int, str, str]:
        status = app.main(list(argv))
        out, err = capsys.readouterr()
        return status, out, err

    return main


def readme_blocks(language: str = "bash") -> list[str]:
    """The ```bash blocks of the README (or ```python ones)."""
    text = (EXAMPLE / "README.md").read_text(encoding="utf-8")
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


def commands(block: str) -> list[str]:
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def run_readme_command(command: str, cli: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    """A README command through ``app.main``: its ``NAME=value`` prefixes set, ``${NAME:-default}`` expanded as
    bash does, then exactly its arguments (the process itself is run by test_readme_runs_as_a_process)."""
    expanded = re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: os.environ.get(m[1]) or m[2], command)
    words = shlex.split(expanded)
    while re.fullmatch(r"[A-Z_]+=.*", words[0]):
        name, _, value = words.pop(0).partition("=")
        monkeypatch.setenv(name, value)
    assert words[:2] == ["python", "examples/multitenant/app.py"], command
    return cli(*words[2:])


def results_of(stdout: str) -> dict[str, list[str]]:
    """Per ``=== strategy`` section, the result lines (``N. [user/dataset] file`` and its text)."""
    sections: dict[str, list[str]] = {}
    current: list[str] = []
    for line in stdout.splitlines():
        if line.startswith("=== "):
            current = sections.setdefault(line.split()[1], [])
        elif not line.startswith(("  searched:", "note:", "skipped:")):
            current.append(line)
    return sections


def check_output(stdout: str, user: str) -> dict[str, list[str]]:
    """Every result line is ``user``'s and shows no other user's text; returns the sections."""
    sections = results_of(stdout)
    assert sections
    for lines in sections.values():
        for line in lines:
            owner = re.match(r"\d+\. \[(\w+)/", line)
            assert owner is None or owner.group(1) == user, line
            assert not any(m in line for m in others(user)), line
    return sections


@pytest.mark.slow
def test_readme_commands_without_an_llm(cli: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    plain, with_llm = (commands(b) for b in readme_blocks())
    assert len(plain) == 4 and len(with_llm) == 2
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    outputs = [run_readme_command(command, cli, monkeypatch) for command in plain]
    assert [status for status, _, _ in outputs] == [0, 0, 0, 0]
    every, japanese, widen, persisted = (out for _, out, _ in outputs)

    sections = check_output(every, "alice")
    assert list(sections) == list(app.STRATEGIES)
    assert every.count("skipped: strategy") == len(app.LLM_STRATEGIES)
    assert "7,200,000" in "\n".join(sections["basic"]) and "7,200,000" in "\n".join(sections["compression"])
    assert "[alice/hr] salary.md" in "\n".join(sections["parent_document"])

    check_output(japanese, "bob")
    assert re.search(r"1\. \[bob/hr\] 給与\.md", japanese) and "82万円" in japanese

    assert check_output(widen, "alice") == {"basic": ["  (no documents)"]}

    check_output(persisted, "carol")
    assert "1. [carol/support] 返金ポリシー.md" in persisted
    assert re.search(
        r"^indexed 9 documents from data/ \([1-9]\d* new chunks\)$", persisted, flags=re.MULTILINE
    )
    assert (tmp_path / "multitenant-index" / "ledger.sqlite3").is_file()


@pytest.mark.slow
def test_readme_commands_with_an_llm(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _, with_llm = (commands(b) for b in readme_blocks())
    asked: list[str] = []

    def reply(body: dict[str, Any]) -> list[str]:  # plans that search for bob's and carol's secrets
        asked.append(body["messages"][-1]["content"])
        return [
            "Bob Ishikawa salary 9,850,000 yen Yuki Mori\n",
            "ボブの月給 82万円 森由紀\n",
            "Carol extension 4417",
        ]

    with fake_openai(reply=reply) as (base_url, handler):
        monkeypatch.setenv("LLM_BASE_URL", base_url)
        outputs = [run_readme_command(command, cli, monkeypatch) for command in with_llm]
    assert [status for status, _, _ in outputs] == [0, 0]
    assert len(handler.requests) == 2 and all(r["model"] == "local-model" for r in handler.requests)
    assert "rephrasings" in asked[0] and "sub-questions" in asked[1]
    for (_, out, _), strategy in zip(outputs, ("multi_query", "decompose")):
        assert "note:" not in out  # the plans ran
        assert list(check_output(out, "alice")) == [strategy]
        assert "  searched: Bob Ishikawa salary 9,850,000 yen Yuki Mori" in out
        assert re.search(r"^1\. \[alice/hr\] salary\.md$", out, flags=re.MULTILINE), out


@pytest.mark.slow
def test_readme_python_sample(
    cli: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    [code] = readme_blocks("python")
    monkeypatch.chdir(EXAMPLE)
    monkeypatch.setitem(sys.modules, "app", app)  # `from app import TenantRAG` (with the loaded model)
    exec(compile(code, "README.md", "exec"), {})  # noqa: S102 - the README's own sample
    rows = [line.split(" ", 2) for line in capsys.readouterr().out.splitlines()]
    assert rows and all(user == "alice" for user, _, _ in rows)
    assert {Path(source).name for _, _, source in rows} == {"salary.md", "給与.md", "kestrel.md"}


@pytest.mark.slow
def test_readme_runs_as_a_process(tmp_path: Path) -> None:
    """The README's first command exactly as written, in a fresh process (the default model, offline)."""
    command = commands(readme_blocks()[0])[0]
    env = {k: v for k, v in os.environ.items() if k not in ("LLM", "LLM_BASE_URL")}
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**env, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert list(check_output(done.stdout, "alice")) == list(app.STRATEGIES)
    assert "1. [alice/hr] salary.md" in done.stdout


def test_cli_reports_an_llm_failure_and_stays_in_the_tenant(
    cli: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with fake_openai() as (base_url, handler):
        handler.fail = True
        status, out, _ = cli(
            "--user",
            "bob",
            "--llm",
            "openai:local-model",
            "--llm-base-url",
            base_url,
            "--strategy",
            "hyde",
            "Alice's salary 7,200,000 Kestrel",
        )
    assert status == 0
    assert handler.requests  # the model was asked, and failed
    assert re.search(
        r"^note: hyde fell back to the plain search, the LLM failed: .*Error code: 500",
        out,
        flags=re.MULTILINE,
    ), out
    assert "strategy hyde: the LLM failed" in caplog.text
    check_output(out, "bob")
    assert "1. [bob/" in out


def test_cli_refuses_a_named_llm_strategy_without_an_llm(cli: Any) -> None:
    status, out, _ = cli("--user", "alice", "--strategy", "decompose", "salary")
    assert status == 2
    assert "skipped: strategy 'decompose' needs an LLM" in out


def test_cli_reports_bad_settings_in_one_line(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    status, _, err = cli("--user", "alice", "--llm", "mistral:large", "salary")
    assert status == 2
    assert err.startswith("error: llm: unknown provider 'mistral'")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    status, _, err = cli("--user", "alice", "--llm", "openai:gpt-4o-mini", "salary")  # no key, no base URL
    assert status == 2
    assert err.startswith("error: llm 'openai:gpt-4o-mini': set OPENAI_API_KEY")


def test_a_persisted_index_is_not_indexed_again(tmp_path: Path, minilm: Any) -> None:
    with app.TenantRAG(tmp_path / "index", embedding=minilm) as first:
        documents, _ = first.add_folder()
    with app.TenantRAG(tmp_path / "index", embedding=minilm) as again:
        assert again.add_folder() == (documents, 0)
        assert_isolated(again.for_user("carol").retrieve("返金", k=ALL).documents, "carol")
