"""The shape every provider adapter shares: its SDK, its client, and one turn's call.

Owns `ProviderModel`. An adapter says how a neutral `Request` becomes its API's parameters
(`params`), how its SDK is called, whole or streamed (`_call`, `_call_blocking`), and how the
answer becomes a neutral `Response` (`convert`); the rest is here, once. The law: the SDK is
imported when a model is built; a turn is awaited on an async client and run in a worker thread
on a blocking one (its fragments still reach the callback on the event loop); it is streamed
when `stream` is set or a callback wants fragments; the SDK's errors become byref's
(`sdk_errors`); every answered turn's `Usage` is kept in `turns`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from types import ModuleType
from typing import Any, ClassVar

from byref.harness.messages import OnDelta, Request, Response, Usage
from byref.harness.providers.setup import (
    ProviderError,
    is_async_client,
    require_sdk,
    sdk_errors,
    thread_deltas,
)


class ProviderModel(ABC):
    """A model behind byref's harness over a provider's SDK. `turns` keeps each turn's `Usage`,
    in order."""

    provider: ClassVar[str]
    sdk_name: ClassVar[str]
    """The SDK's module, also the extra that installs it."""
    key_variable: ClassVar[str]
    """The environment variable a rejected key is blamed on."""

    def __init__(self, model: str, *, client: Any, stream: bool, extra: dict[str, Any] | None,
                 build: Callable[[ModuleType], Any]) -> None:
        self.sdk = require_sdk(self.sdk_name, self.sdk_name)
        self.model = model
        self.client = client if client is not None else build(self.sdk)
        """The SDK client: given, or built by `build` from the SDK."""
        self.is_async = is_async_client(self.client)
        """The client's calls are awaited; a blocking client's run in a worker thread."""
        self.stream = stream
        self.extra = dict(extra or {})
        self.turns: list[Usage] = []

    # -- what an adapter says --------------------------------------------------------------------
    @abstractmethod
    def params(self, request: Request) -> dict[str, Any]:
        """The keyword arguments for the API call, rendered from `request` alone."""

    @abstractmethod
    def convert(self, answer: Any) -> Response:
        """The SDK's answer (as `_call` returns it) as a neutral `Response`."""

    @abstractmethod
    async def _call(self, params: dict[str, Any], on_delta: OnDelta | None) -> Any:
        """One call on the async client, streamed when `streams(on_delta)`."""

    @abstractmethod
    def _call_blocking(self, params: dict[str, Any], on_delta: OnDelta | None) -> Any:
        """`_call` on a blocking client (in a worker thread)."""

    # -- one turn ------------------------------------------------------------------------------
    def streams(self, on_delta: OnDelta | None) -> bool:
        """Whether a turn is streamed: `stream` is set, or a callback wants the fragments."""
        return self.stream or on_delta is not None

    async def respond(self, request: Request, *, on_delta: OnDelta | None = None) -> Response:
        """One turn; streamed when `stream` is set or `on_delta` is given."""
        if not self.is_async:
            from anyio import to_thread

            return await to_thread.run_sync(self._respond_blocking, request,
                                            thread_deltas(on_delta))
        params = self.params(request)
        with sdk_errors(self.sdk, provider=self.provider, model=self.model,
                        key_variable=self.key_variable):
            answer = await self._call(params, on_delta)
        return self._done(answer)

    def _respond_blocking(self, request: Request, on_delta: OnDelta | None) -> Response:
        params = self.params(request)
        with sdk_errors(self.sdk, provider=self.provider, model=self.model,
                        key_variable=self.key_variable):
            answer = self._call_blocking(params, on_delta)
        return self._done(answer)

    def _done(self, answer: Any) -> Response:
        response = self.convert(answer)
        if response.usage is not None:
            self.turns.append(response.usage)
        return response

    # -- errors a stream can end in --------------------------------------------------------------
    def stream_failed(self, event: Any) -> ProviderError:
        """The error a stream's `error` event stands for."""
        return ProviderError(
            f"{self.provider} stream for model {self.model!r} failed: "
            f"{getattr(event, 'message', event)}",
            provider=self.provider, model=self.model,
        )

    def stream_unfinished(self) -> ProviderError:
        """The error for a stream that ended without a final response."""
        return ProviderError(
            f"{self.provider} stream for model {self.model!r} ended without a final response.",
            provider=self.provider, model=self.model, retryable=True,
        )
