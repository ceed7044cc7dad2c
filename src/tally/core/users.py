"""The console's people: users, their roles, and the rules of their passwords, invites,
sessions and sign-in failures, as values. No hashing and no storage here (services/users)."""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass

PASSWORD_MIN_CHARS = 12
PASSWORD_MAX_CHARS = 1024  # argon2 takes any length; a megabyte "password" is a DoS, not one
INVITE_HOURS = 72
DEFAULT_SESSION_IDLE_MINUTES = 30
DEFAULT_SESSION_MAX_HOURS = 12
DEFAULT_SIGN_IN_MAX_FAILURES = 5
DEFAULT_SIGN_IN_LOCK_MINUTES = 15


class Role(enum.StrEnum):
    """What a user may do in their workspace; each role may do all the one before may."""

    VIEWER = "viewer"  # reads everything in the workspace
    ANALYST = "analyst"  # also does manual reconciliation work
    ADMIN = "admin"  # also changes sources, webhooks, uploads, definitions and users

    def allows(self, needed: Role) -> bool:
        return _RANK[self] >= _RANK[needed]


_RANK = {Role.VIEWER: 0, Role.ANALYST: 1, Role.ADMIN: 2}
ROLE_NAMES = tuple(role.value for role in Role)


@dataclass(frozen=True)
class User:
    """A user as the services hand it out: never their password's hash."""

    id: int
    workspace_id: int
    name: str
    role: Role
    disabled: bool
    has_password: bool
    created_at: dt.datetime


def name_key(name: str) -> str:
    """The form a username is compared in: `Alice` and `alice ` are one user."""
    return name.strip().casefold()


def password_problem(password: str, confirmation: str) -> str | None:
    """Why the password cannot be chosen, or None. Length is the rule (NIST SP 800-63B):
    no composition rules, which push people to `Password1!`."""
    if len(password) < PASSWORD_MIN_CHARS:
        return f"The password must be at least {PASSWORD_MIN_CHARS} characters long."
    if len(password) > PASSWORD_MAX_CHARS:
        return f"The password must be at most {PASSWORD_MAX_CHARS} characters long."
    if password != confirmation:
        return "The two passwords are not the same."
    return None


@dataclass(frozen=True)
class SessionPolicy:
    """How long a session lives: `idle` since its last request, `longest` since sign-in."""

    idle: dt.timedelta = dt.timedelta(minutes=DEFAULT_SESSION_IDLE_MINUTES)
    longest: dt.timedelta = dt.timedelta(hours=DEFAULT_SESSION_MAX_HOURS)

    def is_alive(
        self, *, created_at: dt.datetime, last_seen_at: dt.datetime, now: dt.datetime
    ) -> bool:
        return now - last_seen_at < self.idle and now - created_at < self.longest


@dataclass(frozen=True)
class SignInPolicy:
    """After `max_failures` wrong passwords in a row for one username, that username is
    refused for `lock` (known or not: the lock says nothing about who exists)."""

    max_failures: int = DEFAULT_SIGN_IN_MAX_FAILURES
    lock: dt.timedelta = dt.timedelta(minutes=DEFAULT_SIGN_IN_LOCK_MINUTES)


@dataclass(frozen=True)
class SignedIn:
    """A session just begun: its id, to be set in the browser's cookie, exists only here."""

    session_id: str
    user: User


@dataclass(frozen=True)
class IssuedInvite:
    """An invite's token, shown once (in its URL, the page that sets the password); only
    its hash is kept."""

    token: str
    user: User
    expires_at: dt.datetime
    url: str
