"""The downloader against real HTTP servers on loopback: it fetches what it should, and
refuses (before connecting) what it must not.

Every server here listens on 127.0.0.1. Tests that need a download to succeed allow
127.0.0.0/8 explicitly; the SSRF tests use the default policy and check that the server
saw nothing. Addresses outside loopback appear only in `AddressPolicy.check` cases,
which never connect.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import hashlib
import ipaddress
import pathlib
import socket
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.servers import (
    RequestLog,
    SeenRequest,
    ServerSecrets,
    file_server_app,
    pattern_bytes,
    serve_app,
    tls_files,
)
from support.waiting import eventually
from tally.core.errors import FetchError
from tally.net.fetch import (
    AddressPolicy,
    Credentials,
    FetchLimits,
    classify_status,
    open_download,
)
from tally.storage.blobs import BlobStore

CSV = b"id,amount,currency\n1,10.00,EUR\n2,-3.50,EUR\n"
BIG = pattern_bytes(300_000)
FILES = {"data.csv": CSV, "big.bin": BIG, "exact.bin": pattern_bytes(1000)}
SECRETS = ServerSecrets()
LOOPBACK = AddressPolicy(allow=(ipaddress.ip_network("127.0.0.0/8"),))
DEFAULT = AddressPolicy()
LIMITS = FetchLimits(
    connect_timeout_seconds=2.0,
    read_timeout_seconds=2.0,
    total_timeout_seconds=20.0,
    max_file_bytes=1_000_000,
    max_redirects=3,
)

GOOD = {
    "basic": Credentials("basic_auth", username=SECRETS.username, password=SECRETS.password),
    "api-key": Credentials("api_key", api_key=SECRETS.api_key),
    "bearer": Credentials("bearer", token=SECRETS.token),
}
WRONG = {
    "basic": Credentials("basic_auth", username=SECRETS.username, password="wrong-pass-77"),
    "api-key": Credentials("api_key", api_key="wrong-key-77"),
    "bearer": Credentials("bearer", token="wrong-token-77"),
}
SECRET_TEXTS = ["s3cret-pass", "key-0123456789", "tok-abcdefghij", "wrong-", "YWxpY2"]


# --- servers ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def origin_log() -> RequestLog:
    return RequestLog()


@pytest.fixture(scope="module")
def other_log() -> RequestLog:
    return RequestLog()


@pytest.fixture(scope="module")
def origin(origin_log: RequestLog) -> Iterator[str]:
    """The server the downloads start at."""
    with serve_app(file_server_app(FILES, log=origin_log)) as url:
        yield url


@pytest.fixture(scope="module")
def other(other_log: RequestLog) -> Iterator[str]:
    """A second server on another port: another origin for cross-origin redirects."""
    with serve_app(file_server_app(FILES, log=other_log)) as url:
        yield url


@pytest.fixture(autouse=True)
def _fresh_logs(origin_log: RequestLog, other_log: RequestLog) -> None:
    origin_log.clear()
    other_log.clear()


def port_of(base_url: str) -> int:
    return int(base_url.rsplit(":", 1)[1])


@dataclass(frozen=True)
class Fetched:
    path: pathlib.Path
    bytes: int
    sha256: str
    content_type: str | None
    final_url: str


def fetch(
    url: str,
    dest: pathlib.Path,
    *,
    credentials: Credentials | None = None,
    limits: FetchLimits = LIMITS,
    policy: AddressPolicy = LOOPBACK,
    ssl_context: ssl.SSLContext | None = None,
) -> Fetched:
    """Download `url` into `dest` as the worker does: the blob store writes the chunks."""
    with open_download(
        url, credentials=credentials, limits=limits, policy=policy, ssl_context=ssl_context
    ) as download:
        blob = BlobStore(dest.parent).write(dest, download.chunks)
    return Fetched(blob.path, blob.size, blob.sha256, download.content_type, download.final_url)


def fetch_error(
    url: str,
    dest: pathlib.Path,
    *,
    credentials: Credentials | None = None,
    limits: FetchLimits = LIMITS,
    policy: AddressPolicy = LOOPBACK,
    ssl_context: ssl.SSLContext | None = None,
) -> FetchError:
    """The FetchError a download raises; also checks that it left no file behind."""
    with pytest.raises(FetchError) as caught:
        fetch(
            url,
            dest,
            credentials=credentials,
            limits=limits,
            policy=policy,
            ssl_context=ssl_context,
        )
    assert sorted(dest.parent.iterdir()) == [], "a failed download left a file behind"
    return caught.value


def assert_no_secret(error: FetchError) -> None:
    text = f"{error} {error!r}"
    for secret in SECRET_TEXTS:
        assert secret not in text


# --- plain downloads ----------------------------------------------------------------------


def test_downloads_file_with_size_hash_and_type(
    origin: str, origin_log: RequestLog, tmp_path: pathlib.Path
) -> None:
    dest = tmp_path / "data.csv"
    result = fetch(f"{origin}/files/data.csv", dest)
    assert result.path == dest
    assert dest.read_bytes() == CSV
    assert result.bytes == len(CSV)
    assert result.sha256 == hashlib.sha256(CSV).hexdigest()
    assert result.content_type is not None
    assert result.content_type.startswith("text/csv")
    assert result.final_url == f"{origin}/files/data.csv"
    assert sorted(tmp_path.iterdir()) == [dest]
    (seen,) = origin_log.requests
    assert seen.headers["user-agent"] == "tally"
    assert seen.headers["host"] == f"127.0.0.1:{port_of(origin)}"


def test_large_file_is_streamed_intact(origin: str, tmp_path: pathlib.Path) -> None:
    result = fetch(f"{origin}/files/big.bin", tmp_path / "big.bin")
    assert result.bytes == len(BIG)
    assert result.sha256 == hashlib.sha256(BIG).hexdigest()
    assert (tmp_path / "big.bin").read_bytes() == BIG


def test_chunked_body_without_length_is_hashed(origin: str, tmp_path: pathlib.Path) -> None:
    result = fetch(f"{origin}/chunked/250000", tmp_path / "out.bin")
    assert result.bytes == 250_000
    assert result.sha256 == hashlib.sha256(pattern_bytes(250_000)).hexdigest()


def test_body_is_handed_on_in_pieces_never_whole(origin: str) -> None:
    # What keeps a 1 GB download in constant memory: net never holds the whole body.
    with open_download(
        f"{origin}/files/big.bin", credentials=None, limits=LIMITS, policy=LOOPBACK
    ) as download:
        sizes = [len(chunk) for chunk in download.chunks]
    assert sum(sizes) == len(BIG)
    assert max(sizes) < len(BIG)


def test_existing_destination_is_replaced(origin: str, tmp_path: pathlib.Path) -> None:
    dest = tmp_path / "data.csv"
    dest.write_bytes(b"old content that is longer than the new one" * 10)
    fetch(f"{origin}/files/data.csv", dest)
    assert dest.read_bytes() == CSV


def test_query_string_is_sent_but_not_reported(
    origin: str, origin_log: RequestLog, tmp_path: pathlib.Path
) -> None:
    result = fetch(f"{origin}/files/data.csv?X-Amz-Signature=presigned-secret", tmp_path / "d")
    assert origin_log.requests[0].query == "X-Amz-Signature=presigned-secret"
    assert "presigned-secret" not in repr(result)
    (tmp_path / "failed").mkdir()
    url = f"{origin}/status/404?X-Amz-Signature=presigned-secret"
    error = fetch_error(url, tmp_path / "failed" / "d")
    assert "presigned-secret" not in str(error)
    assert "X-Amz" not in str(error)


def test_a_name_is_resolved_and_connected_to_by_address(
    origin: str, origin_log: RequestLog, tmp_path: pathlib.Path
) -> None:
    # localhost resolves to 127.0.0.1 (allowed here); the Host header keeps the name.
    result = fetch(f"http://localhost:{port_of(origin)}/files/data.csv", tmp_path / "d")
    assert result.bytes == len(CSV)
    assert origin_log.requests[0].headers["host"] == f"localhost:{port_of(origin)}"


# --- credentials --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(GOOD))
def test_each_credential_kind_is_accepted(kind: str, origin: str, tmp_path: pathlib.Path) -> None:
    result = fetch(f"{origin}/{kind}/files/data.csv", tmp_path / "d", credentials=GOOD[kind])
    assert result.sha256 == hashlib.sha256(CSV).hexdigest()


@pytest.mark.parametrize("kind", sorted(WRONG))
def test_wrong_credentials_are_a_permanent_401(
    kind: str, origin: str, tmp_path: pathlib.Path
) -> None:
    error = fetch_error(f"{origin}/{kind}/files/data.csv", tmp_path / "d", credentials=WRONG[kind])
    assert not error.transient
    assert "HTTP 401" in str(error)
    assert_no_secret(error)


@pytest.mark.parametrize("kind", sorted(GOOD))
def test_credentials_of_another_kind_are_refused(
    kind: str, origin: str, tmp_path: pathlib.Path
) -> None:
    others = [c for k, c in GOOD.items() if k != kind]
    for credentials in [None, *others]:
        error = fetch_error(
            f"{origin}/{kind}/files/data.csv", tmp_path / "d", credentials=credentials
        )
        assert "HTTP 401" in str(error)
        assert not error.transient


@pytest.mark.parametrize(
    "credentials",
    [
        Credentials("basic_auth", username="alice"),
        Credentials("basic_auth", username="al:ice", password="x"),
        Credentials("api_key"),
        Credentials("bearer", token=""),
        Credentials("bearer", token="tok-abcdefghij\r\nX-Evil: 1"),
        Credentials("api_key", api_key="key-0123456789\n"),
    ],
    ids=["no-password", "colon-user", "no-key", "empty-token", "crlf-token", "lf-key"],
)
def test_unusable_credentials_are_refused_before_any_request(
    credentials: Credentials, origin: str, origin_log: RequestLog, tmp_path: pathlib.Path
) -> None:
    error = fetch_error(f"{origin}/files/data.csv", tmp_path / "d", credentials=credentials)
    assert not error.transient
    assert "credentials" in str(error)
    assert_no_secret(error)
    assert origin_log.requests == []


def test_credentials_do_not_show_in_repr() -> None:
    for credentials in [*GOOD.values(), *WRONG.values()]:
        text = repr(credentials)
        assert all(secret not in text for secret in SECRET_TEXTS)


# --- redirects ----------------------------------------------------------------------------


def test_relative_redirects_are_followed_up_to_the_limit(
    origin: str, origin_log: RequestLog, tmp_path: pathlib.Path
) -> None:
    result = fetch(f"{origin}/redirect/3/files/data.csv", tmp_path / "d")
    assert result.final_url == f"{origin}/files/data.csv"
    assert result.sha256 == hashlib.sha256(CSV).hexdigest()
    assert origin_log.paths == [
        "/redirect/3/files/data.csv",
        "/redirect/2/files/data.csv",
        "/redirect/1/files/data.csv",
        "/files/data.csv",
    ]


@pytest.mark.parametrize("status", [301, 303, 307, 308])
def test_every_redirect_status_is_followed(
    status: int, origin: str, tmp_path: pathlib.Path
) -> None:
    result = fetch(f"{origin}/redirect/1/files/data.csv?status={status}", tmp_path / "d")
    assert result.bytes == len(CSV)


def test_too_many_redirects_are_refused(
    origin: str, origin_log: RequestLog, tmp_path: pathlib.Path
) -> None:
    error = fetch_error(f"{origin}/redirect/4/files/data.csv", tmp_path / "d")
    assert not error.transient
    assert "too many redirects" in str(error)
    assert len(origin_log.requests) == 4  # the start and three hops; the 4th is not followed


def test_no_redirects_allowed_means_none_followed(origin: str, tmp_path: pathlib.Path) -> None:
    limits = FetchLimits(max_redirects=0)
    error = fetch_error(f"{origin}/redirect/1/files/data.csv", tmp_path / "d", limits=limits)
    assert "too many redirects" in str(error)
    assert fetch(f"{origin}/files/data.csv", tmp_path / "d", limits=limits).bytes == len(CSV)


def test_same_origin_redirect_keeps_credentials(origin: str, tmp_path: pathlib.Path) -> None:
    url = f"{origin}/redirect/2/basic/files/data.csv"
    assert fetch(url, tmp_path / "d", credentials=GOOD["basic"]).bytes == len(CSV)


def test_absolute_redirect_to_another_port_is_followed(
    origin: str, other: str, other_log: RequestLog, tmp_path: pathlib.Path
) -> None:
    result = fetch(f"{origin}/redirect-to?url={other}/files/data.csv", tmp_path / "d")
    assert result.final_url == f"{other}/files/data.csv"
    assert other_log.paths == ["/files/data.csv"]


@pytest.mark.parametrize("kind", sorted(GOOD))
def test_credentials_are_not_forwarded_to_another_origin(
    kind: str,
    origin: str,
    other: str,
    origin_log: RequestLog,
    other_log: RequestLog,
    tmp_path: pathlib.Path,
) -> None:
    url = f"{origin}/redirect-to?url={other}/{kind}/files/data.csv"
    error = fetch_error(url, tmp_path / "d", credentials=GOOD[kind])
    assert "HTTP 401" in str(error)  # the other origin wanted them and did not get them
    first, (second,) = origin_log.requests[0], other_log.requests
    sent = {"authorization", "x-api-key"} & set(first.headers)
    assert sent, "the credentials were not even sent to their own origin"
    assert not sent & set(second.headers)


def test_credentials_stay_dropped_when_a_redirect_comes_back(
    origin: str, other: str, origin_log: RequestLog, tmp_path: pathlib.Path
) -> None:
    back = f"{origin}/basic/files/data.csv"
    url = f"{origin}/redirect-to?url={other}/redirect-to%3Furl%3D{back}"
    error = fetch_error(url, tmp_path / "d", credentials=GOOD["basic"])
    assert "HTTP 401" in str(error)
    assert "authorization" not in origin_log.requests[-1].headers


@pytest.mark.parametrize(
    "target",
    [
        "http://[::1]:{port}/files/data.csv",
        "http://0.0.0.0:{port}/files/data.csv",
        "http://[::]:{port}/files/data.csv",
    ],
)
def test_redirect_to_a_refused_address_is_refused(
    target: str, origin: str, other: str, other_log: RequestLog, tmp_path: pathlib.Path
) -> None:
    # The origin is allowed (127.0.0.0/8), the redirect target's address is not.
    url = f"{origin}/redirect-to?url={target.format(port=port_of(other))}"
    error = fetch_error(url, tmp_path / "d")
    assert not error.transient
    assert str(error).startswith("download refused:")
    assert other_log.requests == []


@pytest.mark.parametrize("target", ["ftp://127.0.0.1/data.csv", "file:///etc/passwd"])
def test_redirect_to_another_scheme_is_refused(
    target: str, origin: str, tmp_path: pathlib.Path
) -> None:
    error = fetch_error(f"{origin}/redirect-to?url={target}", tmp_path / "d")
    assert not error.transient
    assert repr(target.split(":", 1)[0]) in str(error)


# --- time -------------------------------------------------------------------------------


def client_left(log: RequestLog, path: str) -> SeenRequest:
    """The one request for `path`, once the server has seen the downloader hang up.

    The time-out tests assert this instead of how long the download took: a client
    that gave up is observed by the server, whatever the machine's load."""
    (seen,) = [r for r in log.requests if r.path == path]
    eventually(
        lambda: seen.client_left_after is not None,
        timeout=30,
        what=f"the server to see the client leave {path}",
    )
    return seen


