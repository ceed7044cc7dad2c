"""SSRF-safe streaming download of a file from a URL that a user configured.

A URL typed by a user is an instruction to make a request from inside our network.
Followed naively, it reaches the cloud metadata service, the database or any other
private service (server-side request forgery). So this module:

* vets the address actually connected to, not the hostname: the host is resolved
  here, every resolved address must pass `AddressPolicy`, and the socket is opened to a
  vetted address while TLS (SNI, certificate check) and the Host header keep the name.
  A DNS answer that changes between a check and the connect cannot slip through,
  because there is no separate check;
* follows redirects itself, so each hop is re-vetted, and drops the credentials as soon
  as a redirect leaves the origin they were configured for;
* hands the body on in chunks as they arrive, never whole, within a size and a time
  budget; writing them to a file is the blob store's job (`storage/blobs.py`), so a
  download stays within constant memory whatever its size;
* says whether a retry may help (`FetchError.transient`), and never puts credentials
  or the query string (pre-signed URLs keep their secret there) into a message.

Everything is passed in explicitly; nothing here reads settings. One module (about
600 lines) on purpose: it is the whole SSRF guard, address policy, vetted connections,
redirects and budgets, reviewed and read as one piece.
"""

from __future__ import annotations

import base64
import contextlib
import email.utils
import http
import ipaddress
import socket
import ssl
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC
from typing import Literal

import httpcore
import httpx

from tally.core.clock import utc_now
from tally.core.errors import FetchError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
_SocketOption = (
    tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
)

