"""Language models from a one-line setting (``openai:<model>``, ``ollama:<model>``, ``llamacpp:<path.gguf>``),
for query strategies, answers and the examples: one place that knows each client and its extra.

:data:`LLMS` is the one :class:`~finderledge.registry.Registry` of providers, like the other plugin kinds:
the ``provider`` of ``llm="provider:model"`` chooses a builder ``(model, *, base_url, timeout) -> model``;
a built-in whose client is not installed raises :class:`~finderledge.errors.MissingExtraError` naming the
``pip install`` extra, and :func:`register` adds a provider.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from typing import Any

from ..errors import ConfigurationError, MissingExtraError
from ..registry import Registry

__all__ = ["LLMS", "LLM_PROVIDERS", "LLMBuilder", "built_in_providers", "make_chat_model", "register"]

LLM_PROVIDERS = ("openai", "ollama", "llamacpp")  # built in; register adds more

#: what builds a provider's model: ``builder(model, *, base_url, timeout) -> a LangChain chat model or LLM``
LLMBuilder = Callable[..., Any]


def openai_chat_model(model: str, *, base_url: str | None, timeout: float) -> Any:
    """``ChatOpenAI`` for ``model``; ``base_url`` points it at any OpenAI-compatible server (then no key is needed)."""
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    key = os.environ.get("OPENAI_API_KEY") or ("unused" if base_url else None)
    if key is None:
        raise ConfigurationError(
            f"llm 'openai:{model}': set OPENAI_API_KEY, or a base URL of an "
            "OpenAI-compatible server (llm_base_url / --llm-base-url)"
        )
    return ChatOpenAI(model=model, base_url=base_url, api_key=SecretStr(key), timeout=timeout, max_retries=1)


def ollama_chat_model(model: str, *, base_url: str | None, timeout: float) -> Any:
    """``ChatOllama`` for ``model`` (``base_url``: the Ollama server; None: its default)."""
    from langchain_ollama import ChatOllama

    return ChatOllama(model=model, base_url=base_url, client_kwargs={"timeout": timeout})


def llamacpp_model(model: str, *, base_url: str | None, timeout: float) -> Any:
    """LangChain's ``LlamaCpp`` over the local ``.gguf`` file ``model`` (``base_url``, ``timeout``: unused)."""
    if not os.path.isfile(model):
        raise ConfigurationError(
            f"llm 'llamacpp:{model}': no such model file {model!r} (a local .gguf is expected)"
        )
    if importlib.util.find_spec("llama_cpp") is None:  # LlamaCpp imports it when built
        raise MissingExtraError("llm='llamacpp'", "llama_cpp", "llamacpp")
    from langchain_community.llms import LlamaCpp

    return LlamaCpp(model_path=model)


def built_in_providers() -> Registry[LLMBuilder]:
    """A new registry of the built-in providers, each a lazy ``"module:attribute"`` whose client is checked
    (and imported) when chosen: :data:`LLMS` is one."""
    providers: Registry[LLMBuilder] = Registry("LLM provider", "llm", also="(as 'provider:model')")
    providers.register("openai", f"{__name__}:openai_chat_model", extra=("langchain_openai", "openai"))
    providers.register("ollama", f"{__name__}:ollama_chat_model", extra=("langchain_ollama", "ollama"))
    providers.register("llamacpp", f"{__name__}:llamacpp_model", extra=("langchain_community", "llamacpp"))
    return providers


#: LLM providers by the prefix of ``llm="provider:model"``; the built-ins' clients are optional extras
LLMS = built_in_providers()


def register(provider: str, builder: LLMBuilder) -> None:
    """Make ``llm="provider:model"`` build ``builder(model, base_url=..., timeout=...)``."""
    LLMS.register(provider, builder)


def make_chat_model(spec: str, *, base_url: str | None = None, timeout: float = 120.0) -> Any:
    """The LangChain chat model (or LLM) a setting names; ``base_url`` points ``openai:`` at any
    OpenAI-compatible server (vLLM, llama.cpp's server, LM Studio …). A bad setting is a ConfigurationError,
    a provider whose client is not installed a MissingExtraError naming its ``pip install`` extra."""
    provider, _, model = spec.partition(":")
    if provider not in LLMS or not model:
        raise ConfigurationError(
            f"llm: unknown provider {provider!r} in {spec!r}; expected 'provider:model' with a provider of "
            f"{LLMS.names()} (openai:<model>, ollama:<model>, llamacpp:<path.gguf>)"
        )
    return LLMS.get(provider)(model, base_url=base_url, timeout=timeout)