def test_server_that_never_answers_times_out_transiently(
    origin: str, origin_log: RequestLog, tmp_path: pathlib.Path
) -> None:
    # The server would answer after 10 s, well within the total limit: only the read
    # timeout ends the download, and the server sees the client leave before answering.
    limits = FetchLimits(read_timeout_seconds=0.5, total_timeout_seconds=20)
    error = fetch_error(f"{origin}/hang?seconds=10", tmp_path / "d", limits=limits)
    assert error.transient
    assert "timed out" in str(error)
    assert "total limit" not in str(error)
    seen = client_left(origin_log, "/hang")
    assert (seen.status, seen.client_left_after) == (None, 0)


def test_body_that_stalls_times_out_transiently(
    origin: str, origin_log: RequestLog, tmp_path: pathlib.Path
) -> None:
    # 10 bytes every 3 s: the whole file would arrive within the total limit, but each
    # wait exceeds the read timeout. The client leaves after the first piece.
    limits = FetchLimits(read_timeout_seconds=0.5, total_timeout_seconds=20)
    url = f"{origin}/slow/data.csv?chunk=10&delay=3"
    error = fetch_error(url, tmp_path / "d", limits=limits)
    assert error.transient
    assert "timed out" in str(error)
    assert "total limit" not in str(error)
    seen = client_left(origin_log, "/slow/data.csv")
    assert seen.status == 200
    assert seen.client_left_after is not None
    assert seen.client_left_after < len(CSV)