_SCHEMES = frozenset({"http", "https"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_RETRY_AFTER_STATUSES = frozenset({429, 503})
_DEADLINE_SLACK_SECONDS = 0.01


@dataclass(frozen=True)
class FetchLimits:
    """How long and how much one download may take."""

    connect_timeout_seconds: float = 10.0
    read_timeout_seconds: float = 30.0
    total_timeout_seconds: float = 600.0
    max_file_bytes: int = 1024**3
    max_redirects: int = 3


@dataclass(frozen=True)
class Credentials:
    """How to authenticate the download; only `kind` shows in `repr`, never a secret."""

    kind: Literal["basic_auth", "api_key", "bearer"]
    username: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    api_key: str | None = field(default=None, repr=False)
    token: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Download:
    """A download answered with a 2xx, its body not yet read.

    `chunks` yields the body as it arrives, raising `FetchError` once it passes the size
    or the time limit; it can be read only inside `open_download`'s `with` block.
    `final_url` is scheme, host and path only (no query string).
    """

    content_type: str | None
    final_url: str
    chunks: Iterator[bytes]


# --- which addresses may be connected to ------------------------------------------------

_SHARED_ADDRESS_SPACE = ipaddress.IPv4Network("100.64.0.0/10")  # carrier-grade NAT
_BROADCAST = ipaddress.IPv4Address("255.255.255.255")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # well-known prefix, IPv4 in the low 32 bits


def _is_site_local(ip: IPAddress) -> bool:
    return isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local


# First match names the reason; `is_global` is the catch-all for what the others miss.
_REFUSALS: tuple[tuple[str, Callable[[IPAddress], bool]], ...] = (
    ("unspecified", lambda ip: ip.is_unspecified),
    ("loopback", lambda ip: ip.is_loopback),
    ("link-local", lambda ip: ip.is_link_local),
    ("multicast", lambda ip: ip.is_multicast),
    ("broadcast", lambda ip: ip == _BROADCAST),
    ("shared (CGNAT)", lambda ip: ip in _SHARED_ADDRESS_SPACE),
    ("site-local", _is_site_local),
    ("private", lambda ip: ip.is_private),
    ("reserved", lambda ip: ip.is_reserved),
    ("non-public", lambda ip: not ip.is_global),
)


def _refusal_reason(ip: IPAddress) -> str | None:
    return next((reason for reason, applies in _REFUSALS if applies(ip)), None)


def _reached_addresses(ip: IPAddress) -> tuple[IPAddress, ...]:
    """The addresses traffic to `ip` really reaches: IPv4 hidden in IPv6 is judged too."""
    if isinstance(ip, ipaddress.IPv4Address):
        return (ip,)
    if ip.ipv4_mapped is not None:  # ::ffff:a.b.c.d is a.b.c.d on a dual-stack socket
        return (ip.ipv4_mapped,)
    if ip in _NAT64:  # a NAT64 gateway forwards to the embedded IPv4 address
        return (ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF),)
    if ip.sixtofour is not None:  # 2002:AABB:CCDD::/48 is relayed to AA.BB.CC.DD
        return (ip, ip.sixtofour)
    return (ip,)


@dataclass(frozen=True)
class AddressPolicy:
    """Which IP addresses a download may connect to: public ones, plus `allow`.

    Refused unless allowed: loopback, private (RFC 1918, fc00::/7), link-local (including
    the 169.254.169.254 metadata service), CGNAT, multicast, broadcast, reserved,
    unspecified and anything else that is not globally routable, also when hidden in an
    IPv4-mapped, NAT64 or 6to4 IPv6 address. `allow` is the only way to open the guard
    (tests allow 127.0.0.0/8; a deployment may allow a private range it trusts).
    """

    allow: tuple[IPNetwork, ...] = ()

    def check(self, address: str) -> None:
        """Raise a non-transient `FetchError` if `address` may not be connected to."""
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            message = f"download refused: {address!r} is not an IP address"
            raise FetchError(message, transient=False) from None
        if self._allows(ip):
            return
        for reached in _reached_addresses(ip):
            reason = None if self._allows(reached) else _refusal_reason(reached)
            if reason is not None:
                raise FetchError(_refused_message(ip, reached, reason), transient=False)

    def _allows(self, ip: IPAddress) -> bool:
        return any(ip in network for network in self.allow)


def _refused_message(ip: IPAddress, reached: IPAddress, reason: str) -> str:
    shown = str(ip) if ip == reached else f"{ip} (reaching {reached})"
    article = "an" if reason[0] in "aeiou" else "a"
    return f"download refused: {shown} is {article} {reason} address"


# --- connecting only to vetted addresses ------------------------------------------------


def _resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to, in the resolver's order, without duplicates."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        transient = exc.errno == socket.EAI_AGAIN
        raise FetchError(f"could not resolve host {host}", transient=transient) from None
    except UnicodeError:
        raise FetchError(f"could not resolve host {host}", transient=False) from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise FetchError(f"could not resolve host {host}", transient=True)
    return addresses


def _same_address(host: str, address: str) -> bool:
    try:
        return ipaddress.ip_address(host) == ipaddress.ip_address(address)
    except ValueError:
        return False


class _VettingBackend(httpcore.NetworkBackend):
    """Resolves the host itself, checks every address, then connects to a checked one.

    httpcore hands this the URL's host name and later starts TLS with that same name,
    so certificate checks and SNI are unaffected by connecting to an IP address here.
    """

    def __init__(self, policy: AddressPolicy) -> None:
        self._policy = policy
        self._sockets = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[_SocketOption] | None = None,
    ) -> httpcore.NetworkStream:
        addresses = _resolve(host, port)
        for address in addresses:  # all of them first: none is tried if any is refused
            try:
                self._policy.check(address)
            except FetchError as exc:
                if _same_address(host, address):
                    raise
                raise FetchError(f"{exc.message} (from {host})", transient=False) from None
        options = list(socket_options or ())
        failure: Exception = httpcore.ConnectError(f"no address to connect to for {host}")
        for address in addresses:
            try:
                return self._sockets.connect_tcp(address, port, timeout, local_address, options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        raise failure

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[_SocketOption] | None = None,
    ) -> httpcore.NetworkStream:
        raise FetchError("download refused: unix sockets are not allowed", transient=False)


