"""The config's `byref.tokens` and `byref.jwt`: who a bearer token or a JWT stands for.

Owns `Grant` (tenant, principal, and the servers and tools it may see), `JwtConfig` (an OAuth 2.1
resource server's issuer, audience, JWKS and claim mapping) and their parsers. The law: a token is
a secret — errors name its position, never its text — and only asymmetric JWT algorithms are
accepted. Identities from different issuers are different principals: a JWT's subject runs as
`jwt:["<issuer>", "<subject>"]` (a prefix static principals may not use) unless `sameAs` maps it
to a static principal explicitly.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from byref.gateway.config.values import ConfigError, names, number


@dataclass(frozen=True, slots=True)
class Grant:
    """What a bearer token stands for: the tenant and principal its requests run as, and which
    upstream servers and catalog tools (names or globs) it may see (None: all)."""

    tenant: str
    principal: str
    servers: tuple[str, ...] | None = None
    tools: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class JwtConfig:
    """Bearer JWTs validated as an OAuth 2.1 resource server (`byref.jwt`)."""

    issuer: str
    audience: str
    jwks_uri: str
    algorithms: tuple[str, ...] = ("RS256", "ES256", "PS256", "EdDSA")  # JWT_ALGORITHMS
    """Asymmetric only: a JWKS holds public keys, so HS* and 'none' are never accepted."""
    tenant: str | None = None
    """Every token's tenant (else `tenant_claim` names the claim holding it)."""
    tenant_claim: str | None = None
    principal_claim: str = "sub"
    servers: tuple[str, ...] | None = None
    tools: tuple[str, ...] | None = None
    leeway: float = 30.0
    """Seconds of clock skew allowed on exp / nbf / iat."""
    jwks_cooldown: float = 30.0
    """Seconds between JWKS refetches for a key id not in the set (rotation; bounds a flood)."""
    jwks_timeout: float = 5.0
    """Seconds one JWKS fetch may take (a request waits at most this long for a key)."""
    same_as: tuple[tuple[str, str], ...] = ()
    """(principal claim value, static principal): subjects that are the same identity as a
    static token's principal of the same tenant (`sameAs`); every other subject runs as
    `jwt_principal(issuer, subject)`."""

    def principal(self, subject: str) -> str:
        """The principal a token of this issuer with `subject` runs as."""
        for claimed, static in self.same_as:
            if claimed == subject:
                return static
        return jwt_principal(self.issuer, subject)


JWT_PREFIX = "jwt:"
"""Principals starting so are a JWT issuer's namespace; a static token's principal may not."""


def jwt_principal(issuer: str, subject: str) -> str:
    """`jwt:["<issuer>", "<subject>"]`: one string per (issuer, subject), never a static one's."""
    return JWT_PREFIX + json.dumps([issuer, subject], ensure_ascii=False)


_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
JWT_ALGORITHMS = ("RS256", "ES256", "PS256", "EdDSA")
_JWT_KEYS = frozenset({"issuer", "audience", "jwksUri", "algorithms", "tenant", "tenantClaim",
                       "principalClaim", "servers", "tools", "leeway", "jwksCooldown",
                       "jwksTimeout", "sameAs"})


def parse_tokens(value: Any, where: str) -> dict[str, Grant]:
    """`byref.tokens`: token (or `sha256:` digest) → its Grant."""
    if not isinstance(value, dict):
        raise ConfigError(f"Config {where}: byref.tokens must be an object of token → "
                          "{\"tenant\": …, \"principal\": …}.")
    out: dict[str, Grant] = {}
    for i, (token, grant) in enumerate(value.items()):
        # The token itself is a secret: errors name its position, never its text.
        if token.startswith("sha256:"):  # written as its digest: the config holds no secret
            if not _SHA256.fullmatch(token[7:]):
                raise ConfigError(f"Config {where}: byref.tokens entry #{i + 1} starts with "
                                  "'sha256:' but is not followed by 64 hex digits (write "
                                  "sha256:$(printf %s \"$TOKEN\" | sha256sum)).")
            token = "sha256:" + token[7:].lower()
        elif len(token) < 16:
            raise ConfigError(f"Config {where}: byref.tokens entry #{i + 1} is shorter than 16 "
                              "characters; use a long random token.")
        if not isinstance(grant, dict) or not {"tenant", "principal"} <= set(grant) or not (
                set(grant) <= {"tenant", "principal", "servers", "tools"}) or not all(
                isinstance(grant[k], str) and grant[k] for k in ("tenant", "principal")):
            raise ConfigError(f"Config {where}: byref.tokens entry #{i + 1} must be "
                              "{\"tenant\": \"…\", \"principal\": \"…\"}, optionally with "
                              "\"servers\" and \"tools\" (lists of names or globs).")
        at = f"{where} byref.tokens entry #{i + 1}"
        if grant["principal"].startswith(JWT_PREFIX):
            raise ConfigError(f"Config {at}: principal {grant['principal']!r} starts with "
                              f"{JWT_PREFIX!r}, which names a JWT issuer's subjects; to make a "
                              "JWT subject this token's identity, map it in byref.jwt.sameAs.")
        out[token] = Grant(grant["tenant"], grant["principal"],
                           names(grant.get("servers"), at, "servers"),
                           names(grant.get("tools"), at, "tools"))
    return out


