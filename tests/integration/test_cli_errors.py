"""How the ``finderledge`` command fails and what it prints on stderr: one line per failure or warning,
exit 2 for bad input or usage, exit 1 only when nothing was found, tracebacks only with ``--debug``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from finderledge.cli import commands as cli
from finderledge.cli.commands import main
from finderledge.errors import (
    ConfigurationError,
    DocumentNotFoundError,
    IncompatibleIndexError,
    LedgerCorruptError,
    LoadError,
    LockTimeoutError,
)

TEXTS = ["Password reset links are valid for thirty minutes.", "Refunds are paid within ten business days."]


def _cli(*args: str, cwd: Path, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m finderledge ARGS`` in a fresh interpreter (what a user's shell sees)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **(extra_env or {})}
    return subprocess.run(
        [sys.executable, "-m", "finderledge", *args],
        check=False,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a Python snippet in a fresh interpreter."""
    return subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=300,
    )


def _one_line(err: str) -> str:
    """The single line of ``err`` (fails when stderr holds more or less than one line)."""
    assert err.endswith("\n") and err.count("\n") == 1, f"expected one line on stderr, got {err!r}"
    assert "Traceback" not in err
    return err


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small index built by the command itself (two texts)."""
    d = tmp_path_factory.mktemp("cli-errors") / "idx"
    args = ["add", "-d", str(d), "--vector-store", "faiss", "--no-progress"]
    for text in TEXTS:
        args += ["--text", text]
    assert main(args) == 0
    return d


# -- a directory that holds no index ------------------------------------------------------------------
MISSING_INDEX_COMMANDS: list[list[str]] = [
    ["search", "x"],
    ["context", "x"],
    ["list"],
    ["stats"],
    ["remove", "some-id"],
]


@pytest.mark.parametrize("command", MISSING_INDEX_COMMANDS, ids=lambda c: c[0])
def test_a_missing_index_is_one_line_exit_2_and_nothing_is_created(
    tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no" / "such" / "index"
    assert main([*command, "--dir", str(missing)]) == 2
    captured = capsys.readouterr()
    assert f"no FinderLedge index at {missing}" in _one_line(captured.err)
    assert captured.out == ""
    assert not (tmp_path / "no").exists()


def test_eval_of_a_question_file_without_an_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qa = tmp_path / "qa.jsonl"
    qa.write_text('{"question": "q?", "gold_sources": ["a.txt"]}\n')
    missing = tmp_path / "nothing-here"
    assert main(["eval", str(qa), "--dir", str(missing), "--no-progress"]) == 2
    assert f"no FinderLedge index at {missing}" in _one_line(capsys.readouterr().err)
    assert not missing.exists()


@pytest.mark.parametrize("command", MISSING_INDEX_COMMANDS, ids=lambda c: c[0])
def test_an_existing_directory_without_a_ledger_is_not_an_index(
    tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes").mkdir()
    assert main([*command, "--dir", str(tmp_path / "notes")]) == 2
    assert "no FinderLedge index at" in _one_line(capsys.readouterr().err)
    assert list((tmp_path / "notes").iterdir()) == []  # nothing written into it


def test_a_dir_below_a_file_is_one_line_without_traceback(tmp_path: Path) -> None:
    (tmp_path / "plain-file").write_text("not a directory")
    for target in [str(tmp_path / "plain-file" / "x"), "/dev/null/x"]:
        proc = _cli("stats", "--dir", target, cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert f"no FinderLedge index at {target}" in _one_line(proc.stderr)


# -- bad input on an existing index ---------------------------------------------------------------
@pytest.mark.parametrize("query", ["", "   ", "\n"])
@pytest.mark.parametrize("command", ["search", "context"])
def test_an_empty_query_is_bad_input(
    index_dir: Path, command: str, query: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, query, "--dir", str(index_dir)]) == 2
    assert "query" in _one_line(capsys.readouterr().err)


def test_bad_filter_json_names_the_option(index_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "password", "--dir", str(index_dir), "--filter", "{oops"]) == 2
    assert "--filter" in _one_line(capsys.readouterr().err)


def test_nothing_found_is_exit_1(index_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["search", "qqzzxxyy", "--dir", str(index_dir), "-m", "keyword"]) == 1
    assert main(["context", "qqzzxxyy", "--dir", str(index_dir), "-m", "keyword"]) == 1
    assert main(["remove", "no-such-id", "--dir", str(index_dir)]) == 1
    assert capsys.readouterr().err == ""


def test_another_embedding_model_is_one_line_exit_2(
    index_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(["search", "password", "--dir", str(index_dir), "--embedding", "openai:text-embedding-3-small"])
        == 2
    )
    assert "--embedding" in _one_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    "argv", [[], ["search"], ["search", "x", "-k", "many"], ["nope"], ["list", "--bogus"]]
)
def test_usage_errors_are_one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = _one_line(capsys.readouterr().err)
    assert err.startswith("finderledge") and "error: " in err and "--help" in err


# -- add ------------------------------------------------------------------------------------------
def test_add_of_a_missing_path_is_not_indexed_as_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for typo in ["typo", "docs/typo.md", str(tmp_path / "missing.txt")]:
        d = tmp_path / "new-index"
        assert main(["add", typo, "--dir", str(d), "--no-progress"]) == 2
        err = _one_line(capsys.readouterr().err)
        assert f"no such file or directory: {typo}" in err and "--text" in err
        assert not d.exists()


def test_add_of_a_missing_path_leaves_an_existing_index_unchanged(
    index_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["add", "typo", "--dir", str(index_dir)]) == 2
    _one_line(capsys.readouterr().err)
    assert main(["list", "--dir", str(index_dir), "--json"]) == 0
    assert "typo" not in capsys.readouterr().out


@pytest.fixture
def model_exported(minilm: Any) -> None:
    """The default model's one-time ONNX export is done, as on any run after a user's first: its warning is not
    the one line these tests read (run alone, this module would otherwise be the session's first to embed)."""
    minilm.embed_query("warm up")


def test_add_where_every_file_is_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model_exported: None
) -> None:
    (tmp_path / "data.xyz").write_text("some text in an unsupported format")
    d = tmp_path / "a" / "b" / "idx"
    assert main(["add", str(tmp_path / "data.xyz"), "--dir", str(d), "--no-progress"]) == 2
    assert "unsupported file type '.xyz'" in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "a").exists()  # the directories the command created are gone