@dataclass(frozen=True)
class _Budget:
    """The time one download has: per-operation timeouts under one wall-clock deadline."""

    limits: FetchLimits
    deadline: float

    @classmethod
    def start(cls, limits: FetchLimits) -> _Budget:
        return cls(limits, time.monotonic() + limits.total_timeout_seconds)

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def timeout(self) -> httpx.Timeout:
        """Connect and read timeouts, never reaching past the deadline."""
        left = max(self.remaining(), 0.001)
        connect = min(self.limits.connect_timeout_seconds, left)
        read = min(self.limits.read_timeout_seconds, left)
        return httpx.Timeout(connect=connect, read=read, write=read, pool=connect)

    def check(self, where: str) -> None:
        if self.remaining() <= 0:
            raise self.timeout_error(where)

    def timeout_error(self, where: str) -> FetchError:
        if self.remaining() <= _DEADLINE_SLACK_SECONDS:
            total = self.limits.total_timeout_seconds
            return FetchError(
                f"download from {where} took longer than the total limit of {total:g} s",
                transient=True,
            )
        connect, read = self.limits.connect_timeout_seconds, self.limits.read_timeout_seconds
        return FetchError(
            f"timed out talking to {where} (connect limit {connect:g} s, read limit {read:g} s)",
            transient=True,
        )


def _is_certificate_error(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


@contextlib.contextmanager
def _translated_errors(url: httpx.URL, budget: _Budget) -> Iterator[None]:
    """httpcore's failures as `FetchError`s that say whether a retry may help."""
    where = _describe(url)
    try:
        yield
    except httpcore.TimeoutException as exc:
        raise budget.timeout_error(where) from exc
    except httpcore.ConnectError as exc:
        if _is_certificate_error(exc):
            message = f"TLS certificate of {where} could not be verified: {exc}"
            raise FetchError(message, transient=False) from exc
        raise FetchError(f"could not connect to {where}: {exc}", transient=True) from exc
    except httpcore.NetworkError as exc:
        raise FetchError(f"connection to {where} failed: {exc}", transient=True) from exc
    except httpcore.ProtocolError:
        # The text of a protocol error can quote a header, so it stays out (and unchained).
        message = f"the HTTP exchange with {where} broke off or was malformed"
        raise FetchError(message, transient=True) from None


class _ResponseStream(httpx.SyncByteStream):
    def __init__(self, response: httpcore.Response, url: httpx.URL, budget: _Budget) -> None:
        self._response, self._url, self._budget = response, url, budget

    def __iter__(self) -> Iterator[bytes]:
        with _translated_errors(self._url, self._budget):
            yield from self._response.iter_stream()

    def close(self) -> None:
        self._response.close()


class _VettedTransport(httpx.BaseTransport):
    """An httpx transport whose every connection goes through `_VettingBackend`.

    Used without `httpx.Client` on purpose: no environment proxies, no cookie jar, no
    automatic redirects and no client log line carrying the full URL.
    """

    def __init__(
        self, policy: AddressPolicy, budget: _Budget, ssl_context: ssl.SSLContext | None
    ) -> None:
        self._budget = budget
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context or httpx.create_ssl_context(),
            network_backend=_VettingBackend(policy),
            max_connections=2,
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _translated_errors(request.url, self._budget):
            response = self._pool.handle_request(core_request)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(response, request.url, self._budget),
            extensions=response.extensions,
            request=request,
        )

    def close(self) -> None:
        self._pool.close()


# --- URLs, credentials, statuses ----------------------------------------------------------


def _describe(url: httpx.URL) -> str:
    """Scheme, host, port and path: what a message may show (no userinfo, no query)."""
    host = f"[{url.host}]" if ":" in url.host else url.host
    port = f":{url.port}" if url.port is not None else ""
    return f"{url.scheme}://{host}{port}{url.path}"


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port or _DEFAULT_PORTS.get(url.scheme)


def _vetted_url(url: httpx.URL) -> httpx.URL:
    if url.scheme not in _SCHEMES:
        scheme = repr(url.scheme) if url.scheme else "missing"
        message = f"download refused: scheme {scheme} is not allowed (only http and https)"
        raise FetchError(message, transient=False)
    if not url.host:
        raise FetchError("download refused: the URL has no host", transient=False)
    if url.userinfo:
        message = "download refused: credentials inside the URL are not supported"
        raise FetchError(message, transient=False)
    return url


