"""The one tree of tally's errors; every boundary translates into or out of it.

    TallyError
    ├── NotFoundError
    │   ├── WorkspaceNotFoundError, ResourceNotFoundError, AccountNotFoundError
    │   ├── WebhookNotFoundError, FileNotFoundInSourceError, ApiKeyNotFoundError
    │   ├── ReconciliationNotFoundError, MatchNotFoundError, TransformationNotFoundError
    │   ├── ResolutionNotFoundError
    │   └── UserNotFoundError, DeliveryNotFoundError
    ├── AuthError
    │   ├── InvalidCredentialsError          (Data API 401)
    │   ├── ResourceOwnershipError           (Data API 403)
    │   ├── IngestionForbiddenError          (ingestion API 403, no hint)
    │   ├── SignInError                      (the console: one message, whatever was wrong)
    │   │   └── SignInLockedError            (too many failures for one username)
    │   ├── InviteNotValidError              (used, expired or replaced)
    │   └── SessionEndedError                (signed out, expired, or its user disabled)
    ├── InvalidRequestError                  (a request that cannot be applied)
    │   ├── UsageError                       (the CLI: a command line it cannot read)
    │   ├── PasswordRejectedError            (the console: too short, or not confirmed)
    │   ├── InvalidWorkspaceHeaderError, UnknownFilterFieldError, UnknownFieldError,
    │   ├── UnknownOrderingFieldError, UnsupportedOperatorError, QueryNotApplicableError
    │   ├── DefinitionRejectedError          (ingestion 400 with an errors list)
    │   │   └── ResourceNameTakenError       (its name taken by a concurrent request)
    │   ├── InvalidNotificationError         (a webhook notification without a file URL)
    │   ├── InvalidBodyError                 (ingestion 422: a body that is not its model)
    │   │   └── InvalidUploadError           (an upload that is not its Content-Type)
    │   │       └── JsonRowsError            (JSON rows that cannot become CSV)
    │   ├── RowNotFoundError                 (400: a manual match names a row not in its input)
    │   ├── ConflictError                    (409: rows already in a manual match, ...)
    │   ├── IdempotencyKeyReusedError        (ingestion 422: a key sent with another request)
    │   ├── IncompleteBodyError              (ingestion 400: the client left mid-body)
    │   ├── UnsupportedMediaTypeError        (ingestion 415)
    │   └── UploadTooLargeError              (ingestion 413)
    ├── LoadError                            (a file that cannot be loaded: line and column)
    │   └── SchemaMismatchError
    ├── FetchError(transient)                (a download that failed)
    ├── SealError                            (core/sealing.py: a secret that cannot be opened)
    ├── RunFailedError                       (a derived resource's run: recorded on it)
    ├── ListenError                          (`tally serve`: its address cannot be bound)
    ├── StorageError                         (the database could not be reached: 503)
    │   └── StorageProvisioningError         (a source's table could not be made: 502)
    └── BusyError                            (503 with Retry-After: every connection of a
        │                                     pool, or every preview slot, in use)
        └── TooManyPreviewsError             (429 with Retry-After: the workspace's
                                              previews at their limit)

Services raise these; `api/errors.py` maps them, per API version, to a status and a
body (and the OpenAPI document's responses are generated from the same tables).
Every class carries structured context so each edge renders it its own way.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class TallyError(Exception):
    """Something went wrong in tally."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or (self.__doc__ or type(self).__name__).strip())

    @property
    def message(self) -> str:
        return str(self.args[0])

    def __reduce__(self) -> tuple[object, ...]:
        # Structured context (line, column, ...) survives pickling: the loader's checks
        # may run in another process.
        return (_restore, (type(self), self.args, self.__dict__))


def _restore(
    cls: type[TallyError], args: tuple[object, ...], state: dict[str, object]
) -> TallyError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class NotFoundError(TallyError):
    """The thing asked for does not exist."""


