"""Domain errors of the service core: what went wrong and with which domain thing, in no transport's words.

Each error carries a one-sentence ``detail`` and ``faults``, one :class:`FieldFault` per thing at fault.
A fault's ``field`` names the domain thing (``job_id``, ``validation.dataset_id``, ``columns.Sex``,
``idempotency_key``, ``file``), never where a transport carried it; the HTTP edge (``app/api/problems.py``)
adds that, and the status.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class FieldFault:
    field: str
    message: str
    fix: str


class DomainError(Exception):
    """``retry_after`` (seconds) where trying the same thing again later can succeed."""

    def __init__(
        self, detail: str, faults: list[FieldFault] | tuple[FieldFault, ...] = (), retry_after: float | None = None
    ):
        super().__init__(detail)
        self.detail = detail
        self.faults = list(faults)
        self.retry_after = retry_after


class Invalid(DomainError):
    """The input breaks a rule; the faults name every part that does."""


class IdempotencyKeyReused(Invalid):
    """An idempotency key sent again with a different request."""

    def __init__(self):
        super().__init__(
            "This idempotency key was used for a different request.",
            [FieldFault("idempotency_key", "reused with another request", "use a new key for a new request")],
        )


class NotFound(DomainError):
    """No ``kind`` with this id; ``field`` names where the id was given (default ``{kind}_id``)."""

    def __init__(self, kind: str, identifier: str | int, field: str | None = None, fix: str | None = None):
        super().__init__(
            f"No {kind} with id '{identifier}'.",
            [
                FieldFault(
                    field or f"{kind}_id",
                    f"unknown {kind} '{identifier}'",
                    fix or f"list the {kind}s and use one of their ids",
                )
            ],
        )
        self.kind = kind
        self.identifier = identifier


class Conflict(DomainError):
    """The thing exists but is not in a state that allows this (``retry_after`` when waiting helps)."""


class Unreadable(Conflict):
    """A stored document that cannot be read (damaged in Redis, or written before a check its reader makes): only
    the thing it belongs to is answered so, its fault saying what replaces it; ``tenant``: the owner where the
    store knows it (another tenant is answered as though the thing did not exist)."""

    def __init__(self, detail: str, faults: list[FieldFault] | tuple[FieldFault, ...] = (), tenant: str | None = None):
        super().__init__(detail, faults)
        self.tenant = tenant


class Expired(DomainError):
    """The thing existed but its stored data has expired."""


class TooLarge(DomainError):
    """The input exceeds a configured size limit."""


class Unsupported(DomainError):
    """The input is in a format the service never reads (pickles included)."""


class TooMany(DomainError):
    """A tenant has as many jobs queued or running as it may."""


class Unavailable(DomainError):
    """A service the core depends on (Redis) cannot be reached."""