def test_trickling_body_hits_the_total_deadline(
    origin: str, origin_log: RequestLog, tmp_path: pathlib.Path
) -> None:
    # Every piece arrives well within the read timeout; the whole takes far too long
    # (one byte every 0.1 s): the client leaves with the file unfinished.
    limits = FetchLimits(read_timeout_seconds=2, total_timeout_seconds=1.0)
    url = f"{origin}/slow/data.csv?chunk=1&delay=0.1"
    error = fetch_error(url, tmp_path / "d", limits=limits)
    assert error.transient
    assert "total limit of 1 s" in str(error)
    seen = client_left(origin_log, "/slow/data.csv")
    assert seen.status == 200
    assert seen.client_left_after is not None
    assert seen.client_left_after < len(CSV)


def test_hang_longer_than_the_total_deadline_is_cut_at_the_deadline(
    origin: str, origin_log: RequestLog, tmp_path: pathlib.Path
) -> None:
    # The read timeout (30 s) would wait for the 10 s hang: only the total limit cuts it.
    limits = FetchLimits(read_timeout_seconds=30, total_timeout_seconds=0.6)
    error = fetch_error(f"{origin}/hang?seconds=10", tmp_path / "d", limits=limits)
    assert error.transient
    assert "total limit" in str(error)
    seen = client_left(origin_log, "/hang")
    assert (seen.status, seen.client_left_after) == (None, 0)


