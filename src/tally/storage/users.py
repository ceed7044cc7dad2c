"""Queries for the console's users, invites, sessions and sign-in failures. Secrets
arrive here already hashed; callers own the transaction."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update

from tally.core.clock import as_utc
from tally.core.errors import UserNotFoundError
from tally.core.users import Role, User
from tally.storage.schema import (
    console_sessions,
    is_storable_id,
    sign_in_failures,
    user_invites,
    users,
)


def _user(row: Any) -> User:
    return User(
        row.id,
        row.workspace_id,
        row.name,
        Role(row.role),
        bool(row.disabled),
        row.password_hash is not None,
        as_utc(row.created_at),
    )


def insert_user(
    conn: Connection, *, workspace_id: int, name: str, name_key: str, role: Role, now: dt.datetime
) -> User | None:
    """The new user, or None when the name is taken."""
    if conn.execute(select(users.c.id).where(users.c.name_key == name_key)).first():
        return None
    user_id = conn.execute(
        insert(users)
        .values(
            workspace_id=workspace_id,
            name=name,
            name_key=name_key,
            role=role.value,
            disabled=False,
            created_at=now,
        )
        .returning(users.c.id)
    ).scalar_one()
    return get_user(conn, user_id)


def find_user(conn: Connection, user_id: int) -> User | None:
    if not is_storable_id(user_id):
        return None
    row = conn.execute(select(users).where(users.c.id == user_id)).first()
    return _user(row) if row else None


def get_user(conn: Connection, user_id: int) -> User:
    user = find_user(conn, user_id)
    if user is None:
        raise UserNotFoundError()
    return user


@dataclass(frozen=True)
class Credentials:
    user: User
    password_hash: str | None


def find_credentials(conn: Connection, name_key: str) -> Credentials | None:
    row = conn.execute(select(users).where(users.c.name_key == name_key)).first()
    return Credentials(_user(row), row.password_hash) if row else None


def list_users(conn: Connection, workspace_id: int) -> list[User]:
    rows = conn.execute(
        select(users).where(users.c.workspace_id == workspace_id).order_by(users.c.id)
    )
    return [_user(row) for row in rows]


def set_password_hash(conn: Connection, user_id: int, password_hash: str) -> None:
    conn.execute(update(users).where(users.c.id == user_id).values(password_hash=password_hash))


def clear_password_hash(conn: Connection, user_id: int) -> None:
    conn.execute(update(users).where(users.c.id == user_id).values(password_hash=None))


def disable_user(conn: Connection, user_id: int) -> None:
    conn.execute(update(users).where(users.c.id == user_id).values(disabled=True))


# --- invites --------------------------------------------------------------------------------


def insert_invite(
    conn: Connection, *, user_id: int, token_hash: str, now: dt.datetime, expires_at: dt.datetime
) -> None:
    conn.execute(
        insert(user_invites).values(
            user_id=user_id, token_hash=token_hash, created_at=now, expires_at=expires_at
        )
    )


def end_invites(conn: Connection, user_id: int, now: dt.datetime) -> None:
    """Every open invite of the user is ended (used, or replaced by a newer one)."""
    conn.execute(
        update(user_invites)
        .where(user_invites.c.user_id == user_id, user_invites.c.ended_at.is_(None))
        .values(ended_at=now)
    )


def find_open_invite(conn: Connection, token_hash: str, now: dt.datetime) -> int | None:
    """The user id of the invite with this hash, if it is neither ended nor expired. On
    PostgreSQL the row is locked: two tabs using one invite at once, one wins."""
    row = conn.execute(
        select(user_invites.c.user_id, user_invites.c.expires_at)
        .where(user_invites.c.token_hash == token_hash, user_invites.c.ended_at.is_(None))
        .with_for_update()  # SQLite: nothing (its write transaction holds the one lock)
    ).first()
    if row is None or as_utc(row.expires_at) <= now:
        return None
    return int(row.user_id)


# --- sessions -------------------------------------------------------------------------------


def insert_session(conn: Connection, *, user_id: int, session_hash: str, now: dt.datetime) -> None:
    conn.execute(
        insert(console_sessions).values(
            user_id=user_id, session_hash=session_hash, created_at=now, last_seen_at=now
        )
    )


@dataclass(frozen=True)
class StoredSession:
    id: int
    user: User
    created_at: dt.datetime
    last_seen_at: dt.datetime


def find_open_session(conn: Connection, session_hash: str) -> StoredSession | None:
    row = conn.execute(
        select(
            console_sessions.c.id.label("session_id"),
            console_sessions.c.created_at.label("session_created_at"),
            console_sessions.c.last_seen_at,
            users,
        )
        .join(users, users.c.id == console_sessions.c.user_id)
        .where(
            console_sessions.c.session_hash == session_hash, console_sessions.c.ended_at.is_(None)
        )
    ).first()
    if row is None:
        return None
    return StoredSession(
        row.session_id, _user(row), as_utc(row.session_created_at), as_utc(row.last_seen_at)
    )


def touch_session(conn: Connection, session_id: int, now: dt.datetime) -> None:
    conn.execute(
        update(console_sessions).where(console_sessions.c.id == session_id).values(last_seen_at=now)
    )


def end_session(conn: Connection, session_id: int, now: dt.datetime) -> None:
    conn.execute(
        update(console_sessions)
        .where(console_sessions.c.id == session_id, console_sessions.c.ended_at.is_(None))
        .values(ended_at=now)
    )


def end_sessions_of(conn: Connection, user_id: int, now: dt.datetime) -> int:
    result = conn.execute(
        update(console_sessions)
        .where(console_sessions.c.user_id == user_id, console_sessions.c.ended_at.is_(None))
        .values(ended_at=now)
    )
    return int(result.rowcount)


# --- sign-in failures -----------------------------------------------------------------------


def locked_until(conn: Connection, name_key: str) -> dt.datetime | None:
    row = conn.execute(
        select(sign_in_failures.c.locked_until).where(sign_in_failures.c.name_key == name_key)
    ).first()
    return as_utc(row.locked_until) if row and row.locked_until else None


def record_failure(
    conn: Connection, name_key: str, *, now: dt.datetime, max_failures: int, lock: dt.timedelta
) -> None:
    """One more wrong password for the name; the `max_failures`th in a row locks it until
    `now + lock`, and the count starts again."""
    row = conn.execute(
        select(sign_in_failures.c.failures).where(sign_in_failures.c.name_key == name_key)
    ).first()
    failures = (row.failures if row else 0) + 1
    values: dict[str, Any] = {"failures": failures, "last_failed_at": now}
    if failures >= max_failures:
        values.update(failures=0, locked_until=now + lock)
    if row is None:
        conn.execute(insert(sign_in_failures).values(name_key=name_key, **values))
    else:
        conn.execute(
            update(sign_in_failures).where(sign_in_failures.c.name_key == name_key).values(**values)
        )


def clear_failures(conn: Connection, name_key: str) -> None:
    conn.execute(delete(sign_in_failures).where(sign_in_failures.c.name_key == name_key))
