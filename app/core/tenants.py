"""Tenants: API keys map to tenants; every stored thing belongs to one, and another tenant never sees it.

Keys are kept as SHA-256 digests only and compared in constant time against every entry. Entries come from
``FIRE_API_KEYS`` and ``FIRE_API_KEYS_FILE``: ``TENANT=KEY``, ``TENANT=sha256:HEX`` (the digest of the key,
so that the plain key never sits in a file) or a bare ``KEY`` (a tenant of its own, named after its digest).
With no entries there is no authentication and one tenant, :data:`DEFAULT_TENANT`.

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
    def __init__(self, keys: list[TenantKey]):
        self.keys = keys

    @classmethod
    def from_settings(cls, settings: Settings) -> "TenantKeys":
        entries = list(settings.api_keys)
        if settings.api_keys_file is not None:
            lines = Path(settings.api_keys_file).read_text().splitlines()
            entries += [line for line in (raw.split("#", 1)[0].strip() for raw in lines) if line]
        keys = []
        for number, entry in enumerate(entries, 1):
            try:
                keys.append(parse_entry(entry))
            except ValueError as error:
                raise ValueError(f"API key entry {number} (FIRE_API_KEYS, then FIRE_API_KEYS_FILE): {error}") from None
        return cls(keys)

    @property
    def required(self) -> bool:
        return bool(self.keys)

    def tenant_of(self, presented: bytes) -> str | None:
        """The tenant of a presented key, or None. Every entry is compared, so the time taken does not depend
        on which entry (if any) matches."""
        digest = key_digest(presented)
        found = None
        for key in self.keys:
            if hmac.compare_digest(digest, key.digest) and found is None:
                found = key.tenant
        return found
