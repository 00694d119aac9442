"""Who an HTTP request is: bearer tokens checked as an OAuth 2.1 resource server.

Owns `BearerVerifier`, the SDK's `TokenVerifier`: a static token from the config (written as
itself, or as `sha256:<hex digest>` so the config holds no secret), or a JWT validated with PyJWT
against the configured issuer, audience and JWKS (fetched from `jwksUri`, refetched when a token
names a key id the set lacks: rotation). The law: a token is accepted only whole — signature by a
key of the JWKS under an asymmetric algorithm the config allows (never `none`, never HS*),
issuer and audience equal, `exp` present and not past (with the configured leeway), the mapped
tenant and principal claims present; anything else answers None, so the SDK's middleware sends
401 before any handler or upstream runs. Every refusal's reason is counted (`refused`), never
the token. Static comparisons run in constant time over every configured token.
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import json
from collections import Counter
from typing import Any

import anyio.to_thread
from mcp.server.auth.provider import AccessToken

from byref.errors import install_hint
from byref.gateway.config.file import Grant, JwtConfig


class JwtValidator:
    """A JWT → its grant, or None with the reason counted. Blocking (JWKS fetches): run it in a
    thread."""

    def __init__(self, config: JwtConfig) -> None:
        try:
            import jwt
        except ImportError:  # pragma: no cover - PyJWT ships with the mcp extra
            raise RuntimeError(f"JWT validation needs PyJWT: {install_hint('auth')}") from None
        self.config = config
        self._jwt = jwt
        self._keys = jwt.PyJWKClient(config.jwks_uri, cache_keys=False, lifespan=300,
                                     timeout=10, cooldown_duration=config.jwks_cooldown)
        self.refused: Counter[str] = Counter()

    def validate(self, token: str) -> tuple[Grant, int | None] | None:
        """The token's grant and expiry (epoch seconds), or None with the reason counted: a refused
        algorithm, expiry, audience, key, signature, malformed token or missing claims."""
        jwt, config = self._jwt, self.config
        try:
            header = jwt.get_unverified_header(token)
            if header.get("alg") not in config.algorithms:
                return self._refuse("algorithm")  # `none`, HS*, or one not configured
            key = self._keys.get_signing_key_from_jwt(token)
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
        except jwt.PyJWKClientError:
            return self._refuse("key")  # unknown key id after a refetch, or JWKS unreachable
        except jwt.InvalidSignatureError:
            return self._refuse("signature")
        except jwt.PyJWTError:
            return self._refuse("malformed")
        tenant = config.tenant if config.tenant is not None else claims.get(
            config.tenant_claim or "")
        principal = claims.get(config.principal_claim)
        if not isinstance(tenant, str) or not tenant or not isinstance(
                principal, str) or not principal:
            return self._refuse("claims")
        exp = claims.get("exp")
        return (Grant(tenant, principal, config.servers, config.tools),
                int(exp) if isinstance(exp, int | float) else None)

    def _refuse(self, reason: str) -> tuple[Grant, int | None] | None:
        self.refused[reason] += 1
        return None


class BearerVerifier:
    """The SDK's `TokenVerifier`: a configured token (plain or sha-256) or a valid JWT → the
    tenant and principal its requests run as, and its grant's restrictions."""

    def __init__(self, tokens: dict[str, Grant], jwt: JwtConfig | None = None) -> None:
        self._plain = [(t.encode(), g) for t, g in tokens.items() if not t.startswith("sha256:")]
        self._hashed = [(bytes.fromhex(t[7:]), g) for t, g in tokens.items()
                        if t.startswith("sha256:")]
        self.jwt = JwtValidator(jwt) if jwt is not None else None
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
        """The AccessToken a configured token or valid JWT runs as (client_id the JSON [tenant,
        principal], the grant's servers and tools in its claims), or None."""
        raw = token.encode()
        digest = hashlib.sha256(raw).digest()
        known = self._verified.get(digest)  # keyed by digest: lookup time says nothing of tokens
        if known is not None:
            return known
        grant, expires = self._static(raw, digest), None
        static = grant is not None
        if grant is None and self.jwt is not None and token.count(".") == 2:
            found = await anyio.to_thread.run_sync(self.jwt.validate, token)
            if found is None:
                return None
            grant, expires = found
        if grant is None:
            return None
        # The SDK binds an HTTP session to client_id: encode the pair, never join it.
        owner = json.dumps([grant.tenant, grant.principal], ensure_ascii=False)
        claims: dict[str, Any] = {"tenant": grant.tenant, "principal": grant.principal}
        if grant.servers is not None:
            claims["servers"] = list(grant.servers)
        if grant.tools is not None:
            claims["tools"] = list(grant.tools)
        access = AccessToken(token=token, client_id=owner, scopes=[], expires_at=expires,
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