def test_add_where_every_file_is_skipped_keeps_an_existing_index(
    index_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], model_exported: None
) -> None:
    (tmp_path / "data.xyz").write_text("some text in an unsupported format")
    assert main(["add", str(tmp_path / "data.xyz"), "--dir", str(index_dir), "--no-progress"]) == 2
    assert "unsupported file type '.xyz'" in _one_line(capsys.readouterr().err)
    assert index_dir.is_dir() and (index_dir / "ledger.sqlite3").is_file()


def test_add_needs_a_path_or_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["add", "--dir", str(tmp_path / "idx")]) == 2
    assert "--text" in _one_line(capsys.readouterr().err)
    assert main(["add", "--text", "  ", "--dir", str(tmp_path / "idx")]) == 2
    assert "--text" in _one_line(capsys.readouterr().err)
    assert not (tmp_path / "idx").exists()


# -- library errors -------------------------------------------------------------------------------
def _raiser(exc: BaseException) -> Callable[[object], int]:
    def command(args: object) -> int:
        raise exc

    return command


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (ConfigurationError("setting 'k': expected a positive integer, got 0"), 2),
        (IncompatibleIndexError("built with another model"), 2),
        (LoadError("a.pdf", "cannot read PDF"), 2),
        (LedgerCorruptError("idx/ledger.sqlite3", "not a database"), 2),
        (LockTimeoutError("the write lock is held by pid 42"), 2),
        (ValueError("bad value\nover two lines"), 2),
        (FileNotFoundError(2, "No such file or directory", "x.txt"), 2),
        (PermissionError(13, "Permission denied", "/root/idx"), 2),
        (DocumentNotFoundError("no document with id 'abc'"), 1),
        (RuntimeError("a bug"), 2),
        (KeyError("parent_id"), 2),
    ],
)
def test_library_errors_map_to_exit_codes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], exc: Exception, code: int
) -> None:
    monkeypatch.setitem(cli.COMMANDS, "stats", _raiser(exc))
    assert main(["stats"]) == code
    err = _one_line(capsys.readouterr().err)
    assert err.startswith("finderledge stats: error: ")
    if isinstance(exc, (RuntimeError, KeyError)) and not isinstance(exc, DocumentNotFoundError):
        assert type(exc).__name__ in err and "--debug" in err  # an unexpected error says what it was