def test_closed_port_is_a_transient_connection_error(tmp_path: pathlib.Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    error = fetch_error(f"http://127.0.0.1:{port}/files/data.csv", tmp_path / "d")
    assert error.transient
    assert "could not connect" in str(error)


# --- statuses -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "retry_after", "expected_delay"),
    [
        (500, None, None),
        (502, None, None),
        (503, "7", 7.0),
        (503, None, None),
        (504, "7", None),  # only 429 and 503 carry Retry-After
        (408, None, None),
        (429, "3", 3.0),
        (429, "soon", None),
    ],
)
def test_server_trouble_is_transient(
    status: int,
    retry_after: str | None,
    expected_delay: float | None,
    origin: str,
    tmp_path: pathlib.Path,
) -> None:
    query = f"?retry_after={retry_after}" if retry_after else ""
    error = fetch_error(f"{origin}/status/{status}{query}", tmp_path / "d")
    assert error.transient
    assert error.retry_after_seconds == expected_delay
    assert f"HTTP {status}" in str(error)
    assert f"/status/{status}" in str(error)


def test_retry_after_as_http_date(origin: str, tmp_path: pathlib.Path) -> None:
    when = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=60)
    date = email.utils.format_datetime(when, usegmt=True).replace(" ", "%20")
    error = fetch_error(f"{origin}/status/429?retry_after={date}", tmp_path / "d")
    assert error.transient
    assert error.retry_after_seconds is not None
    assert 55 <= error.retry_after_seconds <= 61


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 418, 300])
def test_client_errors_are_permanent(status: int, origin: str, tmp_path: pathlib.Path) -> None:
    error = fetch_error(f"{origin}/status/{status}", tmp_path / "d")
    assert not error.transient
    assert error.retry_after_seconds is None
    assert f"HTTP {status}" in str(error)


