"""Language models from a one-line setting (``openai:<model>``, ``ollama:<model>``, ``llamacpp:<path.gguf>``),
for query strategies, answers and the examples: one place that knows each client and its extra."""

from __future__ import annotations

import os
from typing import Any

from ..errors import ConfigurationError

__all__ = ["LLM_PROVIDERS", "make_chat_model"]

LLM_PROVIDERS = ("openai", "ollama", "llamacpp")
_EXTRAS = {
    "openai": "finderledge[openai]",
    "ollama": "finderledge[ollama]",
    "llamacpp": "langchain-community llama-cpp-python",
}


def make_chat_model(spec: str, *, base_url: str | None = None, timeout: float = 120.0) -> Any:
    """The LangChain chat model (or LLM) a setting names; ``base_url`` points ``openai:`` at any
    OpenAI-compatible server (vLLM, llama.cpp's server, LM Studio …). Bad settings are ConfigurationErrors."""
    provider, _, model = spec.partition(":")
    if provider not in LLM_PROVIDERS or not model:
        raise ConfigurationError(
            f"llm: unknown provider {provider!r} in {spec!r}; expected openai:<model>, "
            "ollama:<model> or llamacpp:<path.gguf>"
        )
    try:
        if provider == "openai":
            from langchain_openai import ChatOpenAI
            from pydantic import SecretStr

            key = os.environ.get("OPENAI_API_KEY") or ("unused" if base_url else None)
            if key is None:
                raise ConfigurationError(
                    f"llm {spec!r}: set OPENAI_API_KEY, or a base URL of an "
                    "OpenAI-compatible server (llm_base_url / --llm-base-url)"
                )
            return ChatOpenAI(
                model=model,
                base_url=base_url,
                api_key=SecretStr(key),
                timeout=timeout,
                max_retries=1,
            )
        if provider == "ollama":
            from langchain_ollama import ChatOllama

            return ChatOllama(model=model, base_url=base_url, client_kwargs={"timeout": timeout})
        if not os.path.isfile(model):
            raise ConfigurationError(
                f"llm {spec!r}: no such model file {model!r} (a local .gguf is expected)"
            )
        from langchain_community.llms import LlamaCpp

        return LlamaCpp(model_path=model)
    except ImportError as exc:
        raise ConfigurationError(
            f'llm {spec!r}: its client is not installed ({exc.name}); pip install "{_EXTRAS[provider]}"'
        ) from None