@pytest.mark.parametrize("argv", [["--debug", "stats"], ["stats", "--debug"]])
def test_debug_shows_the_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    monkeypatch.setitem(cli.COMMANDS, "stats", _raiser(RuntimeError("a bug")))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "RuntimeError: a bug" in err


def test_debug_on_every_subcommand() -> None:
    parser = cli.build_parser()
    for argv in (
        ["add", "x"],
        ["search", "q"],
        ["context", "q"],
        ["remove", "i"],
        ["list"],
        ["stats"],
        ["eval", "qa.json"],
    ):
        assert parser.parse_args([*argv, "--debug"]).debug is True
        assert parser.parse_args(["--debug", *argv]).debug is True
        assert parser.parse_args(argv).debug is False


def test_interrupt_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(cli.COMMANDS, "stats", _raiser(KeyboardInterrupt()))
    assert main(["stats"]) == 130
    assert "interrupted" in _one_line(capsys.readouterr().err)


# -- warnings and logging -------------------------------------------------------------------------
def _pdf(path: Path, text: str, *, bad_xref: bool = False) -> Path:
    """A one-page PDF; ``bad_xref`` shifts its startxref pointer (pypdf warns, then recovers)."""
    pytest.importorskip("reportlab")
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path))
    c.drawString(72, 720, text)
    c.save()
    if bad_xref:
        data = path.read_bytes()
        head, _, tail = data.rpartition(b"startxref")
        offset = tail.split()[0]
        path.write_bytes(head + b"startxref\n" + str(int(offset) + 3).encode() + b"\n%%EOF\n")
    return path


