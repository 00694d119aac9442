"""What every provider adapter shares: errors, lazy SDK imports, keys, and request bookkeeping.

The law: a provider's SDK is imported only when a model of that provider is built, and a missing
SDK, a missing key or a failed call raises one of byref's own errors naming what to do (the extra
to install, the variable to set, the status the API answered), never a bare SDK exception.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from byref.errors import DeveloperError, MissingExtra, OperatorError
from byref.harness.messages import Delta, OnDelta, Request


class ProviderSetupError(DeveloperError, RuntimeError):
    """A model cannot be built here: its SDK is not installed, or no key is configured."""


class MissingSDKError(ProviderSetupError, MissingExtra):
    """A provider's SDK is not installed; the message is the install line."""


class MissingKeyError(ProviderSetupError):
    """No API key for the provider: the message names the variable to set."""

    def __init__(self, message: str, variable: str) -> None:
        super().__init__(message)
        self.variable = variable


class ProviderError(OperatorError, RuntimeError):
    """A provider call failed. `retryable` says whether the same request may succeed later."""

    def __init__(self, message: str, *, provider: str, model: str, status: int | None = None,
                 retryable: bool = False, request_id: str | None = None) -> None:
        super().__init__(message)
        self.provider = provider
        self.model = model
        self.status = status
        self.retryable = retryable
        self.request_id = request_id


def require_sdk(module: str, extra: str) -> ModuleType:
    """The provider SDK `module`, or `MissingSDKError` naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        raise MissingSDKError(f"The {module!r} package", extra) from exc


def key_from_env(variables: Sequence[str], model_id: str) -> str:
    """The first non-empty variable's value, or an error naming the variable to set."""
    for name in variables:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    raise MissingKeyError(
        f"No API key for model {model_id!r}: set {variables[0]} in the environment "
        "(or pass api_key=... or a ready client).",
        variables[0],
    )


def client_class(sdk: ModuleType, name: str, http_client: Any) -> Any:
    """The SDK's async client class (`AsyncAnthropic`, `AsyncOpenAI`), or its blocking one when
    `http_client` is a blocking HTTP client (then calls run in a worker thread)."""
    blocking = http_client is not None and not hasattr(http_client, "aclose")
    return getattr(sdk, name if blocking else f"Async{name}")


def is_async_client(client: Any) -> bool:
    """An SDK client whose calls are awaited (`AsyncOpenAI`, `AsyncAnthropic`, their Azure,
    Bedrock and Vertex kin)."""
    return type(client).__name__.startswith("Async")


def openai_client(sdk: ModuleType, *, model_id: str, key_variable: str, api_key: str | None,
                  base_url: str | None, http_client: Any, max_retries: int,
                  timeout: float) -> Any:
    """An `openai` SDK client for both OpenAI adapters. A server given by `base_url` needs no
    key (local OpenAI-compatible servers ignore it; the SDK still wants one, so a placeholder
    goes); OpenAI's own endpoint does, and its absence says which variable to set."""
    key = api_key or os.environ.get(key_variable, "").strip() or None
    if key is None:
        key = NO_KEY if base_url else key_from_env((key_variable,), model_id)
    options: dict[str, Any] = {"api_key": key, "max_retries": max_retries, "timeout": timeout}
    if base_url:
        options["base_url"] = base_url
    if http_client is not None:
        options["http_client"] = http_client
    return client_class(sdk, "OpenAI", http_client)(**options)


NO_KEY = "byref-no-key"
"""Sent to a server given by `base_url` when no key is configured: the SDK refuses to build a
client without one, and local servers ignore the header."""


def thread_deltas(on_delta: OnDelta | None) -> Callable[[Delta], None] | None:
    """`on_delta` as called from a worker thread running a blocking client: each fragment is
    handed to the event loop, so the callback always runs there."""
    if on_delta is None:
        return None
    from anyio import from_thread

    return lambda delta: from_thread.run_sync(on_delta, delta)


def call_names(request: Request) -> dict[str, str]:
    """Tool-call id → tool name over the whole request (results carry only the id)."""
    return {
        block.id: block.name
        for message in request.messages
        for block in message.content
        if block.type == "tool_use"
    }


# The one line of the system text that may change between turns (see the discovery design): it is
# kept out of the cached prefix when it is the last paragraph.
VARYING_LINE = re.compile(r"You currently have \d+ of \d+ activated tools loaded\.\s*")


def split_system(system: str) -> tuple[str, str]:
    """(stable, varying): the varying tail is the working-set line when it ends the system text."""
    head, sep, tail = system.rpartition("\n\n")
    if sep and VARYING_LINE.fullmatch(tail):
        return head, tail
    return system, ""


def status_error(exc: Any, *, provider: str, model: str, key_variable: str) -> ProviderError:
    """An SDK `APIStatusError` as a `ProviderError` with the API's own message."""
    status = int(getattr(exc, "status_code", 0) or 0)
    message = _api_message(getattr(exc, "body", None)) or str(exc)
    hint = ""
    if status in (401, 403):
        hint = f" Check {key_variable}."
    elif status == 429:
        hint = " Rate limited; retry later or lower the request rate."
    elif status >= 500:
        hint = " The provider failed; the same request may succeed later."
    return ProviderError(
        f"{provider} API answered {status} for model {model!r}: {message}{hint}",
        provider=provider, model=model, status=status,
        retryable=status in (408, 409, 429) or status >= 500,
        request_id=getattr(exc, "request_id", None),
    )


def connection_error(exc: Any, *, provider: str, model: str) -> ProviderError:
    """Where the call went and the root cause (the SDK's own words are "Connection error.")."""
    root = exc
    while root.__cause__ is not None:
        root = root.__cause__
    why = str(root) or type(root).__name__
    try:
        url = str(exc.request.url).split("?")[0]  # no query: it may carry a key
    except Exception:
        url = ""
    where = f" at {url!r}" if url else ""
    return ProviderError(
        f"Could not reach the {provider} API for model {model!r}{where}: {why}. Check that a "
        "server answers there (a local one must be running).",
        provider=provider, model=model, retryable=True,
    )


@contextmanager
def sdk_errors(sdk: ModuleType, *, provider: str, model: str,
               key_variable: str) -> Iterator[None]:
    """Both SDKs share one error ladder (status, connection, other); translate it once."""
    try:
        yield
    except sdk.APIStatusError as exc:
        raise status_error(exc, provider=provider, model=model,
                           key_variable=key_variable) from exc
    except sdk.APIConnectionError as exc:
        # The cause's chain (httpx, httpcore, anyio) adds frames, not facts: the root is named.
        raise connection_error(exc, provider=provider, model=model) from None
    except sdk.APIError as exc:
        raise ProviderError(
            f"{provider} API call for model {model!r} failed: {exc}",
            provider=provider, model=model,
        ) from exc


def _api_message(body: object) -> str:
    # Anthropic bodies are {"type": "error", "error": {...}}; OpenAI's SDK passes the inner object.
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            kind = inner.get("type")
            return f"{inner['message']} ({kind})" if isinstance(kind, str) and kind else str(
                inner["message"])
    return ""
