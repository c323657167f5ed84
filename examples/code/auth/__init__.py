"""Authentication package: token validation and the authentication service."""

from .models import AdminUser, User
from .service import AuthenticationError, AuthenticationService
from .tokens import TokenClaims, TokenError, TokenValidator

__all__ = [
    "AdminUser",
    "AuthenticationError",
    "AuthenticationService",
    "TokenClaims",
    "TokenError",
    "TokenValidator",
    "User",
]
