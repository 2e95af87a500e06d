"""Run ``finderledge serve`` as a real process on a free loopback port (for browser, load and CLI tests)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_server(
    directory: Path,
    *,
    workers: int = 1,
    args: Sequence[str] = (),
    timeout: float = 180.0,
    log: Path | None = None,
) -> Iterator[str]:
    """Start the server over ``directory``; yield its base URL once ``/api/v1/health`` answers 200; stop it."""
    port = free_port()
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    out: Any = open(log, "wb") if log is not None else subprocess.DEVNULL  # noqa: SIM115
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "finderledge",
            "serve",
            str(directory),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            str(workers),
            *args,
        ],
        env=env,
        stdout=out,
        stderr=out,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"the server exited with {proc.returncode}"
                    + (f"; log: {Path(log).read_text(errors='replace')[-2000:]}" if log else "")
                )
            try:
                if httpx.get(url + "/api/v1/health", timeout=30).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"the server did not answer within {timeout:.0f} s")
            time.sleep(0.5)
        yield url
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):  # it may have exited by itself (a refused setting)
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if out is not subprocess.DEVNULL:
            out.close()