def _parse_url(raw: str) -> httpx.URL:
    try:
        return _vetted_url(httpx.URL(raw))
    except httpx.InvalidURL:
        raise FetchError("download refused: not a valid URL", transient=False) from None


def _next_hop(url: httpx.URL, location: str) -> httpx.URL:
    try:
        return _vetted_url(url.join(location))
    except httpx.InvalidURL:
        message = f"redirect from {_describe(url)} to an invalid URL"
        raise FetchError(message, transient=False) from None


def _header_safe(kind: str, value: str) -> str:
    if not (value.isascii() and value.isprintable()):
        message = f"{kind} credentials contain characters not allowed in an HTTP header"
        raise FetchError(message, transient=False)
    return value


def _credential_headers(credentials: Credentials | None) -> dict[str, str]:
    """The request headers that carry `credentials` (never logged, never in messages)."""
    if credentials is None:
        return {}
    kind = credentials.kind
    if kind == "basic_auth":
        user, password = credentials.username, credentials.password
        if user is None or password is None or ":" in user:
            message = "basic_auth credentials need a username (without ':') and a password"
            raise FetchError(message, transient=False)
        encoded = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        return {"Authorization": f"Basic {encoded}"}
    if kind == "api_key" and credentials.api_key:
        return {"X-API-Key": _header_safe(kind, credentials.api_key)}
    if kind == "bearer" and credentials.token:
        return {"Authorization": f"Bearer {_header_safe(kind, credentials.token)}"}
    raise FetchError(f"{kind} credentials are missing their secret", transient=False)


def _retry_after_seconds(value: str | None) -> float | None:
    """Retry-After as seconds from now: delay-seconds or an HTTP-date; None if unusable."""
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000" parses naive; HTTP dates are always GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - utc_now()).total_seconds())


def classify_status(
    status: int, retry_after: str | None, *, source: str | None = None
) -> FetchError:
    """The error for a non-2xx answer.

    5xx, 408 and 429 are transient; 429 and 503 carry the Retry-After delay. Every other
    status (401, 403, 404, ...) is not transient: retrying will not change the answer.
    `source` (scheme, host and path, never the query) is named in the message when given.
    """
    try:
        phrase = f" {http.HTTPStatus(status).phrase}"
    except ValueError:
        phrase = ""
    where = f" from {source}" if source else ""
    transient = status >= 500 or status in (408, 429)
    delay = _retry_after_seconds(retry_after) if status in _RETRY_AFTER_STATUSES else None
    return FetchError(
        f"HTTP {status}{phrase}{where}", transient=transient, retry_after_seconds=delay
    )


# --- the download -------------------------------------------------------------------------


def _redirect_location(response: httpx.Response, url: httpx.URL) -> str | None:
    if response.status_code not in _REDIRECT_STATUSES:
        return None
    location: str | None = response.headers.get("location")
    if not location:
        message = f"HTTP {response.status_code} redirect from {_describe(url)} has no Location"
        raise FetchError(message, transient=False)
    return location


@contextlib.contextmanager
def _final_response(
    transport: _VettedTransport,
    start: httpx.URL,
    credentials: dict[str, str],
    budget: _Budget,
    user_agent: str,
) -> Iterator[tuple[httpx.Response, httpx.URL]]:
    """Follow redirects by hand (each hop re-vetted) to a 2xx response, still unread."""
    url, with_credentials = start, True
    for _ in range(budget.limits.max_redirects + 1):
        headers = {"User-Agent": user_agent, "Accept": "*/*", "Accept-Encoding": "identity"}
        if with_credentials:
            headers.update(credentials)
        request = httpx.Request("GET", url, headers=headers)
        request.extensions["timeout"] = budget.timeout().as_dict()
        response = transport.handle_request(request)
        try:
            location = _redirect_location(response, url)
            if location is None:
                if not response.is_success:
                    retry_after = response.headers.get("retry-after")
                    raise classify_status(response.status_code, retry_after, source=_describe(url))
                yield response, url
                return
        finally:
            response.close()
        url = _next_hop(url, location)
        # Credentials belong to the origin they were configured for; once a redirect has
        # left it they are not sent again, even if a later hop comes back.
        with_credentials = with_credentials and _origin(url) == _origin(start)
    limit = budget.limits.max_redirects
    message = f"too many redirects (more than {limit}) starting at {_describe(start)}"
    raise FetchError(message, transient=False)


