"""Where the repository, its example data and the shared evaluation datasets are."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "data"
DATASETS = ROOT.parent / "shared" / "datasets"


def dataset(name: str) -> Path:
    """The folder of a shared BEIR dataset; a missing one fails the test (never a silent skip)."""
    path = DATASETS / name
    if not (path / "corpus.jsonl").is_file():
        pytest.fail(f"dataset {name!r} not found at {path} (../shared/datasets beside the repository)")
    return path
