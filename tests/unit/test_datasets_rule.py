"""The shared-dataset rule (tests/helpers/paths.py): a test needing a BEIR dataset that is not beside the clone
skips with one reason naming it, except in CI (``FINDERLEDGE_REQUIRE_DATASETS=1``, exported by ``.ci/run``),
where the same absence fails the test."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from paths import REQUIRE, ROOT, dataset, missing_dataset, optional_dataset


def _beir(root: Path, name: str) -> Path:
    (root / name).mkdir(parents=True)
    (root / name / "corpus.jsonl").write_text('{"_id": "d1", "text": "x"}\n', encoding="utf-8")
    return root / name


def test_a_present_dataset_is_returned_in_both_modes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _beir(tmp_path, "scifact")
    for value in ("", "1"):
        monkeypatch.setenv(REQUIRE, value)
        assert dataset("scifact", root=tmp_path) == folder
        assert missing_dataset("scifact", root=tmp_path) is None


def test_a_missing_dataset_skips_with_its_name_and_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(REQUIRE, raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        dataset("msmarco-5k", root=tmp_path)
    reason = str(skipped.value)
    assert "NEEDS DATASET 'msmarco-5k'" in reason and str(tmp_path / "msmarco-5k") in reason
    assert REQUIRE in reason  # says how CI turns it into a failure
    (tmp_path / "empty").mkdir()
    with pytest.raises(pytest.skip.Exception):
        dataset("empty", root=tmp_path)


def test_a_missing_dataset_fails_when_required(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE, "1")
    with pytest.raises(pytest.fail.Exception) as failed:
        dataset("jaquad-dev", root=tmp_path)
    assert "NEEDS DATASET 'jaquad-dev'" in str(failed.value)


def test_an_optional_dataset_is_none_outside_ci_and_a_failure_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    name = "no-such-dataset-ever"
    monkeypatch.delenv(REQUIRE, raising=False)
    assert optional_dataset(name) is None
    monkeypatch.setenv(REQUIRE, "1")
    with pytest.raises(pytest.fail.Exception):
        optional_dataset(name)


def test_ci_requires_the_datasets() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(rf"^export {REQUIRE}=1$", script, flags=re.MULTILINE)
