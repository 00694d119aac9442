"""Who an HTTP request is: bearer tokens checked as an OAuth 2.1 resource server.

Owns `BearerVerifier`, the SDK's `TokenVerifier`: a static token from the config (written as
itself, or as `sha256:<hex digest>` so the config holds no secret), or a JWT validated with PyJWT
against the configured issuer, audience and JWKS (`jwks`: fetched off the request path,
refetched when a token names a key id the set lacks: rotation), and the `owner` its requests run
as. The law: a token is accepted only whole — signature by a key of the JWKS under an asymmetric
algorithm the config allows (never `none`, never HS*), issuer and audience equal, `exp` a number
and not past (with the configured leeway, which the AccessToken's expiry includes), the mapped
tenant and principal claims present; anything else answers None, so the SDK's middleware sends
401 before any handler or upstream runs. A JWT's subject is its issuer's (`JwtConfig.principal`),
never a static token's principal unless the config maps it. Two tokens are one owner only when
tenant, principal and restrictions all agree. Every refusal's reason is counted (`refused`),
never the token. Static comparisons run in constant time over every configured token.
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import json
import math
from collections import Counter
from typing import Any

from mcp.server.auth.provider import AccessToken

from byref.errors import MissingExtra
from byref.gateway.access.jwks import JwksKeys, Spawn
from byref.gateway.config.file import Grant, JwtConfig


class JwtValidator:
    """A JWT → its grant, or None with the reason counted. Runs on the event loop: its keys come
    from `JwksKeys` (a cached key never waits; a fetch is one at a time, bounded in time)."""

    def __init__(self, config: JwtConfig, *, spawn: Spawn | None = None) -> None:
        try:
            import jwt
        except ImportError:  # pragma: no cover - PyJWT ships with the mcp extra
            raise MissingExtra("JWT validation (PyJWT)", "auth") from None
        self.config = config
        self._jwt = jwt
        self.keys = JwksKeys(config.jwks_uri, timeout=config.jwks_timeout,
                             cooldown=config.jwks_cooldown, spawn=spawn)
        self.refused: Counter[str] = Counter()

    async def validate(self, token: str) -> tuple[Grant, float] | None:
        """The token's grant and the last moment it is accepted (epoch seconds: `exp` plus the
        leeway), or None with the reason counted: a refused algorithm, expiry, audience, key,
        signature, malformed token or missing claims."""
        jwt, config = self._jwt, self.config
        try:
            header = jwt.get_unverified_header(token)
            if header.get("alg") not in config.algorithms:
                return self._refuse("algorithm")  # `none`, HS*, or one not configured
            kid = header.get("kid")
            key = await self.keys.key(kid if isinstance(kid, str) else None)
            if key is None:
                return self._refuse("key")  # unknown key id after a refetch, or no JWKS
            claims: dict[str, Any] = jwt.decode(
                token, key, algorithms=list(config.algorithms), audience=config.audience,
                issuer=config.issuer, leeway=config.leeway,
                options={"require": ["exp", "iss", "aud"]})
        except jwt.ExpiredSignatureError:
            return self._refuse("expired")
        except jwt.InvalidAudienceError:
            return self._refuse("audience")
        except jwt.InvalidIssuerError:
            return self._refuse("issuer")
        except jwt.InvalidSignatureError:
            return self._refuse("signature")
        except jwt.PyJWTError:
            return self._refuse("malformed")
        # RFC 7519 §2: a NumericDate is a JSON number. PyJWT reads one through int(), so "exp":
        # "9999999999" (a string) or true would pass its check; they are refused here.
        if not all(_numeric_date(claims[c]) for c in ("exp", "nbf", "iat") if c in claims):
            return self._refuse("malformed")
        tenant = config.tenant if config.tenant is not None else claims.get(
            config.tenant_claim or "")
        subject = claims.get(config.principal_claim)
        if not isinstance(tenant, str) or not tenant or not isinstance(
                subject, str) or not subject:
            return self._refuse("claims")
        # The SDK's middleware re-checks `expires_at` without a leeway: the moment given is the
        # last one the configured leeway accepts, so both checks agree.
        return (Grant(tenant, config.principal(subject), config.servers, config.tools),
                float(claims["exp"]) + config.leeway)

    def _refuse(self, reason: str) -> tuple[Grant, float] | None:
        self.refused[reason] += 1
        return None


def _numeric_date(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value))


def owner(grant: Grant) -> str:
    """The owner a grant's requests run as, as the SDK compares session owners (`client_id`):
    the JSON [tenant, principal], and the servers and tools when the grant restricts them — two
    tokens of one principal with different grants are different owners."""
    if grant.servers is None and grant.tools is None:
        return json.dumps([grant.tenant, grant.principal], ensure_ascii=False)
    return json.dumps([grant.tenant, grant.principal,
                       None if grant.servers is None else list(grant.servers),
                       None if grant.tools is None else list(grant.tools)], ensure_ascii=False)


class BearerVerifier:
    """The SDK's `TokenVerifier`: a configured token (plain or sha-256) or a valid JWT → the
    tenant and principal its requests run as, and its grant's restrictions."""

    def __init__(self, tokens: dict[str, Grant], jwt: JwtConfig | None = None, *,
                 spawn: Spawn | None = None) -> None:
        self._plain = [(t.encode(), g) for t, g in tokens.items() if not t.startswith("sha256:")]
        self._hashed = [(bytes.fromhex(t[7:]), g) for t, g in tokens.items()
                        if t.startswith("sha256:")]
        self.jwt = JwtValidator(jwt, spawn=spawn) if jwt is not None else None
        self._verified: dict[bytes, AccessToken] = {}
        """sha-256 of a configured token → its AccessToken, built once (bounded by the config;
        a JWT, which expires, is checked every time)."""

    def _static(self, raw: bytes, digest: bytes) -> Grant | None:
        grant: Grant | None = None
        # Compare against every token in constant time; never short-circuit on a match.
        for known, g in self._plain:
            if hmac.compare_digest(known, raw):
                grant = g
        for known, g in self._hashed:
            if hmac.compare_digest(known, digest):
                grant = g
        return grant

    async def verify_token(self, token: str) -> AccessToken | None:
        """The AccessToken a configured token or valid JWT runs as (client_id its `owner`, the
        grant's servers and tools in its claims), or None."""
        raw = token.encode()
        digest = hashlib.sha256(raw).digest()
        known = self._verified.get(digest)  # keyed by digest: lookup time says nothing of tokens
        if known is not None:
            return known
        grant = self._static(raw, digest)
        expires_at: int | None = None
        static = grant is not None
        if grant is None and self.jwt is not None and token.count(".") == 2:
            found = await self.jwt.validate(token)
            if found is None:
                return None
            grant, until = found
            expires_at = math.floor(until)
        if grant is None:
            return None
        # The SDK binds an HTTP session to client_id: the owner, encoded, never joined.
        claims: dict[str, Any] = {"tenant": grant.tenant, "principal": grant.principal}
        if grant.servers is not None:
            claims["servers"] = list(grant.servers)
        if grant.tools is not None:
            claims["tools"] = list(grant.tools)
        access = AccessToken(token=token, client_id=owner(grant), scopes=[], expires_at=expires_at,
                             claims=claims)
        if static:
            self._verified[digest] = access
        return access


def permits_server(grant: Grant | None, server: str) -> bool:
    """Whether a grant sees `server` (no grant, or no server list: every server)."""
    return grant is None or grant.servers is None or any(
        fnmatch.fnmatchcase(server, pattern) for pattern in grant.servers)


def permits_tool(grant: Grant | None, name: str) -> bool:
    """Whether a grant sees the catalog tool `name` (as clients name it, e.g. git__git_log)."""
    return grant is None or grant.tools is None or any(
        fnmatch.fnmatchcase(name, pattern) for pattern in grant.tools)


def restriction(claims: dict[str, Any]) -> Grant | None:
    """The grant a verified token's claims restrict it to, or None when it sees everything."""
    servers, tools = claims.get("servers"), claims.get("tools")
    if servers is None and tools is None:
        return None
    return Grant(str(claims["tenant"]), str(claims["principal"]),
                 None if servers is None else tuple(servers),
                 None if tools is None else tuple(tools))
