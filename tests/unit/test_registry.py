"""The one registry every plugin kind uses: names, lazy imports, and errors that name the setting."""

from __future__ import annotations

import pytest

from finderledge.errors import ConfigurationError, MissingExtraError
from finderledge.registry import Registry


def test_a_lazy_entry_is_imported_on_first_use_and_kept() -> None:
    kinds: Registry[object] = Registry("thing", "thing_setting")
    kinds.register("dumps", "json:dumps")
    assert "dumps" in kinds and kinds.names() == ["dumps"]
    import json

    assert kinds.get("dumps") is json.dumps


def test_an_unknown_name_names_the_setting_and_the_choices() -> None:
    kinds: Registry[object] = Registry("thing", "thing_setting", also="or an object")
    kinds.register("b", object())
    kinds.register("a", object())
    with pytest.raises(
        ConfigurationError,
        match=r"setting 'thing_setting': expected one of \['a', 'b'\] or an object, got 'c'",
    ):
        kinds.get("c")


def test_a_missing_package_names_the_extra_without_importing() -> None:
    kinds: Registry[object] = Registry("thing", "thing_setting")
    kinds.register("ghost", "no_such_package_x:thing", extra=("no_such_package_x", "ghost"))
    with pytest.raises(
        MissingExtraError, match=r'thing_setting=\'ghost\'.*pip install "finderledge\[ghost\]"'
    ):
        kinds.get("ghost")
    kinds.register("ghost", object())  # a user's own implementation replaces the built-in: no check
    kinds.require("ghost")


def test_a_name_must_be_a_non_empty_string() -> None:
    kinds: Registry[object] = Registry("thing", "thing_setting")
    with pytest.raises(ConfigurationError, match="thing name"):
        kinds.register("", object())


def test_indexing_is_get_for_kinds_that_were_dicts() -> None:
    kinds: Registry[object] = Registry("thing", "thing_setting")
    marker = object()
    kinds.register("a", marker)
    assert kinds["a"] is marker and list(kinds) == ["a"]
    with pytest.raises(ConfigurationError, match="thing_setting"):
        kinds["b"]
