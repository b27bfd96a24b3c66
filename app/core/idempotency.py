"""Idempotency keys: a client that retries a request with the same ``Idempotency-Key`` gets the thing the first
request created, never a second one; the key with another request is refused.

The key is claimed with the id of the thing about to be created, before anything is written; if creating fails
after something was stored (a job recorded but not queued), the claim keeps pointing at it, so a retry finds it
instead of creating a duplicate. Keys belong to a tenant.
"""

import json
from collections.abc import Callable
from typing import TypeVar

from redis import Redis

from app.core.blobs import canonical_hash
from app.core.config import Settings
from app.core.errors import Conflict, FieldFault, IdempotencyKeyReused
from app.core.keys import Keys

CLAIM_SECONDS = 60  # a submission that dies before storing anything frees its key after this
Created = TypeVar("Created")


class IdempotencyKeys:
    def __init__(self, settings: Settings, redis: Redis):
        self.settings = settings
        self.redis = redis
        self.keys = Keys.from_settings(settings)

    def once(
        self,
        *,
        tenant: str,
        kind: str,
        key: str | None,
        request: dict,
        new_id: str,
        create: Callable[[str], Created],
        find: Callable[[str], Created | None],
    ) -> Created:
        """``create(new_id)``, or what the first request with this key created (``find(its id)``)."""
        if key is None:
            return create(new_id)
        fingerprint = canonical_hash(request)
        claim_key = self.keys.idempotency(tenant, kind, canonical_hash(key))
        claim = json.dumps({"fingerprint": fingerprint, "id": new_id})
        if not self.redis.set(claim_key, claim, nx=True, ex=CLAIM_SECONDS):
            stored = json.loads(self.redis.get(claim_key) or b'{"fingerprint": null, "id": null}')
            if stored["fingerprint"] != fingerprint:
                raise IdempotencyKeyReused()
            existing = find(stored["id"]) if stored["id"] else None
            if existing is None:
                raise Conflict(
                    "The first request with this idempotency key is still being processed.",
                    [FieldFault("idempotency_key", "in progress", "retry in a moment")],
                    retry_after=1,
                )
            return existing
        try:
            created = create(new_id)
        except Exception:
            self._settle_failed(claim_key, claim, find, new_id)
            raise
        self.redis.set(claim_key, claim, ex=self.settings.result_ttl_seconds)
        return created

    def _settle_failed(self, claim_key: str, claim: str, find: Callable, new_id: str) -> None:
        """After a failed create: keep the claim if something was stored, free the key if nothing was."""
        try:
            if find(new_id) is None:
                self.redis.delete(claim_key)  # a retry may try afresh
            else:
                self.redis.set(claim_key, claim, ex=self.settings.result_ttl_seconds)
        except Exception:
            pass  # cannot tell (Redis unreachable): the claim stays until it expires, the first error is raised