def test_redirect_without_location_is_permanent(origin: str, tmp_path: pathlib.Path) -> None:
    error = fetch_error(f"{origin}/status/302", tmp_path / "d")
    assert not error.transient
    assert "no Location" in str(error)


def test_classify_status_directly() -> None:
    assert classify_status(404, None).message == "HTTP 404 Not Found"
    assert (
        "from https://example.test/x"
        in classify_status(404, None, source="https://example.test/x").message
    )
    past = email.utils.format_datetime(dt.datetime(2000, 1, 1, tzinfo=dt.UTC), usegmt=True)
    assert classify_status(503, past).retry_after_seconds == 0.0
    assert classify_status(503, " 12 ").retry_after_seconds == 12.0
    assert classify_status(503, "-5").retry_after_seconds is None
    assert classify_status(503, "1.5").retry_after_seconds is None
    assert classify_status(500, "12").retry_after_seconds is None
    assert classify_status(599, None).transient
    assert classify_status(599, None).message == "HTTP 599"
    assert not classify_status(451, None).transient


# --- size ---------------------------------------------------------------------------------


def test_announced_size_over_the_limit_is_refused_early(
    origin: str, origin_log: RequestLog, tmp_path: pathlib.Path
) -> None:
    # The server announces 10 GB and sends a byte every 50 ms, 600 in all: the refusal
    # rests on Content-Length alone, and the client hangs up without reading the body.
    error = fetch_error(f"{origin}/announce/10000000000", tmp_path / "d")
    assert not error.transient
    assert "file larger than 1000000 bytes" in str(error)
    assert "announced 10000000000" in str(error)
    seen = client_left(origin_log, "/announce/10000000000")
    assert seen.status == 200
    assert seen.client_left_after is not None
    assert seen.client_left_after < 600