class AccountNotFoundError(NotFoundError):
    """Account not found"""


class WorkspaceNotFoundError(NotFoundError):
    """Workspace not found"""


class ResourceNotFoundError(NotFoundError):
    """Resource not found"""


class WebhookNotFoundError(NotFoundError):
    """Webhook not found"""


class FileNotFoundInSourceError(NotFoundError):
    """File not found"""


class DeliveryNotFoundError(NotFoundError):
    """Delivery not found"""


class ApiKeyNotFoundError(NotFoundError):
    """API key not found"""


class ReconciliationNotFoundError(NotFoundError):
    """Reconciliation not found"""


class MatchNotFoundError(NotFoundError):
    """Match not found"""


class ResolutionNotFoundError(NotFoundError):
    """Resolution not found"""


class TransformationNotFoundError(NotFoundError):
    """Transformation not found"""


class UserNotFoundError(NotFoundError):
    """User not found"""


class AuthError(TallyError):
    """Authentication or authorisation failed."""


class InvalidCredentialsError(AuthError):
    """Could not validate credentials"""


class ResourceOwnershipError(AuthError):
    """Resource does not belong to the specified workspace"""


class IngestionForbiddenError(AuthError):
    """Forbidden"""


class SignInError(AuthError):
    """Wrong username or password."""


class SignInLockedError(SignInError):
    """Too many failed sign-ins for this username: try again in a few minutes."""


class InviteNotValidError(AuthError):
    """This invite link is not valid: it was used, it expired, or a newer one replaced it.
    Ask your administrator for a new one."""


class SessionEndedError(AuthError):
    """Your session has ended: sign in again."""


class InvalidRequestError(TallyError):
    """The request cannot be applied."""


class PasswordRejectedError(InvalidRequestError):
    """The password cannot be used."""


class UsageError(InvalidRequestError):
    """A command line the CLI cannot read: an unknown command or option, a missing or
    bad value."""


class InvalidWorkspaceHeaderError(InvalidRequestError):
    """workspace_id must be a valid integer"""


class UnknownNameError(InvalidRequestError):
    """A request names a column the resource does not have."""

    template = "{name}"

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(self.template.format(name=name))


class UnknownFilterFieldError(UnknownNameError):
    template = "Filter field '{name}' is not a valid column for this resource."


class UnknownFieldError(UnknownNameError):
    template = "Field '{name}' is not a valid column for this resource."


class UnknownOrderingFieldError(UnknownNameError):
    template = "Ordering field '{name}' is not a valid column for this resource."


class UnsupportedOperatorError(UnknownNameError):
    template = "Operator '{name}' is not supported."


class QueryNotApplicableError(InvalidRequestError):
    """The requested filters or ordering could not be applied."""

    def __init__(self, reason: str = "") -> None:
        # The wire text is fixed by the spec; the reason is kept for logs.
        self.reason = reason
        super().__init__()


@dataclass(frozen=True)
class FieldProblem:
    """One rejected field of a request body: where it is (None: the body as a whole)
    and why."""

    field: str | None
    message: str


class DefinitionRejectedError(InvalidRequestError):
    """The platform rejected the definition."""

    def __init__(self, problems: list[FieldProblem]) -> None:
        self.problems = problems
        super().__init__("; ".join(f"{p.field}: {p.message}" for p in problems))


class ResourceNameTakenError(DefinitionRejectedError):
    """A resource of that name was registered meanwhile: storage's unique name, taken by a
    concurrent request after the definition's checks found it free."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__([FieldProblem("name", f"a resource named {name!r} already exists")])


class RowNotFoundError(InvalidRequestError):
    """A row the body names is not in its input; each problem names the side and row."""

    def __init__(self, problems: list[FieldProblem]) -> None:
        self.problems = problems
        super().__init__("; ".join(p.message for p in problems))


class ConflictError(InvalidRequestError):
    """The request conflicts with what is there now; each problem names the row or field."""

    def __init__(self, problems: list[FieldProblem]) -> None:
        self.problems = problems
        super().__init__("; ".join(p.message for p in problems))


class IdempotencyKeyReusedError(InvalidRequestError):
    """An Idempotency-Key already used for a different request to the same source: the
    new request is refused, never answered with the other request's file."""

    FIELD = "header.Idempotency-Key"  # as FastAPI names a header in a validation error

    def __init__(self, key: str, difference: str) -> None:
        self.key = key
        super().__init__(f"Idempotency-Key {key!r} was used with a different request: {difference}")


