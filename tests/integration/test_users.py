"""The console's users, invites, sessions and sign-in failures (services/users.py), on
both backends, with a clock the test moves (no waiting)."""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa

from support.factories import Tenant, make_tenant
from tally.core.errors import (
    DefinitionRejectedError,
    InviteNotValidError,
    PasswordRejectedError,
    SessionEndedError,
    SignInError,
    SignInLockedError,
    UserNotFoundError,
    WorkspaceNotFoundError,
)
from tally.core.ids import hash_secret
from tally.core.users import Role, SessionPolicy, SignInPolicy
from tally.runtime import Runtime
from tally.services.users import SessionService, UserService
from tally.storage.schema import console_sessions, user_invites, users

PASSWORD = "correct horse battery"


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = dt.datetime(2026, 11, 29, 9, 0, tzinfo=dt.UTC)

    def __call__(self) -> dt.datetime:
        return self.now

    def move(self, **delta: float) -> None:
        self.now += dt.timedelta(**delta)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def people(runtime: Runtime, clock: Clock) -> UserService:
    return UserService(runtime.engine, public_url="https://tally.example/", clock=clock)


@pytest.fixture
def sessions(runtime: Runtime, clock: Clock) -> SessionService:
    return SessionService(
        runtime.engine,
        sessions=SessionPolicy(idle=dt.timedelta(minutes=30), longest=dt.timedelta(hours=12)),
        sign_in=SignInPolicy(max_failures=3, lock=dt.timedelta(minutes=15)),
        clock=clock,
    )


def invited(people: UserService, tenant: Tenant, name: str = "alice", role: str = "analyst") -> str:
    return people.create_user(workspace_id=tenant.workspace_id, name=name, role=role).token


def signed_up(people: UserService, tenant: Tenant, name: str = "alice") -> str:
    people.accept_invite(invited(people, tenant, name), password=PASSWORD, confirmation=PASSWORD)
    return name


def test_a_new_user_gets_an_invite_url_and_no_clear_secret_is_stored(
    runtime: Runtime, people: UserService, tenant: Tenant
) -> None:
    issued = people.create_user(workspace_id=tenant.workspace_id, name=" Alice ", role="admin")
    assert issued.url == f"https://tally.example/console/invite/{issued.token}"
    assert issued.user.name == "Alice"
    assert issued.user.role is Role.ADMIN
    assert not issued.user.has_password
    assert issued.expires_at - issued.user.created_at == dt.timedelta(hours=72)
    with runtime.engine.connect() as conn:
        stored = conn.execute(sa.select(user_invites.c.token_hash)).scalar_one()
    assert stored == hash_secret(issued.token)


@pytest.mark.parametrize(
    ("name", "role", "field"),
    [("", "viewer", "name"), ("bob", "owner", "role"), ("bo\x00b", "admin", "name")],
)
def test_a_user_needs_a_name_and_a_known_role(
    people: UserService, tenant: Tenant, name: str, role: str, field: str
) -> None:
    with pytest.raises(DefinitionRejectedError) as raised:
        people.create_user(workspace_id=tenant.workspace_id, name=name, role=role)
    assert [p.field for p in raised.value.problems] == [field]


def test_a_username_is_taken_once_whatever_its_case(people: UserService, tenant: Tenant) -> None:
    invited(people, tenant, "alice")
    with pytest.raises(DefinitionRejectedError, match="already exists"):
        invited(people, tenant, "ALICE")


def test_a_user_of_an_unknown_workspace_is_refused(people: UserService) -> None:
    with pytest.raises(WorkspaceNotFoundError):
        people.create_user(workspace_id=987654, name="x", role="viewer")


def test_an_invite_sets_the_password_once(
    people: UserService, sessions: SessionService, tenant: Tenant
) -> None:
    token = invited(people, tenant)
    user = people.accept_invite(token, password=PASSWORD, confirmation=PASSWORD)
    assert user.has_password
    with pytest.raises(InviteNotValidError):
        people.accept_invite(token, password="another password!", confirmation="another password!")
    with pytest.raises(InviteNotValidError):
        people.invited_user(token)
    assert sessions.sign_in(name="alice", password=PASSWORD).user.id == user.id