def test_file_over_the_limit_by_content_length_is_refused(
    origin: str, tmp_path: pathlib.Path
) -> None:
    limits = FetchLimits(max_file_bytes=len(BIG) - 1)
    error = fetch_error(f"{origin}/files/big.bin", tmp_path / "d", limits=limits)
    assert not error.transient
    assert f"file larger than {len(BIG) - 1} bytes" in str(error)


def test_streamed_body_over_the_limit_is_refused(origin: str, tmp_path: pathlib.Path) -> None:
    limits = FetchLimits(max_file_bytes=100_000)
    error = fetch_error(f"{origin}/chunked/250000", tmp_path / "d", limits=limits)
    assert not error.transient
    assert str(error) == "file larger than 100000 bytes"


def test_file_of_exactly_the_limit_is_accepted(origin: str, tmp_path: pathlib.Path) -> None:
    limits = FetchLimits(max_file_bytes=1000)
    assert fetch(f"{origin}/files/exact.bin", tmp_path / "d", limits=limits).bytes == 1000
    assert fetch(f"{origin}/chunked/1000", tmp_path / "e", limits=limits).bytes == 1000
    (tmp_path / "sub").mkdir()
    error = fetch_error(f"{origin}/chunked/1001", tmp_path / "sub" / "f", limits=limits)
    assert "larger than 1000" in str(error)


# --- SSRF: URLs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "reason"),
    [
        ("http://127.0.0.1:{port}/files/data.csv", "loopback"),
        ("http://localhost:{port}/files/data.csv", "loopback"),
        ("http://[::1]:{port}/files/data.csv", "loopback"),
        ("http://[::ffff:127.0.0.1]:{port}/files/data.csv", "loopback"),
        ("http://127.1:{port}/files/data.csv", "loopback"),
        ("http://2130706433:{port}/files/data.csv", "loopback"),
        ("http://0.0.0.0:{port}/files/data.csv", "unspecified"),
        ("https://127.0.0.1:{port}/files/data.csv", "loopback"),
    ],
)
def test_loopback_is_refused_before_connecting(
    template: str, reason: str, origin: str, origin_log: RequestLog, tmp_path: pathlib.Path
) -> None:
    url = template.format(port=port_of(origin))
    error = fetch_error(url, tmp_path / "d", policy=DEFAULT)
    assert not error.transient
    assert str(error).startswith("download refused:")
    assert f"{reason} address" in str(error)
    assert origin_log.requests == []


def test_refusal_names_the_host_that_resolved(origin: str, tmp_path: pathlib.Path) -> None:
    url = f"http://localhost:{port_of(origin)}/"
    error = fetch_error(url, tmp_path / "d", policy=DEFAULT)
    assert str(error) == "download refused: 127.0.0.1 is a loopback address (from localhost)"


