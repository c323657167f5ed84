"""Signing and validation of HMAC bearer tokens of the form ``payload.signature``."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from dataclasses import dataclass


class TokenError(Exception):
    """Raised when a token is malformed, forged or expired."""


@dataclass(frozen=True)
class TokenClaims:
    subject: str
    expires_at: float
    roles: frozenset[str] = frozenset()


class TokenValidator:
    """Issues and validates signed tokens with a shared secret."""

    def __init__(self, secret: bytes, *, leeway_seconds: float = 30.0) -> None:
        if not secret:
            raise ValueError("secret must not be empty")
        self._secret = secret
        self._leeway = leeway_seconds

    def sign(self, claims: TokenClaims) -> str:
        payload = json.dumps(
            {"sub": claims.subject, "exp": claims.expires_at, "roles": sorted(claims.roles)},
            separators=(",", ":"),
        )
        encoded = base64.urlsafe_b64encode(payload.encode()).decode()
        return f"{encoded}.{self._signature(encoded)}"

    def validate(self, token: str, *, now: float | None = None) -> TokenClaims:
        encoded, dot, signature = token.rpartition(".")
        if not dot or not encoded:
            raise TokenError("token has no signature")
        if not hmac.compare_digest(signature, self._signature(encoded)):
            raise TokenError("bad signature")
        try:
            data = json.loads(base64.urlsafe_b64decode(encoded.encode()))
            claims = TokenClaims(
                subject=str(data["sub"]),
                expires_at=float(data["exp"]),
                roles=frozenset(data.get("roles", [])),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise TokenError("malformed payload") from exc
        current = time.time() if now is None else now
        if claims.expires_at + self._leeway < current:
            raise TokenError("token expired")
        return claims

    def _signature(self, encoded: str) -> str:
        return hmac.new(self._secret, encoded.encode(), hashlib.sha256).hexdigest()
