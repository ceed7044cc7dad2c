"""The console's people: users and their invites (`UserService`), and sign-in, sessions
and sign-out (`SessionService`). Passwords are kept as argon2id hashes; invite tokens and
session ids as sha256 hashes (256 random bits each: nothing to brute-force). No secret is
logged or stored in the clear."""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Callable

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import Connection, Engine

from tally.core.clock import utc_now
from tally.core.errors import (
    DefinitionRejectedError,
    FieldProblem,
    InviteNotValidError,
    PasswordRejectedError,
    SessionEndedError,
    SignInError,
    SignInLockedError,
)
from tally.core.ids import SECRET_BYTES, hash_secret, new_invite_token, new_session_id
from tally.core.names import name_problem
from tally.core.users import (
    INVITE_HOURS,
    ROLE_NAMES,
    IssuedInvite,
    Role,
    SessionPolicy,
    SignedIn,
    SignInPolicy,
    User,
    name_key,
    password_problem,
)
from tally.storage import accounts, users
from tally.storage.engine import write_connection

Clock = Callable[[], dt.datetime]
INVITE_PATH = "/console/invite/"
# A session's last request is written at most this often: a page view is not a write.
TOUCH_EVERY = dt.timedelta(seconds=30)


class UserService:
    """Users of a workspace and their invites; each method opens its own transaction."""

    def __init__(self, engine: Engine, *, public_url: str, clock: Clock = utc_now) -> None:
        self._engine = engine
        self._public_url = public_url.rstrip("/")
        self._clock = clock
        self._hasher = PasswordHasher()  # argon2id, RFC 9106's low-memory parameters

    def create_user(self, *, workspace_id: int, name: str, role: str) -> IssuedInvite:
        problems = []
        if (problem := name_problem(name)) is not None:
            problems.append(FieldProblem("name", problem))
        if role not in ROLE_NAMES:
            problems.append(FieldProblem("role", f"must be one of {', '.join(ROLE_NAMES)}"))
        if problems:
            raise DefinitionRejectedError(problems)
        now = self._clock()
        with write_connection(self._engine) as conn, conn.begin():
            accounts.get_workspace(conn, workspace_id)
            user = users.insert_user(
                conn,
                workspace_id=workspace_id,
                name=name.strip(),
                name_key=name_key(name),
                role=Role(role),
                now=now,
            )
            if user is None:
                raise DefinitionRejectedError(
                    [FieldProblem("name", f"a user named {name.strip()!r} already exists")]
                )
            return self._invite(conn, user, now)

    def reset_user(self, user_id: int) -> IssuedInvite:
        """A new invite; the old password, invites and sessions stop working at once."""
        now = self._clock()
        with write_connection(self._engine) as conn, conn.begin():
            user = users.get_user(conn, user_id)
            users.clear_password_hash(conn, user_id)
            users.end_sessions_of(conn, user_id, now)
            users.end_invites(conn, user_id, now)
            return self._invite(conn, users.get_user(conn, user.id), now)

    def disable_user(self, user_id: int) -> User:
        """Refused at sign-in from now on; their sessions and invites end."""
        now = self._clock()
        with write_connection(self._engine) as conn, conn.begin():
            users.get_user(conn, user_id)
            users.disable_user(conn, user_id)
            users.end_sessions_of(conn, user_id, now)
            users.end_invites(conn, user_id, now)
            return users.get_user(conn, user_id)

    def list_users(self, workspace_id: int) -> list[User]:
        with self._engine.connect() as conn:
            accounts.get_workspace(conn, workspace_id)
            return users.list_users(conn, workspace_id)

    def get_user(self, user_id: int) -> User:
        with self._engine.connect() as conn:
            return users.get_user(conn, user_id)

    def invited_user(self, token: str) -> User:
        """The user an open invite is for (InviteNotValidError: used, expired, replaced)."""
        with self._engine.connect() as conn:
            user_id = users.find_open_invite(conn, hash_secret(token), self._clock())
            user = None if user_id is None else users.get_user(conn, user_id)
        if user is None or user.disabled:
            raise InviteNotValidError()
        return user

    def accept_invite(self, token: str, *, password: str, confirmation: str) -> User:
        """The user's password set and the invite used up (once: a second use is refused)."""
        self.invited_user(token)
        if (problem := password_problem(password, confirmation)) is not None:
            raise PasswordRejectedError(problem)
        password_hash = self._hasher.hash(password)  # slow: outside the transaction
        now = self._clock()
        with write_connection(self._engine) as conn, conn.begin():
            user_id = users.find_open_invite(conn, hash_secret(token), now)
            if user_id is None:
                raise InviteNotValidError()
            users.set_password_hash(conn, user_id, password_hash)
            users.end_invites(conn, user_id, now)
            users.end_sessions_of(conn, user_id, now)
            return users.get_user(conn, user_id)

    def _invite(self, conn: Connection, user: User, now: dt.datetime) -> IssuedInvite:
        token = new_invite_token()
        expires_at = now + dt.timedelta(hours=INVITE_HOURS)
        users.insert_invite(
            conn,
            user_id=user.id,
            token_hash=hash_secret(token),
            now=now,
            expires_at=expires_at,
        )
        return IssuedInvite(token, user, expires_at, self._public_url + INVITE_PATH + token)


