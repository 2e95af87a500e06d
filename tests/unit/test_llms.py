"""LLM providers are one more plugin kind of the one registry (issue 40): ``llm="provider:model"`` chooses a
builder in ``llms.LLMS``; a built-in whose client is missing names its ``pip install`` extra, ``register`` adds
one. Missing packages are simulated by ``sys.modules[name] = None`` (an import then fails)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from finderledge.errors import ConfigurationError, MissingExtraError
from finderledge.rag import llms
from finderledge.registry import Registry


def test_the_built_in_providers_are_in_the_registry() -> None:
    assert isinstance(llms.LLMS, Registry)
    assert llms.LLMS.names() == sorted(llms.LLM_PROVIDERS)
    assert llms.LLMS.setting == "llm"


@pytest.mark.parametrize(
    ("provider", "blocked", "extra"),
    [("openai", "langchain_openai", "openai"), ("ollama", "langchain_ollama", "ollama")],
)
def test_a_missing_client_names_its_extra(
    provider: str, blocked: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, blocked, None)
    monkeypatch.setattr(llms, "LLMS", llms.built_in_providers())
    with pytest.raises(MissingExtraError) as refused:
        llms.make_chat_model(f"{provider}:some-model", base_url="http://127.0.0.1:9/v1")
    assert str(refused.value) == (
        f"llm={provider!r} needs the {blocked} package, which is not installed: "
        f'pip install "finderledge[{extra}]"'
    )


def test_llamacpp_checks_the_file_then_names_its_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(ConfigurationError, match="no such model file"):
        llms.make_chat_model(f"llamacpp:{tmp_path / 'missing.gguf'}")
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")
    with pytest.raises(MissingExtraError, match=r'pip install "finderledge\[llamacpp\]"'):
        llms.make_chat_model(f"llamacpp:{model}")
    monkeypatch.setitem(sys.modules, "langchain_community", None)
    monkeypatch.setattr(llms, "LLMS", llms.built_in_providers())
    with pytest.raises(MissingExtraError, match=r"langchain_community.*finderledge\[llamacpp\]"):
        llms.make_chat_model(f"llamacpp:{model}")


def test_register_adds_a_provider_and_unknown_ones_name_the_registered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(llms, "LLMS", llms.built_in_providers())
    made: list[tuple[str, dict[str, Any]]] = []
    llms.register("echo", lambda model, **options: made.append((model, options)) or "a model")
    assert llms.make_chat_model("echo:tiny", timeout=5) == "a model"
    assert made == [("tiny", {"base_url": None, "timeout": 5})]
    for bad in ("gpt:4", "nocolon", "echo:"):
        with pytest.raises(ConfigurationError, match=r"unknown provider .*\['echo', 'llamacpp', 'ollama'"):
            llms.make_chat_model(bad)
