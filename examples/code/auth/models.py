"""Principals that can authenticate against the API."""

from __future__ import annotations


class User:
    """A regular user account. Base class for every kind of principal."""

    def __init__(self, user_id: str, email: str, roles: set[str] | None = None) -> None:
        self.user_id = user_id
        self.email = email
        self.roles = set(roles or ())

    @property
    def is_admin(self) -> bool:
        return False

    def has_role(self, role: str) -> bool:
        return role in self.roles

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.user_id!r})"


class AdminUser(User):
    """An administrator: implicitly holds every role."""

    @property
    def is_admin(self) -> bool:
        return True

    def has_role(self, role: str) -> bool:
        return True
