"""Every code sample in README.md and docs/ runs as written, so a sample can never drift from the code.

Each Python block runs in its own namespace (a block is self-contained: its imports and objects are its
own); ```bash blocks run each ``finderledge`` line through the CLI.  They run in a clean working directory
that holds only what a fresh clone has and the samples read (a copy of ``examples/``), so a sample naming a
file the repository does not have fails here.  The shell lines that install packages are what CI itself runs
(.ci/run), and the benchmark invocations under "Reproducing" are the benchmarks themselves (tens of
minutes), so neither is run here.  context.md, filters.md and scores.md run in their own test files.
"""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import EXAMPLES, ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN_ELSEWHERE = {
    "context.md": "test_context.py",
    "scores.md": "test_scores.py",
}
RUN_HERE = [
    "README.md",
    "formats.md",
    "filters.md",
    "keyword_store.md",
    "evaluation.md",
    "strategies.md",
    "embeddings.md",
    "scaling.md",
    "partitions.md",
]


def _blocks(page: Path, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_every_page_with_samples_is_run() -> None:
    with_samples = {p.name for p in PAGES if _blocks(p, "python") or _blocks(p, "bash")}
    assert with_samples == set(RUN_HERE) | set(RUN_ELSEWHERE), "a page gained samples: run them in a test"
    for page in PAGES:  # a shell sample must be fenced as bash to be run (an indented block would be skipped)
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"^    finderledge ", text, flags=re.MULTILINE), f"{page.name}: unfenced sample"
        assert not re.search(r"```(sh|shell|console)\n", text), f"{page.name}: fence shell samples as bash"


def test_every_path_a_sample_names_is_in_the_repository() -> None:
    """A sample that uploads or adds a file names one a fresh clone has (``docs/sla-ja.md`` did not exist)."""
    named = re.compile(r"""(?:@|["'\s=])((?:examples|docs|benchmarks)/[\w./-]+)""")
    for page in PAGES:
        for block in _blocks(page, "python") + _blocks(page, "bash"):
            for path in named.findall(block):
                assert (ROOT / path.rstrip(".")).exists(), (
                    f"{page.name}: a sample names {path}, not in the repo"
                )


@pytest.fixture
def workdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, minilm, shared_model_in_samples
) -> Iterator[Path]:
    """A clean working directory holding a copy of the clone's ``examples/`` and nothing else; FinderLedge
    (and the default embedding factory) use the already-loaded model."""
    import finderledge.facade
    from finderledge.embeddings import EmbeddingModelFactory

    real = finderledge.facade.FinderLedge
    real_create = EmbeddingModelFactory.create_embeddings

    def with_model(*args, **kwargs):
        if kwargs.get("embedding") is None:
            kwargs["embedding"] = minilm
        return real(*args, **kwargs)

    def default_model(*args, **kwargs):
        return minilm if not args and not kwargs else real_create(*args, **kwargs)

    monkeypatch.setattr(finderledge.facade, "FinderLedge", with_model)  # what the CLI opens
    monkeypatch.setattr(EmbeddingModelFactory, "create_embeddings", staticmethod(default_model))
    monkeypatch.setenv(
        "FINDERLEDGE_CACHE_DIR", str(tmp_path / "cache")
    )  # an ONNX export never lands in ~/.cache
    work = tmp_path / "work"
    shutil.copytree(EXAMPLES.parent, work / "examples", ignore=shutil.ignore_patterns(".*", "__pycache__"))
    monkeypatch.chdir(work)
    yield work


def _run_python(page: Path) -> dict:
    """Each block in a fresh namespace (a block that uses a name it does not define fails); returns their
    names together for the checks below."""
    names: dict = {}
    for block in _blocks(page, "python"):
        namespace: dict = {}
        exec(compile(block, page.name, "exec"), namespace)  # noqa: S102 - the page's own sample
        names.update(namespace)
    return names


def _run_shell(page: Path) -> list[str]:
    from finderledge.cli.commands import main

    ran = []
    for block in _blocks(page, "bash"):
        if "(run by tests/e2e/test_server_docs.py)" in block.splitlines()[0]:
            continue  # the service's samples start a server: that test runs them
        for line in block.splitlines():
            command = line.split("  #")[0].strip()
            if not command or command.startswith(
                ("pip install", "chroma run")
            ):  # the test started the server
                continue
            argv = shlex.split(command)
            assert argv[0] == "finderledge", f"{page.name}: only finderledge commands run here: {command}"
            assert main(argv[1:]) == 0, f"{page.name}: {command}"
            ran.append(command)
    return ran


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n == "embeddings.md" else n for n in RUN_HERE]
)  # embeddings.md exports the ONNX model once (~20-80 s)
def test_samples_run_as_written(
    workdir: Path,
    name: str,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    page = ROOT / name if name == "README.md" else ROOT / "docs" / name
    if name in (
        "README.md",
        "scaling.md",
    ):  # the servers the "Scaling out" samples name, each in a fresh namespace
        from pg_server import fresh_schema

        monkeypatch.setenv("DATABASE_URL", request.getfixturevalue("pg_url"))
        monkeypatch.setenv("FINDERLEDGE_DATABASE_SCHEMA", fresh_schema())
        monkeypatch.setenv("CHROMA_URL", request.getfixturevalue("chroma_server"))
        monkeypatch.setenv("FINDERLEDGE_CHROMA_COLLECTION", f"docs-{fresh_schema()}")
    namespace = _run_python(page)
    ran = _run_shell(page)
    if name == "README.md":
        assert namespace["context"].startswith("[1] (source: ")
        assert namespace["docs"] and all(d.metadata["doc_type_detected"] == "text" for d in namespace["docs"])
        out = capsys.readouterr().out
        assert "text:" in out  # the raw Japanese text was found, with its default source
        # list --filter '{"lang": "ja"}' finds the text that add --metadata stored
        assert "1 of 1 documents" in out
        assert any(c.startswith("finderledge remove") for c in ran) and (workdir / ".finderledge").is_dir()
    if name == "strategies.md":
        assert (
            namespace["results"].trace.strategy == "decompose"
            and len(namespace["results"].trace.sub_queries) == 2
        )
    if name == "embeddings.md":
        assert namespace["fast"].embeddings.effective_variant == "int8" and ran == [
            "finderledge add examples/data/guides/"
        ]
    if name == "scaling.md":
        out = capsys.readouterr().out
        assert "password-reset.txt" in out and "sla-ja.md" in out and "my-faiss" in out
        assert namespace["shared"].vector_store.location == "ledger"
        assert namespace["team"].vector_store.location == "shared"
        # the bulk_load() block's four calls each stored their page
        assert len(namespace["loaded"]) == 10
        assert "Release note 17: the export job now retries 2 times." in out
    if name == "evaluation.md":
        assert "nDCG@10" in namespace["format_report"](namespace["report"])
