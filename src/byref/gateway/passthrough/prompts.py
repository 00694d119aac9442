"""Upstream prompts through the gateway: named like its tools, mapped back exactly.

Owns prompt naming. A server's prompt is listed as `<server>__<prompt>` (`convert.qualified_name`,
so names are provider-safe and the same on every run, whatever other servers list); the gateway
remembers which (server, prompt) pair each listed name stands for. A client may also ask for a
prompt by the server's own name, as it would talking to the server: that resolves when exactly one
server lists that name. The law: every name the gateway lists maps back to one pair.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import mcp_types as types
from mcp.shared.exceptions import MCPError

from byref.gateway.catalog.convert import distinct_name, qualified_name
from byref.refs import quote


@dataclass
class PromptIndex:
    """Listed name → (server, the server's name), and the server's name → its servers."""

    names: dict[str, tuple[str, str]] = field(default_factory=dict)
    own: dict[str, set[str]] = field(default_factory=dict)

    def listed(self, listings: dict[str, list[types.Prompt]]) -> list[types.Prompt]:
        """Every server's prompts under the gateway's names (servers in the order given)."""
        self.names.clear()
        self.own.clear()
        out: list[types.Prompt] = []
        for server, prompts in listings.items():
            for p in prompts:
                name = qualified_name(server, p.name)
                if name in self.names and self.names[name] != (server, p.name):
                    name = distinct_name(server, p.name)
                if name in self.names:
                    continue  # a server listing one name twice: the first wins
                self.names[name] = (server, p.name)
                self.own.setdefault(p.name, set()).add(server)
                out.append(p.model_copy(update={"name": name}))
        return out

    def resolve(self, name: str, sees: Callable[[str], bool] | None = None
                ) -> tuple[str, str] | None:
        """The pair a name stands for; a server's own name counts only servers `sees` admits."""
        if name in self.names:
            return self.names[name]
        servers = {s for s in self.own.get(name, set()) if sees is None or sees(s)}
        if len(servers) == 1:
            return next(iter(servers)), name
        return None

    def unresolved(self, name: str) -> MCPError:
        """The refusal for a prompt name: the qualified names to use when several servers offer it,
        else `prompt_not_offered`."""
        servers = sorted(self.own.get(name, ()))
        if servers:
            return MCPError(types.INVALID_PARAMS, (
                f"Prompt {quote(name)} is offered by several servers "
                f"({', '.join(map(repr, servers))}); ask for one of "
                f"{', '.join(quote(qualified_name(s, name)) for s in servers)}."))
        return prompt_not_offered(name)


def prompt_not_offered(name: str) -> MCPError:
    """A prompt no server offers — or one of a server the caller's grant does not see."""
    return MCPError(types.INVALID_PARAMS, (
        f"Prompt {quote(name)} is not offered by any server behind this gateway; prompts/list "
        "names each as <server>__<prompt>."))