def test_an_invite_expires_after_72_hours(
    people: UserService, tenant: Tenant, clock: Clock
) -> None:
    token = invited(people, tenant)
    clock.move(hours=71, minutes=59)
    assert people.invited_user(token).name == "alice"
    clock.move(minutes=1)
    with pytest.raises(InviteNotValidError):
        people.accept_invite(token, password=PASSWORD, confirmation=PASSWORD)


@pytest.mark.parametrize(
    ("password", "confirmation", "words"),
    [("eleven char", "eleven char", "at least 12"), (PASSWORD, PASSWORD + "x", "not the same")],
)
def test_a_short_or_unconfirmed_password_is_refused_and_the_invite_kept(
    people: UserService, tenant: Tenant, password: str, confirmation: str, words: str
) -> None:
    token = invited(people, tenant)
    with pytest.raises(PasswordRejectedError, match=words):
        people.accept_invite(token, password=password, confirmation=confirmation)
    assert people.accept_invite(token, password=PASSWORD, confirmation=PASSWORD).has_password


def test_wrong_password_and_unknown_user_fail_alike(
    people: UserService, sessions: SessionService, tenant: Tenant
) -> None:
    signed_up(people, tenant)
    invited(people, tenant, "carol")  # invited, no password yet
    failures = []
    for name, password in [("alice", "wrong password!"), ("mallory", PASSWORD), ("carol", "")]:
        with pytest.raises(SignInError) as raised:
            sessions.sign_in(name=name, password=password)
        failures.append((type(raised.value), raised.value.message))
    assert failures == [(SignInError, "Wrong username or password.")] * 3


def test_repeated_failures_lock_a_username_known_or_not(
    people: UserService, sessions: SessionService, tenant: Tenant, clock: Clock
) -> None:
    signed_up(people, tenant)
    for name in ("alice", "nobody"):
        for _ in range(3):
            with pytest.raises(SignInError) as raised:
                sessions.sign_in(name=name, password="wrong password!")
            assert type(raised.value) is SignInError
        with pytest.raises(SignInLockedError):
            sessions.sign_in(name=name, password=PASSWORD)  # even the right one
    clock.move(minutes=15)
    assert sessions.sign_in(name="Alice", password=PASSWORD).user.name == "alice"


def test_a_good_sign_in_starts_the_failure_count_again(
    people: UserService, sessions: SessionService, tenant: Tenant
) -> None:
    signed_up(people, tenant)
    for _ in range(2):
        with pytest.raises(SignInError):
            sessions.sign_in(name="alice", password="wrong password!")
    sessions.sign_in(name="alice", password=PASSWORD)
    for _ in range(2):
        with pytest.raises(SignInError):
            sessions.sign_in(name="alice", password="wrong password!")
    assert sessions.sign_in(name="alice", password=PASSWORD).user.name == "alice"


def test_a_session_is_stored_hashed_and_each_sign_in_gets_a_new_one(
    runtime: Runtime, people: UserService, sessions: SessionService, tenant: Tenant
) -> None:
    signed_up(people, tenant)
    first = sessions.sign_in(name="alice", password=PASSWORD).session_id
    second = sessions.sign_in(name="alice", password=PASSWORD).session_id
    assert first != second
    with runtime.engine.connect() as conn:
        stored = set(conn.execute(sa.select(console_sessions.c.session_hash)).scalars())
    assert stored == {hash_secret(first), hash_secret(second)}
    assert sessions.user_of(first).name == sessions.user_of(second).name == "alice"


def test_a_session_ends_after_30_idle_minutes(
    people: UserService, sessions: SessionService, tenant: Tenant, clock: Clock
) -> None:
    signed_up(people, tenant)
    session = sessions.sign_in(name="alice", password=PASSWORD).session_id
    for _ in range(3):  # busy: each request within 30 minutes of the last
        clock.move(minutes=29)
        sessions.user_of(session)
    clock.move(minutes=30)
    with pytest.raises(SessionEndedError):
        sessions.user_of(session)
    clock.move(seconds=-1800)  # ended on the server: moving back does not revive it
    with pytest.raises(SessionEndedError):
        sessions.user_of(session)