class FakeDns:
    """A resolver stub for made-up names (everything else goes to the real resolver).

    Each name maps to a list of answers; each lookup takes the next one (the last one
    repeats), which is how a rebinding DNS server behaves.
    """

    def __init__(self, answers: dict[str, list[list[str]]]) -> None:
        self.answers = answers
        self.lookups: list[str] = []
        self.real = socket.getaddrinfo

    def __call__(
        self, host: str | bytes | None, port: str | int | None, *args: Any, **kwargs: Any
    ) -> list[tuple[Any, ...]]:
        if not isinstance(host, str) or host not in self.answers:
            return self.real(host, port, *args, **kwargs)
        self.lookups.append(host)
        queue = self.answers[host]
        addresses = queue.pop(0) if len(queue) > 1 else queue[0]
        return [(_family(a), socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses]


def _family(address: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def test_name_is_resolved_once_and_the_checked_address_is_used(
    origin: str, origin_log: RequestLog, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # First answer 127.0.0.1 (allowed, and the server is there), later answers 127.0.0.2
    # (refused). Checking one answer and connecting by name would meet the second one.
    dns = FakeDns({"files.example.test": [["127.0.0.1"], ["127.0.0.2"]]})
    monkeypatch.setattr(socket, "getaddrinfo", dns)
    only_origin = AddressPolicy(allow=(ipaddress.ip_network("127.0.0.1/32"),))
    url = f"http://files.example.test:{port_of(origin)}/files/data.csv"
    assert fetch(url, tmp_path / "d", policy=only_origin).bytes == len(CSV)
    assert dns.lookups == ["files.example.test"]
    assert origin_log.requests[0].headers["host"] == f"files.example.test:{port_of(origin)}"


def test_every_resolved_address_must_pass(
    origin: str, origin_log: RequestLog, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first answer is allowed and reachable, the second is private: refuse outright.
    dns = FakeDns({"mixed.example.test": [["127.0.0.1", "10.0.0.1"]]})
    monkeypatch.setattr(socket, "getaddrinfo", dns)
    url = f"http://mixed.example.test:{port_of(origin)}/files/data.csv"
    error = fetch_error(url, tmp_path / "d")
    assert str(error) == (
        "download refused: 10.0.0.1 is a private address (from mixed.example.test)"
    )
    assert origin_log.requests == []


def test_redirect_from_allowed_server_to_refused_address(
    origin: str, other: str, other_log: RequestLog, tmp_path: pathlib.Path
) -> None:
    # Only the origin's exact address is allowed; the redirect goes to another loopback
    # address that the policy refuses.
    only_origin = AddressPolicy(allow=(ipaddress.ip_network("127.0.0.1/32"),))
    target = f"http://127.0.0.2:{port_of(other)}/files/data.csv"
    error = fetch_error(f"{origin}/redirect-to?url={target}", tmp_path / "d", policy=only_origin)
    assert str(error) == "download refused: 127.0.0.2 is a loopback address"
    assert other_log.requests == []


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("ftp://127.0.0.1/data.csv", "'ftp'"),
        ("file:///etc/passwd", "'file'"),
        ("gopher://127.0.0.1:70/", "'gopher'"),
        ("/files/data.csv", "missing"),
    ],
)
def test_only_http_and_https_are_allowed(url: str, named: str, tmp_path: pathlib.Path) -> None:
    error = fetch_error(url, tmp_path / "d")
    assert not error.transient
    assert f"scheme {named} is not allowed" in str(error)


def test_credentials_inside_the_url_are_refused(
    origin: str, origin_log: RequestLog, tmp_path: pathlib.Path
) -> None:
    url = origin.replace("http://", "http://alice:s3cret-pass@") + "/basic/files/data.csv"
    error = fetch_error(url, tmp_path / "d")
    assert not error.transient
    assert_no_secret(error)
    assert origin_log.requests == []


# --- TLS ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, pathlib.Path]]:
    directory = tmp_path_factory.mktemp("tls")
    ca, cert, key = tls_files(directory, hostname="localhost")
    with serve_app(file_server_app(FILES), tls=(cert, key)) as url:
        yield url, ca


def test_https_checks_the_certificate_against_the_name(
    tls_server: tuple[str, pathlib.Path], tmp_path: pathlib.Path
) -> None:
    # Connected to the vetted 127.0.0.1, yet TLS verifies the name "localhost".
    url, ca = tls_server
    trust = ssl.create_default_context(cafile=str(ca))
    https_url = f"https://localhost:{port_of(url)}/files/data.csv"
    result = fetch(https_url, tmp_path / "d", ssl_context=trust)
    assert result.sha256 == hashlib.sha256(CSV).hexdigest()
    assert result.final_url == https_url


def test_https_certificate_for_another_name_is_permanent_error(
    tls_server: tuple[str, pathlib.Path], tmp_path: pathlib.Path
) -> None:
    url, ca = tls_server
    trust = ssl.create_default_context(cafile=str(ca))
    error = fetch_error(f"{url}/files/data.csv", tmp_path / "d", ssl_context=trust)
    assert not error.transient
    assert "certificate" in str(error)


def test_https_untrusted_certificate_is_permanent_error(
    tls_server: tuple[str, pathlib.Path], tmp_path: pathlib.Path
) -> None:
    url = f"https://localhost:{port_of(tls_server[0])}/files/data.csv"
    error = fetch_error(url, tmp_path / "d")
    assert not error.transient
    assert "certificate" in str(error)


# --- AddressPolicy.check (no connections) -------------------------------------------------


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("10.0.0.1", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),
        ("100.64.0.1", "shared (CGNAT)"),
        ("224.0.0.1", "multicast"),
        ("255.255.255.255", "broadcast"),
        ("0.0.0.0", "unspecified"),
        ("127.0.0.1", "loopback"),
        ("127.255.255.254", "loopback"),
        ("240.0.0.1", "private"),
        ("192.0.2.1", "private"),
        ("::", "unspecified"),
        ("::1", "loopback"),
        ("fe80::1", "link-local"),
        ("fe80::1%1", "link-local"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("fec0::1", "site-local"),
        ("ff02::1", "multicast"),
        ("2001:db8::1", "private"),
        ("::ffff:10.0.0.1", "private"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "link-local"),
        ("64:ff9b::a9fe:a9fe", "link-local"),  # NAT64 of 169.254.169.254
        ("64:ff9b::7f00:1", "loopback"),  # NAT64 of 127.0.0.1
        ("2002:7f00:1::1", "loopback"),  # 6to4 of 127.0.0.1
        ("2002:a00:1::1", "private"),  # 6to4 of 10.0.0.1
        ("::127.0.0.1", "reserved"),  # deprecated IPv4-compatible form
    ],
)
def test_policy_refuses(address: str, reason: str) -> None:
    with pytest.raises(FetchError) as caught:
        DEFAULT.check(address)
    assert not caught.value.transient
    assert str(caught.value).startswith("download refused: ")
    assert str(caught.value).endswith(f" {reason} address")


@pytest.mark.parametrize(
    "address",
    [
        "8.8.8.8",
        "1.1.1.1",
        "93.184.216.34",
        "2001:4860:4860::8888",
        "2606:4700:4700::1111",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "2002:808:808::1",
    ],
)
def test_policy_accepts_public_addresses(address: str) -> None:
    DEFAULT.check(address)


@pytest.mark.parametrize("address", ["localhost", "", "1.2.3", "127.0.0.1:80", "[::1]"])
def test_policy_refuses_what_is_not_an_address(address: str) -> None:
    with pytest.raises(FetchError, match="is not an IP address"):
        DEFAULT.check(address)


def test_allowlist_opens_exactly_its_networks() -> None:
    policy = AddressPolicy(
        allow=(ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("::1/128"))
    )
    policy.check("10.0.0.1")
    policy.check("10.255.255.255")
    policy.check("::ffff:10.1.2.3")  # the IPv4 it reaches is in the allowlist
    policy.check("::1")
    for refused in ["192.168.0.1", "127.0.0.1", "172.16.0.1", "169.254.169.254", "::2"]:
        with pytest.raises(FetchError):
            policy.check(refused)
    policy.check("8.8.8.8")  # public addresses stay allowed


def test_loopback_allowlist_used_by_tests_does_not_open_anything_else() -> None:
    LOOPBACK.check("127.0.0.1")
    LOOPBACK.check("127.1.2.3")
    for refused in ["::1", "10.0.0.1", "169.254.169.254", "0.0.0.0"]:
        with pytest.raises(FetchError):
            LOOPBACK.check(refused)


@settings(database=None, max_examples=300, deadline=None)
@given(st.ip_addresses(v=4))
def test_ipv4_is_accepted_exactly_when_globally_routable_unicast(
    ip: ipaddress.IPv4Address,
) -> None:
    if ip.is_global and not ip.is_multicast:
        DEFAULT.check(str(ip))
    else:
        with pytest.raises(FetchError):
            DEFAULT.check(str(ip))


@settings(database=None, max_examples=300, deadline=None)
@given(st.ip_addresses(v=4))
def test_ipv4_mapped_addresses_are_judged_as_their_ipv4(ip: ipaddress.IPv4Address) -> None:
    mapped = f"::ffff:{ip}"
    try:
        DEFAULT.check(str(ip))
    except FetchError:
        with pytest.raises(FetchError):
            DEFAULT.check(mapped)
    else:
        DEFAULT.check(mapped)