@pytest.fixture
def mixed_folder(tmp_path: Path) -> Path:
    """A folder with a good text, a PDF pypdf warns about, a broken PDF and an unsupported file."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "good.txt").write_text("Invoices are sent on the first day of each month.")
    _pdf(folder / "warn.pdf", "The warranty covers the battery for two years.", bad_xref=True)
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    (folder / "data.xyz").write_text("unsupported")
    return folder


def test_add_prints_each_warning_once_on_one_line(mixed_folder: Path, tmp_path: Path) -> None:
    proc = _cli(
        "add",
        str(mixed_folder),
        "--dir",
        str(tmp_path / "idx"),
        "--vector-store",
        "faiss",
        "--no-progress",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert all(line.startswith("finderledge: warning: ") for line in lines), proc.stderr
    pypdf = [line for line in lines if "startxref" in line]
    assert len(pypdf) == len(set(pypdf)) >= 1 and all("pypdf" in line for line in pypdf)
    # a skipped file is named once in all the command prints (the report lists it)
    assert (proc.stdout + proc.stderr).count("broken.pdf") == 1
    assert (proc.stdout + proc.stderr).count("data.xyz") == 1
    assert "Traceback" not in proc.stderr


def test_verbose_shows_finderledge_info_but_no_third_party_noise(mixed_folder: Path, tmp_path: Path) -> None:
    proc = _cli(
        "add",
        str(mixed_folder),
        "--dir",
        str(tmp_path / "idx"),
        "--vector-store",
        "faiss",
        "--no-progress",
        "-v",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert any(line.startswith("finderledge: info: ") for line in lines), proc.stderr
    assert all(line.startswith(("finderledge: info: ", "finderledge: warning: ")) for line in lines), (
        proc.stderr
    )
    lowered = proc.stderr.lower()
    for noise in (
        "faiss.loader",
        "avx",
        "loading faiss",
        "sentence_transformers",
        "loading sentencetransformer",
    ):
        assert noise not in lowered, proc.stderr
    assert len([line for line in lines if "incorrect startxref" in line]) == 1


def test_quiet_shows_no_warnings(
    mixed_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = str(tmp_path / "idx")
    assert main(["add", str(mixed_folder), "--dir", d, "--vector-store", "faiss", "--no-progress", "-q"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "files seen: 4" in captured.out
    assert main(["-q", "stats", "--dir", str(tmp_path / "none")]) == 2  # errors still show
    _one_line(capsys.readouterr().err)


def test_python_warnings_and_self_printing_loggers_show_once(tmp_path: Path) -> None:
    code = (
        "import logging, sys, warnings\n"
        "from finderledge.cli import commands as cli\n"
        "noisy = logging.getLogger('noisy')\n"
        "noisy.addHandler(logging.StreamHandler(sys.stderr))\n"
        "def stats(args):\n"
        "    warnings.warn('mind the gap\\nsecond line')\n"
        "    noisy.warning('printed by its own handler')\n"
        "    logging.getLogger('finderledge.facade').warning('same message')\n"
        "    logging.getLogger('finderledge.facade').warning('same message')\n"
        "    logging.getLogger('some.lib').info('third-party detail')\n"
        "    logging.getLogger('finderledge.x').info('library detail')\n"
        "    return 0\n"
        "cli.COMMANDS['stats'] = stats\n"
        "sys.exit(cli.main(['stats', '-v']))\n"
    )
    proc = _python(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines.count("finderledge: warning: UserWarning: mind the gap second line") == 1, proc.stderr
    assert sum("printed by its own handler" in line for line in lines) == 1, proc.stderr
    assert lines.count("finderledge: warning: same message") == 1, proc.stderr
    assert "finderledge: info: library detail" in lines and "third-party detail" not in proc.stderr


def test_logging_is_restored_after_main(capsys: pytest.CaptureFixture[str]) -> None:
    import logging

    root, lib = logging.getLogger(), logging.getLogger("finderledge")
    before = (list(root.handlers), root.level, list(lib.handlers), lib.level)
    main(["-v", "stats", "--dir", "/nonexistent/finderledge-test"])
    capsys.readouterr()
    assert (list(root.handlers), root.level, list(lib.handlers), lib.level) == before
    assert all(isinstance(h, logging.NullHandler) for h in lib.handlers)


# -- issue 12 follow-ups: nothing silently defaulted or silently empty ---------------------------------
def _nothing_to_add(kind: str, folder: Path) -> list[str]:
    """A folder with nothing to add (``kind``) and the extra ``add`` options that make it so."""
    folder.mkdir()
    if kind == "hidden":
        (folder / ".notes.md").write_text("Hidden files are skipped.")
        (folder / ".cache").mkdir()
        (folder / ".cache" / "page.txt").write_text("So are hidden folders.")
    if kind == "excluded":
        (folder / "guide.md").write_text("Excluded by the glob.")
        return ["--exclude", "**/*.md"]
    if kind == "not-included":
        (folder / "guide.md").write_text("Not matched by the glob.")
        return ["--include", "**/*.pdf"]
    return []


@pytest.mark.parametrize("kind", ["empty", "hidden", "excluded", "not-included"])
def test_add_of_a_folder_with_nothing_to_add_fails_and_leaves_nothing(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "docs"
    extra = _nothing_to_add(kind, folder)
    d = tmp_path / "new" / "idx"
    assert main(["add", str(folder), *extra, "--dir", str(d), "--no-progress"]) == 2
    captured = capsys.readouterr()
    err = _one_line(captured.err)
    assert "nothing added: no files found in" in err and str(folder) in err
    assert ("--include/--exclude" in err) == (kind in ("excluded", "not-included"))
    assert captured.out == "" and not (tmp_path / "new").exists()  # no empty index left behind


def test_add_of_an_empty_folder_keeps_an_existing_index(
    index_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["add", str(tmp_path / "empty"), "--dir", str(index_dir), "--no-progress"]) == 2
    assert "nothing added" in _one_line(capsys.readouterr().err)
    assert main(["stats", "--dir", str(index_dir), "--json"]) == 0
    assert '"documents": 2' in capsys.readouterr().out


@pytest.fixture
def questions(tmp_path: Path) -> Path:
    qa = tmp_path / "qa.jsonl"
    qa.write_text('{"question": "How long are reset links valid?", "gold_sources": ["x"]}\n')
    return qa


@pytest.mark.parametrize("k", ["0", "-2"])
def test_eval_refuses_a_k_below_1(
    index_dir: Path, questions: Path, k: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", str(questions), "--dir", str(index_dir), "-k", k, "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert f"-k: expected a positive number of results per query, got {k}" in _one_line(captured.err)
    assert captured.out == ""


def test_evaluate_refuses_k_0_rather_than_defaulting(index_dir: Path, questions: Path) -> None:
    from finderledge.evaluation import evaluate

    with pytest.raises(ConfigurationError, match="k: expected a positive number"):
        evaluate(questions, persist_directory=index_dir, k=0, modes=["keyword"], show_progress=False)


@pytest.mark.parametrize("content", ["[]", "", "\n\n"], ids=["empty-list", "empty-file", "blank-lines"])
def test_eval_of_an_empty_question_file_is_bad_input(
    index_dir: Path, tmp_path: Path, content: str, capsys: pytest.CaptureFixture[str]
) -> None:
    qa = tmp_path / ("qa.json" if content == "[]" else "qa.jsonl")
    qa.write_text(content)
    assert main(["eval", str(qa), "--dir", str(index_dir), "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert f"{qa}: no questions" in _one_line(captured.err) and captured.out == ""


def test_a_missing_openai_key_is_a_configuration_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("langchain_openai")
    for key in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(key, raising=False)
    d = tmp_path / "idx"
    assert (
        main(
            [
                "add",
                "--text",
                "hello",
                "--embedding",
                "openai:text-embedding-3-small",
                "--dir",
                str(d),
                "--no-progress",
            ]
        )
        == 2
    )
    err = _one_line(capsys.readouterr().err)
    assert err.startswith(
        "finderledge add: error: setting 'embedding': 'openai:text-embedding-3-small' needs an "
        "OpenAI API key: set OPENAI_API_KEY"
    ), err
    assert "unexpected" not in err and "OpenAIError" not in err
    assert not d.exists()


def test_keys_list_and_revoke_need_an_index_like_the_other_read_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no" / "index"
    for argv in (["keys", "list"], ["keys", "revoke", "k1"]):
        assert main([*argv, "--dir", str(missing)]) == 2
        captured = capsys.readouterr()
        assert f"no FinderLedge index at {missing}" in _one_line(captured.err) and captured.out == ""
    assert not (tmp_path / "no").exists()
    # README's order: a key is created before 'serve' builds the index; listing it then works
    fresh = tmp_path / "index"
    assert main(["keys", "create", "--tenant", "alice", "--dir", str(fresh)]) == 0
    capsys.readouterr()
    assert main(["keys", "list", "--dir", str(fresh)]) == 0
    assert "alice" in capsys.readouterr().out


def test_every_option_has_a_help_text() -> None:
    import argparse

    missing: list[str] = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    walk(child, f"{path} {name}")
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")

    walk(cli.build_parser(), "finderledge")
    assert missing == []
    add_help = cli.build_parser()._subparsers._group_actions[0].choices["add"].format_help()  # type: ignore[union-attr]
    assert "switch the index to this vector store (rebuilt from the ledger)" in " ".join(add_help.split())


def test_a_recovered_corrupt_index_prints_warnings_not_errors(tmp_path: Path) -> None:
    d = tmp_path / "idx"
    assert (
        main(
            [
                "add",
                "--text",
                TEXTS[0],
                "--text",
                TEXTS[1],
                "--dir",
                str(d),
                "--vector-store",
                "faiss",
                "--no-progress",
                "-q",
            ]
        )
        == 0
    )
    (d / "bm25" / "manifest.json").write_text("{ not json")
    proc = _cli("search", "password reset", "--dir", str(d), "-m", "keyword", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines and all(line.startswith("finderledge: warning: ") for line in lines), proc.stderr
    assert "error:" not in proc.stderr and any("rebuil" in line for line in lines), proc.stderr
    assert "Password reset links" in proc.stdout