def _too_large(limit: int, announced: int | None = None) -> FetchError:
    told = f" (the server announced {announced} bytes)" if announced is not None else ""
    return FetchError(f"file larger than {limit} bytes{told}", transient=False)


def _refuse_announced_size(response: httpx.Response, limit: int) -> None:
    """Fail before reading a byte when Content-Length already says the file is too big."""
    length = response.headers.get("content-length", "").strip()
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding == "identity" and length.isascii() and length.isdigit() and int(length) > limit:
        raise _too_large(limit, int(length))


def _body_chunks(response: httpx.Response, budget: _Budget, where: str) -> Iterator[bytes]:
    """The body as it arrives, each piece checked against the size and the time budget."""
    size, limit = 0, budget.limits.max_file_bytes
    try:
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            budget.check(where)
            yield chunk
    except httpx.DecodingError:
        raise FetchError(f"the body from {where} could not be decoded", transient=False) from None


@contextlib.contextmanager
def open_download(
    url: str,
    *,
    credentials: Credentials | None,
    limits: FetchLimits,
    policy: AddressPolicy,
    user_agent: str = "tally",
    ssl_context: ssl.SSLContext | None = None,
) -> Iterator[Download]:
    """Request `url`, follow its redirects, and yield the answer to read within `limits`.

    Only http(s); every address connected to, on every redirect hop, must pass `policy`.
    `ssl_context` replaces the default CA bundle (e.g. a private CA); None means certifi.
    Raises `FetchError`, on entering or while the chunks are read; `transient` says whether
    a retry may succeed. A Content-Length over the size limit fails before the body is
    read. Whatever the reader raises (e.g. an `OSError` writing a file) propagates.
    """
    start = _parse_url(url)
    headers = _credential_headers(credentials)
    budget = _Budget.start(limits)
    with (
        _VettedTransport(policy, budget, ssl_context) as transport,
        _final_response(transport, start, headers, budget, user_agent) as (response, final),
    ):
        _refuse_announced_size(response, limits.max_file_bytes)
        where = _describe(final)
        content_type = response.headers.get("content-type")
        yield Download(content_type, where, _body_chunks(response, budget, where))


@contextlib.contextmanager
def vetted_request(
    method: str,
    url: str,
    *,
    headers: dict[str, str],
    content: bytes,
    policy: AddressPolicy,
    timeout_seconds: float,
    ssl_context: ssl.SSLContext | None = None,
) -> Iterator[httpx.Response]:
    """One request to a user-configured URL (e.g. a status callback); no redirect followed.

    The same guard as `open_download`: only http(s), every address connected to must pass
    `policy`. Connecting and each read may take `timeout_seconds`; a server trickling its
    answer is cut off at twice that. The response is yielded unread, whatever its status;
    raises `FetchError` when no response came (refused address, connection failure,
    time-out), never naming the query string.
    """
    start = _parse_url(url)
    limits = FetchLimits(
        connect_timeout_seconds=timeout_seconds,
        read_timeout_seconds=timeout_seconds,
        total_timeout_seconds=2 * timeout_seconds,
        max_redirects=0,
    )
    budget = _Budget.start(limits)
    with _VettedTransport(policy, budget, ssl_context) as transport:
        request = httpx.Request(method, start, headers=headers, content=content)
        request.extensions["timeout"] = budget.timeout().as_dict()
        response = transport.handle_request(request)
        try:
            yield response
        finally:
            response.close()
