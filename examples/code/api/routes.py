"""Framework-agnostic route handlers: each returns ``(status, json_body)``."""

from __future__ import annotations

from typing import Any

import requests
from auth.models import User
from auth.service import AuthenticationError, AuthenticationService
from auth.tokens import TokenValidator

PROFILE_SERVICE_URL = "https://profiles.internal.example/v1/users"

Response = tuple[int, dict[str, Any]]


def build_service(secret: bytes) -> AuthenticationService:
    """Wire up the authentication service used by every route."""
    return AuthenticationService(TokenValidator(secret))


def get_current_user(service: AuthenticationService, headers: dict[str, str]) -> Response:
    try:
        user = service.authenticate(headers.get("Authorization", ""))
    except AuthenticationError as exc:
        return 401, {"error": str(exc)}
    return 200, _serialise(user)


def get_profile(
    service: AuthenticationService, headers: dict[str, str], *, timeout: float = 5.0
) -> Response:
    """Return the current user merged with their profile from the profile service."""
    status, body = get_current_user(service, headers)
    if status != 200:
        return status, body
    response = requests.get(f"{PROFILE_SERVICE_URL}/{body['id']}", timeout=timeout)
    if response.status_code == 404:
        return 404, {"error": "profile not found"}
    response.raise_for_status()
    profile: dict[str, Any] = response.json()
    return 200, {**body, "profile": profile}


def _serialise(user: User) -> dict[str, Any]:
    return {
        "id": user.user_id,
        "email": user.email,
        "roles": sorted(user.roles),
        "admin": user.is_admin,
    }