def test_a_session_ends_12_hours_after_sign_in_however_busy(
    people: UserService, sessions: SessionService, tenant: Tenant, clock: Clock
) -> None:
    signed_up(people, tenant)
    session = sessions.sign_in(name="alice", password=PASSWORD).session_id
    for _ in range(24 * 2 - 1):
        clock.move(minutes=15)
        sessions.user_of(session)  # 11 h 45 min
    clock.move(minutes=15)
    with pytest.raises(SessionEndedError):
        sessions.user_of(session)


def test_sign_out_ends_the_session_on_the_server(
    people: UserService, sessions: SessionService, tenant: Tenant
) -> None:
    signed_up(people, tenant)
    session = sessions.sign_in(name="alice", password=PASSWORD).session_id
    other = sessions.sign_in(name="alice", password=PASSWORD).session_id
    sessions.sign_out(session)
    with pytest.raises(SessionEndedError):
        sessions.user_of(session)
    assert sessions.user_of(other).name == "alice"  # another browser's session stays
    sessions.sign_out(session)  # twice: nothing more to end
    sessions.sign_out(None)
    for unknown in (None, "", "not a session"):
        with pytest.raises(SessionEndedError):
            sessions.user_of(unknown)


def test_reset_ends_password_sessions_and_older_invites(
    people: UserService, sessions: SessionService, tenant: Tenant
) -> None:
    token = invited(people, tenant)
    user = people.accept_invite(token, password=PASSWORD, confirmation=PASSWORD)
    session = sessions.sign_in(name="alice", password=PASSWORD).session_id
    stale = people.reset_user(user.id)  # a reset whose URL got lost
    fresh = people.reset_user(user.id)
    assert not fresh.user.has_password
    with pytest.raises(SessionEndedError):
        sessions.user_of(session)
    with pytest.raises(SignInError):
        sessions.sign_in(name="alice", password=PASSWORD)
    with pytest.raises(InviteNotValidError):
        people.invited_user(stale.token)
    people.accept_invite(fresh.token, password="a new password", confirmation="a new password")
    assert sessions.sign_in(name="alice", password="a new password").user.id == user.id


def test_a_disabled_user_cannot_sign_in_and_their_sessions_end(
    people: UserService, sessions: SessionService, tenant: Tenant
) -> None:
    signed_up(people, tenant)
    session = sessions.sign_in(name="alice", password=PASSWORD)
    disabled = people.disable_user(session.user.id)
    assert disabled.disabled
    with pytest.raises(SessionEndedError):
        sessions.user_of(session.session_id)
    with pytest.raises(SignInError) as raised:
        sessions.sign_in(name="alice", password=PASSWORD)
    assert raised.value.message == "Wrong username or password."


def test_an_unused_invite_of_a_disabled_user_opens_nothing(
    people: UserService, tenant: Tenant
) -> None:
    issued = people.create_user(workspace_id=tenant.workspace_id, name="dan", role="viewer")
    people.disable_user(issued.user.id)
    with pytest.raises(InviteNotValidError):
        people.accept_invite(issued.token, password=PASSWORD, confirmation=PASSWORD)


def test_listing_users_shows_each_workspace_its_own(
    runtime: Runtime, people: UserService, tenant: Tenant
) -> None:
    other = make_tenant(runtime.engine)
    invited(people, tenant, "alice", "admin")
    invited(people, other, "bob", "viewer")
    assert [(u.name, u.role) for u in people.list_users(tenant.workspace_id)] == [
        ("alice", Role.ADMIN)
    ]
    assert [u.name for u in people.list_users(other.workspace_id)] == ["bob"]
    with pytest.raises(UserNotFoundError):
        people.reset_user(2**40)
    with pytest.raises(UserNotFoundError):
        people.disable_user(99999)


def test_a_password_is_stored_as_an_argon2id_hash(
    runtime: Runtime, people: UserService, tenant: Tenant
) -> None:
    signed_up(people, tenant)
    with runtime.engine.connect() as conn:
        stored = conn.execute(sa.select(users.c.password_hash)).scalar_one()
    assert stored.startswith("$argon2id$")
    assert PASSWORD not in stored


def test_roles_include_the_ones_below() -> None:
    assert Role.ADMIN.allows(Role.ANALYST)
    assert Role.ADMIN.allows(Role.VIEWER)
    assert Role.ANALYST.allows(Role.VIEWER)
    assert not Role.ANALYST.allows(Role.ADMIN)
    assert not Role.VIEWER.allows(Role.ANALYST)
