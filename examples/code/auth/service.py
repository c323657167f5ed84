"""The authentication service: turns an Authorization header into a user."""

from __future__ import annotations

from auth.models import AdminUser, User
from auth.tokens import TokenError, TokenValidator


class AuthenticationError(Exception):
    """Raised when a request cannot be authenticated."""


class AuthenticationService:
    """Authenticates bearer tokens against a registry of known users."""

    def __init__(self, validator: TokenValidator, users: dict[str, User] | None = None) -> None:
        self._validator = validator
        self._users: dict[str, User] = dict(users or {})

    def register(self, user: User) -> None:
        self._users[user.user_id] = user

    def authenticate(self, authorization_header: str) -> User:
        scheme, _, token = authorization_header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise AuthenticationError("expected a bearer token")
        try:
            claims = self._validator.validate(token)
        except TokenError as exc:
            raise AuthenticationError(str(exc)) from exc
        user = self._users.get(claims.subject)
        if user is None:
            raise AuthenticationError(f"unknown user {claims.subject!r}")
        return user

    def require_admin(self, authorization_header: str) -> AdminUser:
        user = self.authenticate(authorization_header)
        if not isinstance(user, AdminUser):
            raise AuthenticationError("administrator rights required")
        return user
