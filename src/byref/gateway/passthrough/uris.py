"""Upstream resources through the gateway: one URI space over every server, mapped back exactly.

Owns the naming of upstream resources and what a client subscribed to. A resource or template is
listed as `byref://<server>/<its own URI>`: a server name holds no '/', so the first '/' after
the prefix splits the pair back without ambiguity whatever either side contains, and a template
stays a template (its expressions are untouched, so expanding the listed one gives the listed
form of the URI the server's template expands to). A client may also name a resource by its own
URI, as it would talking to the server: that resolves when exactly one server lists the URI or
has a template matching it (else the refusal names the candidates). Contents come back named the
way the client asked. byref's own stored artifacts are resources too, as `byref:artifact/<ref>`
(no `//`, so never a `byref://<server>/` URI; template `byref:artifact/{ref}`), listed and read
in the caller's scope only. The law: every URI the gateway hands out maps back to one (server,
URI) pair or to one artifact of the caller's scope, another scope's ref reads exactly as one
that never existed, and an update from a server reaches only the client sessions subscribed to
that pair.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import mcp_types as types
from mcp.server.connection import Connection
from mcp.shared.exceptions import MCPError
from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate

from byref.media import is_text
from byref.refs import KEY_PATTERN, quote
from byref.store import Artifact, ArtifactMeta

PREFIX = "byref://"
ARTIFACT_PREFIX = "byref:artifact/"
"""byref's own artifacts: `byref:artifact/<ref>` (an upstream's are `byref://<server>/<uri>`)."""
ARTIFACT_TEMPLATE = types.ResourceTemplate(
    uri_template=ARTIFACT_PREFIX + "{ref}", name="byref-artifact", title="byref artifact",
    description="A result byref stored in this conversation, by its ref (art_…): the bytes as "
                "stored. Only your own conversation's artifacts can be read.")
_REF = re.compile(KEY_PATTERN)


def namespaced(server: str, uri: str) -> str:
    """The gateway's URI for a server's resource (or template)."""
    return f"{PREFIX}{server}/{uri}"


def split(uri: str, servers: Iterable[str]) -> tuple[str, str] | None:
    """(server, its own URI) for a gateway URI naming a configured server; None otherwise."""
    if not uri.startswith(PREFIX):
        return None
    server, sep, original = uri[len(PREFIX):].partition("/")
    if not sep or not original or server not in set(servers):
        return None
    return server, original


@dataclass
class ResourceIndex:
    """What each server listed last: its resource URIs and its templates."""

    uris: dict[str, set[str]] = field(default_factory=dict)
    """URI → the servers listing it."""
    templates: dict[str, list[UriTemplate]] = field(default_factory=dict)
    """Server → its parsed templates."""

    def listed(self, server: str, resources: list[types.Resource]) -> None:
        """Record the resource URIs `server` listed (replacing what it listed before)."""
        for servers in self.uris.values():
            servers.discard(server)
        for r in resources:
            self.uris.setdefault(str(r.uri), set()).add(server)

    def listed_templates(self, server: str, templates: list[types.ResourceTemplate]) -> None:
        """Record the templates `server` listed (one the SDK cannot parse is skipped for
        matching)."""
        parsed: list[UriTemplate] = []
        for t in templates:
            try:
                parsed.append(UriTemplate.parse(t.uri_template))
            except (InvalidUriTemplate, ValueError):
                continue  # a template the SDK cannot parse is still listed, just not matched
        self.templates[server] = parsed

    def owners(self, uri: str) -> list[str]:
        """The servers a bare URI may belong to: those listing it, else those whose template
        matches it."""
        listed = sorted(self.uris.get(uri, ()))
        if listed:
            return listed
        return sorted(s for s, ts in self.templates.items()
                      if any(_matches(t, uri) for t in ts))


def _matches(template: UriTemplate, uri: str) -> bool:
    try:
        return template.match(uri) is not None
    except Exception:  # a malformed URI simply does not match
        return False


def unresolved(uri: str, owners: list[str]) -> MCPError:
    """The refusal for a URI: the namespaced names to use when several servers offer it, else that
    no server behind the gateway offers it."""
    if owners:
        return MCPError(types.INVALID_PARAMS, (
            f"Resource {quote(uri)} is offered by several servers "
            f"({', '.join(map(repr, owners))}); name it as one of "
            f"{', '.join(quote(namespaced(s, uri)) for s in owners)}."))
    return MCPError(types.INVALID_PARAMS, (
        f"Resource {quote(uri)} is not offered by any server behind this gateway; resources/list "
        f"names each as {PREFIX}<server>/<uri>."), {"uri": uri})  # SEP-2164: the URI not found


def renamed_contents(result: types.ReadResourceResult, server: str,
                     asked: str, original: str) -> types.ReadResourceResult:
    """Contents named the way the client asked, always under the server that answered: the
    gateway's form if it used that form; else the server's own URIs, except one in the gateway's
    own namespace (`byref:…`), which would speak for another server or an artifact and is
    namespaced under the answering server instead."""
    bare = asked == original
    contents = [c if bare and not _gateways(str(c.uri))
                else c.model_copy(update={"uri": namespaced(server, str(c.uri))})
                for c in result.contents]
    return result.model_copy(update={"contents": contents})


def _gateways(uri: str) -> bool:
    # URI schemes are case-insensitive (RFC 3986 §3.1): `BYREF://other/x` names the gateway's too.
    return uri[:6].lower() == "byref:"


Pair = tuple[str, str]
"""(server, the server's own URI)."""
Instance = tuple[str, ...]
"""Which instance of a server a watcher's updates come from (`pool.key_of`)."""


@dataclass
class Subscriptions:
    """(server, URI) → the client connections subscribed, each with the URI it used and the
    server instance that watches it for them."""

    _subs: dict[Pair, dict[int, tuple[Connection, str, Instance]]] = field(default_factory=dict)

    def add(self, pair: Pair, connection: Connection, asked: str, instance: Instance) -> bool:
        """Subscribe `connection` to the pair under the URI it asked with; True when it was
        not subscribed to it yet."""
        subs = self._subs.setdefault(pair, {})
        new = id(connection) not in subs
        subs[id(connection)] = (connection, asked, instance)
        return new

    def remove(self, pair: Pair, connection: Connection) -> Instance | None:
        """Forget it; the instance that watched the pair for it (None: it was not
        subscribed)."""
        subs = self._subs.get(pair)
        found = subs.pop(id(connection), None) if subs is not None else None
        if subs is not None and not subs:
            del self._subs[pair]
        return found[2] if found is not None else None

    def forget(self, connection: Connection) -> list[tuple[Pair, Instance]]:
        """Forget every subscription of a closing connection: each pair and its instance."""
        gone: list[tuple[Pair, Instance]] = []
        for pair in list(self._subs):
            instance = self.remove(pair, connection)
            if instance is not None:
                gone.append((pair, instance))
        return gone

    def of(self, pair: Pair) -> list[tuple[Connection, str, Instance]]:
        """The connections subscribed to the pair, each with the URI it used and its
        instance."""
        return list(self._subs.get(pair, {}).values())


def listed_resource(server: str, r: types.Resource) -> types.Resource:
    """A server's resource as the gateway lists it (`byref://<server>/<uri>`)."""
    return r.model_copy(update={"uri": namespaced(server, str(r.uri))})


def listed_template(server: str, t: types.ResourceTemplate) -> types.ResourceTemplate:
    """A server's template as the gateway lists it (its expressions untouched)."""
    return t.model_copy(update={"uri_template": namespaced(server, t.uri_template)})



# -- byref's own artifacts ---------------------------------------------------------------------
def artifact_uri(ref: str) -> str:
    """The resource URI of one of byref's own artifacts."""
    return ARTIFACT_PREFIX + ref


def artifact_ref(uri: str) -> str | None:
    """The ref an artifact URI names; None when `uri` is not in the artifact form at all."""
    if not uri.startswith(ARTIFACT_PREFIX):
        return None
    return uri[len(ARTIFACT_PREFIX):]


def artifact_resource(meta: ArtifactMeta) -> types.Resource:
    """A stored artifact as a listed resource (named by its ref, titled by its label)."""
    return types.Resource(uri=artifact_uri(meta.ref), name=meta.ref, title=meta.label,
                          description=f"byref artifact ({meta.kind})",
                          mime_type=meta.media_type, size=meta.bytes)


def artifact_contents(uri: str, artifact: Artifact
                      ) -> types.TextResourceContents | types.BlobResourceContents:
    """Text when the media type is textual and the bytes are UTF-8; else base64 bytes."""
    media = artifact.meta.media_type
    if is_text(media):
        try:
            return types.TextResourceContents(uri=uri, mime_type=media,
                                              text=artifact.data.decode("utf-8"))
        except UnicodeDecodeError:
            pass  # labelled text, stored bytes: pass them as they are
    return types.BlobResourceContents(uri=uri, mime_type=media,
                                      blob=base64.b64encode(artifact.data).decode("ascii"))




def artifact_missing(uri: str, ref: str) -> MCPError:
    """One answer for a malformed ref, an unknown one, an expired one and another scope's."""
    if not _REF.fullmatch(ref):
        return MCPError(types.INVALID_PARAMS, (
            f"Resource {quote(uri)} names no artifact: after {ARTIFACT_PREFIX!r} comes a ref, "
            "'art_' followed by 22 letters or digits."))
    return MCPError(types.INVALID_PARAMS, (
        f"Artifact {quote(ref)} is not available in this conversation: it is missing, expired, or "
        "was never stored under this scope."), {"uri": uri})