class SessionService:
    """Sign-in, the session behind each console request, and sign-out."""

    def __init__(
        self,
        engine: Engine,
        *,
        sessions: SessionPolicy,
        sign_in: SignInPolicy,
        clock: Clock = utc_now,
    ) -> None:
        self._engine = engine
        self._sessions = sessions
        self._sign_in = sign_in
        self._clock = clock
        self._hasher = PasswordHasher()
        # An unknown name, a disabled user or one without a password is checked against
        # this hash: every failure takes the time of a real check (no enumeration).
        self._dummy_hash = self._hasher.hash(secrets.token_urlsafe(SECRET_BYTES))

    def sign_in(self, *, name: str, password: str) -> SignedIn:
        """A new session (a new id at every sign-in), or SignInError with one message for
        every failure; SignInLockedError while the name is locked, known or not."""
        key = name_key(name)
        with self._engine.connect() as conn:
            locked_until = users.locked_until(conn, key)
            found = users.find_credentials(conn, key)
        if locked_until is not None and locked_until > self._clock():
            raise SignInLockedError()
        stored = found.password_hash if found and not found.user.disabled else None
        good = self._verified(stored or self._dummy_hash, password) and stored is not None
        now = self._clock()
        if not good or found is None:
            with write_connection(self._engine) as conn, conn.begin():
                users.record_failure(
                    conn,
                    key,
                    now=now,
                    max_failures=self._sign_in.max_failures,
                    lock=self._sign_in.lock,
                )
            raise SignInError()  # after the commit: the failure counts
        session_id = new_session_id()
        with write_connection(self._engine) as conn, conn.begin():
            users.clear_failures(conn, key)
            if stored is not None and self._hasher.check_needs_rehash(stored):
                users.set_password_hash(conn, found.user.id, self._hasher.hash(password))
            users.insert_session(
                conn, user_id=found.user.id, session_hash=hash_secret(session_id), now=now
            )
        return SignedIn(session_id, found.user)

    def _verified(self, stored_hash: str, password: str) -> bool:
        try:
            return self._hasher.verify(stored_hash, password)
        except (VerificationError, InvalidHashError):
            return False

    def user_of(self, session_id: str | None) -> User:
        """The user behind a session id, its last request moved to now; SessionEndedError
        when there is none, it ended, it was idle or lived too long, or its user was
        disabled (an expired session is ended on the server too)."""
        if not session_id:
            raise SessionEndedError()
        now = self._clock()
        with self._engine.connect() as conn:
            found = users.find_open_session(conn, hash_secret(session_id))
        if found is None:
            raise SessionEndedError()
        alive = self._sessions.is_alive(
            created_at=found.created_at, last_seen_at=found.last_seen_at, now=now
        )
        if not alive or found.user.disabled:
            with write_connection(self._engine) as conn, conn.begin():
                users.end_session(conn, found.id, now)
            raise SessionEndedError()
        if now - found.last_seen_at >= TOUCH_EVERY:
            with write_connection(self._engine) as conn, conn.begin():
                users.touch_session(conn, found.id, now)
        return found.user

    def sign_out(self, session_id: str | None) -> None:
        """The session ended on the server: its cookie, if kept, opens nothing."""
        if not session_id:
            return
        now = self._clock()
        with write_connection(self._engine) as conn, conn.begin():
            found = users.find_open_session(conn, hash_secret(session_id))
            if found is not None:
                users.end_session(conn, found.id, now)