class LoadError(TallyError):
    """The file could not be loaded."""

    def __init__(self, message: str, *, line: int | None = None, column: str | None = None) -> None:
        self.line = line
        self.column = column
        where = []
        if line is not None:
            where.append(f"line {line}")
        if column is not None:
            where.append(f"column '{column}'")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)
        self.reason = message


@dataclass
class SchemaDifference:
    missing: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)


class SchemaMismatchError(LoadError):
    """The file's columns are not the source's columns."""

    def __init__(self, difference: SchemaDifference) -> None:
        self.difference = difference
        parts = []
        if difference.missing:
            parts.append("missing columns: " + ", ".join(difference.missing))
        if difference.unexpected:
            parts.append("unexpected columns: " + ", ".join(difference.unexpected))
        super().__init__("header does not match the source's columns; " + "; ".join(parts), line=1)


class FetchError(TallyError):
    """The file could not be downloaded."""

    def __init__(
        self, message: str, *, transient: bool, retry_after_seconds: float | None = None
    ) -> None:
        self.transient = transient
        self.retry_after_seconds = retry_after_seconds
        super().__init__(message)


class RunFailedError(TallyError):
    """The derived resource's run failed."""


class ListenError(TallyError):
    """The address `tally serve` was told to listen on cannot be bound."""


class StorageError(TallyError):
    """Data platform is temporarily unavailable. Please try again later."""


class StorageProvisioningError(StorageError):
    """Storage provisioning failed upstream. Retry."""


RETRY_AFTER_SECONDS = 1


class BusyError(TallyError):
    """Data platform is temporarily unavailable. Please try again later."""

    # Not a StorageError: the database answers, this process has nothing free to ask it
    # with. The client is told when to come back (Retry-After), not why.

    def __init__(
        self, message: str | None = None, *, retry_after_seconds: int = RETRY_AFTER_SECONDS
    ) -> None:
        self.retry_after_seconds = retry_after_seconds
        super().__init__(message)


class TooManyPreviewsError(BusyError):
    """Too many previews of this workspace are running. Retry later."""


class InvalidNotificationError(InvalidRequestError):
    """The notification cannot be accepted."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


class InvalidBodyError(InvalidRequestError):
    """A body that is not JSON, or does not match its model; each problem names its field."""

    def __init__(self, problems: list[FieldProblem], message: str | None = None) -> None:
        self.problems = problems
        super().__init__(
            message
            or "; ".join(f"{p.field}: {p.message}" if p.field else p.message for p in problems)
        )


class InvalidUploadError(InvalidBodyError):
    """The body cannot be read as the content type it declares."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__([FieldProblem(field, message)], message)


class JsonRowsError(InvalidUploadError):
    """The body is not rows that can be converted; `field` says where, when known."""


class IncompleteBodyError(InvalidRequestError):
    """the client disconnected before the body ended"""


class UnsupportedMediaTypeError(InvalidRequestError):
    """Content-Type is not text/csv, multipart/form-data or application/json."""


class MethodNotAllowedError(InvalidRequestError):
    """Method Not Allowed"""

    def __init__(self, allowed: tuple[str, ...]) -> None:
        self.allowed = allowed  # the methods the path answers: the response's Allow
        super().__init__()


class UploadTooLargeError(InvalidRequestError):
    """The body (or the CSV converted from it) is larger than the file size limit."""
