"""Tenants: API keys map to tenants; every stored thing belongs to one, and another tenant never sees it.

Keys are kept as SHA-256 digests only and compared in constant time against every entry. Entries come from
``FIRE_API_KEYS`` and ``FIRE_API_KEYS_FILE``: ``TENANT=KEY``, ``TENANT=sha256:HEX`` (the digest of the key,
so that the plain key never sits in a file) or a bare ``KEY`` (a tenant of its own, named after its digest).
With no entries there is no authentication and one tenant, :data:`DEFAULT_TENANT`.

Operators' keys (``FIRE_METRICS_KEYS``, entries of the same form, ``NAME=KEY``) read every tenant's ``/metrics``
series and nothing else; a tenant's key reads its own series there. No key is both a tenant's and an operator's.

Data stored before tenants existed belongs to :data:`DEFAULT_TENANT`: give a key to the tenant named
``default`` to keep reaching it.
"""

import hashlib
import hmac
import re
from dataclasses import dataclass
from pathlib import Path

from app.core.config import Settings

DEFAULT_TENANT = "default"
TENANT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_DIGEST = re.compile(r"^sha256:([0-9a-fA-F]{64})$")


def key_digest(key: bytes) -> bytes:
    return hashlib.sha256(key).digest()


@dataclass(frozen=True)
class TenantKey:
    tenant: str
    digest: bytes


def parse_entry(entry: str) -> TenantKey:
    """One ``TENANT=KEY``, ``TENANT=sha256:HEX`` or bare ``KEY``; ValueError naming what is wrong."""
    tenant, separator, secret = entry.strip().partition("=")
    if not separator:
        tenant, secret = "", tenant
    if not secret or not secret.isascii() or not secret.isprintable():
        raise ValueError("an API key must be printable ASCII and not empty")
    digest = _DIGEST.match(secret)
    value = bytes.fromhex(digest.group(1)) if digest else key_digest(secret.encode())
    tenant = tenant or "key-" + value.hex()[:12]
    if not TENANT_NAME.match(tenant):
        raise ValueError(f"tenant name {tenant!r} must match {TENANT_NAME.pattern}")
    return TenantKey(tenant, value)


class TenantKeys:
    def __init__(self, keys: list[TenantKey], operators: list[TenantKey] | None = None):
        self.keys = keys
        self.operators = operators or []
        if {key.digest for key in self.keys} & {key.digest for key in self.operators}:
            raise ValueError(
                "a key is both a tenant's (FIRE_API_KEYS) and an operator's (FIRE_METRICS_KEYS): give each its own"
            )

    @classmethod
    def from_settings(cls, settings: Settings) -> "TenantKeys":
        entries = list(settings.api_keys)
        if settings.api_keys_file is not None:
            lines = Path(settings.api_keys_file).read_text().splitlines()
            entries += [line for line in (raw.split("#", 1)[0].strip() for raw in lines) if line]
        return cls(
            _parsed(entries, "API key entry", "FIRE_API_KEYS, then FIRE_API_KEYS_FILE"),
            _parsed(settings.metrics_keys, "metrics key entry", "FIRE_METRICS_KEYS"),
        )

    @property
    def required(self) -> bool:
        """Whether the tenants' routes need a key (else every request is :data:`DEFAULT_TENANT`'s)."""
        return bool(self.keys)

    @property
    def metrics_required(self) -> bool:
        """Whether ``/metrics`` needs a key: any key configured, a tenant's or an operator's."""
        return bool(self.keys or self.operators)

    def tenant_of(self, presented: bytes) -> str | None:
        """The tenant of a presented key, or None (an operator's key is no tenant's)."""
        return _holder(key_digest(presented), self.keys)

    def operator_of(self, presented: bytes) -> str | None:
        """The operator's name of a presented key (FIRE_METRICS_KEYS), or None."""
        return _holder(key_digest(presented), self.operators)


def _parsed(entries: list[str], what: str, where: str) -> list[TenantKey]:
    keys = []
    for number, entry in enumerate(entries, 1):
        try:
            keys.append(parse_entry(entry))
        except ValueError as error:
            raise ValueError(f"{what} {number} ({where}): {error}") from None
    return keys


def _holder(digest: bytes, keys: list[TenantKey]) -> str | None:
    """The name of the entry whose digest this is. Every entry is compared, so the time taken does not depend on
    which entry (if any) matches."""
    found = None
    for key in keys:
        if hmac.compare_digest(digest, key.digest) and found is None:
            found = key.tenant
    return found
