"""Where the repository, its example data and the shared evaluation datasets are.

The BEIR datasets (scifact, msmarco-5k, jaquad-dev) are not in the repository: CI puts them in
``../shared/datasets`` beside the clone. A test that needs one calls :func:`dataset`: without it the test is
skipped with one reason naming the dataset and where it was looked for, unless ``FINDERLEDGE_REQUIRE_DATASETS=1``
(set by ``.ci/run``), which makes a missing dataset a failure, so nothing goes silently untested in CI.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "data"
DATASETS = ROOT.parent / "shared" / "datasets"
REQUIRE = "FINDERLEDGE_REQUIRE_DATASETS"


def missing_dataset(name: str, root: Path | None = None) -> str | None:
    """Why dataset ``name`` cannot be used (no ``corpus.jsonl`` under ``root/name``), or None when it can."""
    path = (DATASETS if root is None else root) / name
    if (path / "corpus.jsonl").is_file():
        return None
    return (
        f"NEEDS DATASET {name!r}: not found at {path} (CI puts the BEIR datasets in ../shared/datasets beside "
        f"the clone; {REQUIRE}=1 makes this a failure)"
    )


def dataset(name: str, root: Path | None = None) -> Path:
    """The folder of a shared BEIR dataset; a missing one skips the test, or fails it under
    ``FINDERLEDGE_REQUIRE_DATASETS=1`` (CI)."""
    reason = missing_dataset(name, root)
    if reason is not None:
        if os.environ.get(REQUIRE, "") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return (DATASETS if root is None else root) / name


def optional_dataset(name: str) -> Path | None:
    """A dataset that extends a test which also runs without it: its folder, None when missing (the test runs
    its other part), a failure under ``FINDERLEDGE_REQUIRE_DATASETS=1``."""
    reason = missing_dataset(name)
    if reason is None:
        return DATASETS / name
    if os.environ.get(REQUIRE, "") == "1":
        pytest.fail(reason)
    return None
