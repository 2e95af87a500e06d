"""``finderledge mcp`` without the server running: a missing SDK names the extra, a bad --filter is a clear
error, and the base filter's equality fields are what ``add`` stamps."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from finderledge.cli.commands import main
from finderledge.mcp.server import stamp_of


def test_a_missing_sdk_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("mcp", "mcp.server", "mcp.server.mcpserver", "mcp.server.fastmcp"):
        monkeypatch.setitem(sys.modules, name, None)  # import raises ImportError
    assert main(["mcp", str(tmp_path / "index")]) != 0
    err = capsys.readouterr().err
    assert 'pip install "finderledge[mcp]"' in err and "finderledge mcp" in err
    assert not (tmp_path / "index").exists()  # refused before the index is opened


@pytest.mark.parametrize("value", ["{not json", "[1, 2]", '{"tenant": {"$near": 1}}'])
def test_a_bad_base_filter_is_refused(value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mcp", str(tmp_path / "index"), "--filter", value]) != 0
    assert "filter" in capsys.readouterr().err.lower()


def test_the_command_line_does_not_import_the_server() -> None:
    import subprocess

    code = "import sys, finderledge.cli.commands; print('finderledge.mcp.server' in sys.modules, 'mcp' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]  # only `finderledge mcp` pays for the SDK and the tools


def test_add_stamps_the_equality_fields() -> None:
    assert stamp_of({"tenant": "a", "lang": {"$eq": "ja"}, "year": {"$gte": 2020}}) == {
        "tenant": "a",
        "lang": "ja",
    }
    assert stamp_of(None) == {} and stamp_of({"$or": [{"a": 1}, {"a": 2}]}) == {}
