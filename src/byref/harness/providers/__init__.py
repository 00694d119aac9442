"""Real model providers behind byref's `Model` port, named by `provider:model` ids.

Owns the choice of adapter for an id such as `anthropic:claude-sonnet-4-5`, `openai:gpt-6.1-sol`
(the Responses API) or `openai-chat:llama3.1` (Chat Completions, what OpenAI-compatible servers
speak; pass `base_url=...`).
The law: provider SDKs are imported only when a model of theirs is built (extras
`byref[anthropic]`, `byref[openai]`), keys come from the usual environment variables, and every
failure names what to install, which variable to set, or what the API answered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from byref.errors import InvalidValue
from byref.harness.providers.deferral import (
    NativeDeferral,
    SearchFn,
    discovery_search,
    native_search_tool,
)
from byref.harness.providers.setup import (
    MissingKeyError,
    MissingSDKError,
    ProviderError,
    ProviderSetupError,
)

if TYPE_CHECKING:
    from byref.harness.providers.anthropic import AnthropicModel
    from byref.harness.providers.openai import OpenAIModel
    from byref.harness.providers.openai_chat import OpenAIChatModel

PROVIDERS = ("anthropic", "openai", "openai-chat")


def parse_model_id(model_id: str) -> tuple[str, str]:
    """`provider:model` → (provider, model), with an error that shows the expected form."""
    provider, sep, model = model_id.partition(":")
    if not sep or not provider or not model.strip():
        raise InvalidValue(
            f"Model id {model_id!r} is not 'provider:model' (e.g. 'anthropic:claude-sonnet-4-5' "
            f"or 'openai:gpt-6.1-sol')."
        )
    if provider not in PROVIDERS:
        raise InvalidValue(
            f"Unknown model provider {provider!r} in {model_id!r}; known providers: "
            f"{', '.join(map(repr, PROVIDERS))}."
        )
    return provider, model.strip()


def model_from_id(model_id: str,
                  **options: Any) -> AnthropicModel | OpenAIModel | OpenAIChatModel:
    """The adapter for `model_id`; `options` go to its constructor (client, stream, deferral,
    base_url…)."""
    provider, model = parse_model_id(model_id)
    if provider == "anthropic":
        from byref.harness.providers.anthropic import AnthropicModel

        return AnthropicModel(model, **options)
    if provider == "openai-chat":
        from byref.harness.providers.openai_chat import OpenAIChatModel

        return OpenAIChatModel(model, **options)
    from byref.harness.providers.openai import OpenAIModel

    return OpenAIModel(model, **options)


__all__ = [
    "PROVIDERS", "MissingKeyError", "MissingSDKError", "NativeDeferral", "ProviderError",
    "ProviderSetupError", "SearchFn", "discovery_search", "model_from_id", "native_search_tool",
    "parse_model_id",
]