def parse_jwt(value: Any, where: str) -> JwtConfig | None:
    """`byref.jwt`, checked (None when absent)."""
    if value is None:
        return None
    at = f"{where} byref.jwt"
    if not isinstance(value, dict):
        raise ConfigError(f"Config {at} must be an object with 'issuer', 'audience' and "
                          "'jwksUri'.")
    unknown = sorted(set(value) - _JWT_KEYS)
    if unknown:
        raise ConfigError(f"Config {at}: unknown key(s) {', '.join(map(repr, unknown))}; "
                          f"accepted: {', '.join(map(repr, sorted(_JWT_KEYS)))}.")
    for key in ("issuer", "audience", "jwksUri"):
        if not isinstance(value.get(key), str) or not value[key]:
            raise ConfigError(f"Config {at}: {key!r} is required (a non-empty string).")
    if not value["jwksUri"].startswith(("https://", "http://127.", "http://localhost",
                                        "http://[::1]")):
        raise ConfigError(f"Config {at}: 'jwksUri' must be https:// (http:// only on "
                          f"loopback), got {value['jwksUri']!r}.")
    if ("tenant" in value) == ("tenantClaim" in value):
        raise ConfigError(f"Config {at} needs exactly one of 'tenant' (every token's tenant) "
                          "or 'tenantClaim' (the claim that holds it).")
    algorithms = names(value.get("algorithms"), at, "algorithms")
    if algorithms is not None:
        weak = sorted({a for a in algorithms if a == "none" or a.startswith("HS")})
        if weak:
            raise ConfigError(f"Config {at}: algorithms {', '.join(map(repr, weak))} cannot be "
                              "checked against a JWKS of public keys; use RS256, ES256, PS256 "
                              "or EdDSA.")
    for key in ("tenant", "tenantClaim", "principalClaim"):
        if key in value and (not isinstance(value[key], str) or not value[key]):
            raise ConfigError(f"Config {at}: {key!r} must be a non-empty string.")
    same_as = value.get("sameAs", {})
    if not isinstance(same_as, dict) or not all(
            isinstance(k, str) and k and isinstance(v, str) and v
            and not v.startswith(JWT_PREFIX) for k, v in same_as.items()):
        raise ConfigError(f"Config {at}: 'sameAs' must map JWT subjects to the static principals "
                          "they are the same identity as, e.g. {\"carol\": \"carol\"} "
                          f"(non-empty strings; a principal may not start with {JWT_PREFIX!r}).")
    return JwtConfig(
        issuer=value["issuer"], audience=value["audience"], jwks_uri=value["jwksUri"],
        algorithms=algorithms or JWT_ALGORITHMS, tenant=value.get("tenant"),
        tenant_claim=value.get("tenantClaim"),
        principal_claim=value.get("principalClaim", "sub"),
        servers=names(value.get("servers"), at, "servers"),
        tools=names(value.get("tools"), at, "tools"),
        leeway=float(value["leeway"]) if "leeway" in value and value["leeway"] == 0 else (
            number(value.get("leeway", 30.0), f"{at} leeway")),
        jwks_cooldown=float(value["jwksCooldown"]) if value.get("jwksCooldown") == 0 else (
            number(value.get("jwksCooldown", 30.0), f"{at} jwksCooldown")),
        jwks_timeout=number(value.get("jwksTimeout", 5.0), f"{at} jwksTimeout"),
        same_as=tuple(same_as.items()),
    )
