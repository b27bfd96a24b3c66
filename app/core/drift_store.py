"""Where a model's drift is kept in Redis: its training profile and thresholds (documents) and its counts, a hash
per model, source (live requests or batch jobs) and window, for FIRE_DRIFT_WINDOW_SECONDS and for an hour, added
to with HINCRBY, so that every API process and worker adds to the same windows (app.core.monitoring counts and
reads them)."""

from collections.abc import Mapping, Sequence

import numpy as np
from redis import Redis

from app.core.blobs import BlobStore, DocumentUnreadable, brief
from app.core.config import Settings
from app.core.drift import DriftThresholds, Layout, TrainingProfile
from app.core.errors import FieldFault, Unreadable
from app.core.keys import Keys

HOUR = 3600
FINE_RETENTION_SECONDS = 2 * 24 * HOUR
# the latest time a drift range may name (9999-12-31T23:59:59Z, the last second of a four-digit year): a window's
# start, a whole number of seconds, is then an int64 (1e19 was not: OverflowError)
LATEST_TIME = 253_402_300_799
# KEYS[1]: a window; ARGV: when it expires, then field, increment, field, increment, ...
ADD_TO_WINDOW = """
for i = 2, #ARGV, 2 do
    redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('EXPIREAT', KEYS[1], ARGV[1])
"""
# KEYS[1] a marker, KEYS[2..n] windows; ARGV[1] the marker's time to live (s), ARGV[2..n] when each window expires, then
# field, increment, ...: the increments added to every window unless the marker was set before (set here). 1 if added.
ADD_ONCE = """
if not redis.call('SET', KEYS[1], 1, 'NX', 'EX', ARGV[1]) then return 0 end
for k = 2, #KEYS do
  for i = #KEYS + 1, #ARGV, 2 do
    redis.call('HINCRBY', KEYS[k], ARGV[i], ARGV[i + 1])
  end
  redis.call('EXPIREAT', KEYS[k], ARGV[k])
end
return 1
"""


class DriftStore:
    def __init__(self, settings: Settings, redis: Redis, blobs: BlobStore):
        self.settings = settings
        self.redis = redis
        self.blobs = blobs
        self.keys = Keys.from_settings(settings)
        self._add_to_window = redis.register_script(ADD_TO_WINDOW)
        self._add_once = redis.register_script(ADD_ONCE)

    def profile(self, model_id: str) -> TrainingProfile | None:
        return self.blobs.get_document(self.keys.model_profile(model_id), TrainingProfile)

    def put_profile(self, model_id: str, profile: TrainingProfile) -> None:
        self.blobs.put_document(self.keys.model_profile(model_id), profile)

    def thresholds(self, model_id: str) -> DriftThresholds:
        """The model's thresholds (the defaults where none were set); Unreadable where the stored ones cannot be
        read: only this model's drift and monitoring answer so, until they are set again."""
        try:
            stored = self.blobs.get_document(self.keys.model_monitoring(model_id), DriftThresholds)
        except DocumentUnreadable as error:
            raise Unreadable(
                f"The drift thresholds stored for model {model_id} cannot be read ({brief(error.cause)}).",
                [
                    FieldFault(
                        "model_id",
                        f"model {model_id}'s stored drift thresholds are unreadable",
                        f"set them again (PUT /v1/models/{model_id}/monitoring)",
                    )
                ],
            ) from error
        return stored or DriftThresholds()

    def set_thresholds(self, model_id: str, thresholds: DriftThresholds) -> None:
        self.blobs.put_document(self.keys.model_monitoring(model_id), thresholds)

    def granularities(self) -> tuple[int, int]:
        return self.settings.drift_window_seconds, HOUR

    def add(self, model_id: str, source: str, at: float, layout: Layout, counts: np.ndarray) -> None:
        """Add ``counts`` to the windows (fine and hourly) holding time ``at``: one script call per window, so that
        a flush is a few commands and replies, not one per count (with a HINCRBY each, a flush every second cost an
        API process about 10% of its single-row requests/s under 50 clients; bench/monitoring_overhead.py)."""
        fields = layout.field_names()
        increments = [item for index in np.flatnonzero(counts) for item in (fields[index], int(counts[index]))]
        pipe = self.redis.pipeline(transaction=False)
        for key, expires in self._windows(model_id, source, at):
            self._add_to_window(keys=[key], args=[expires, *increments], client=pipe)
        pipe.zadd(self.keys.drift_models, {model_id: at})
        pipe.execute()

    def add_once(
        self, model_id: str, source: str, at: float, counts: Mapping[str, int], once: str, once_ttl: int
    ) -> bool:
        """``add`` of counts by field name (``Layout.field_names``), unless the key ``once`` was set before: set in
        the same step (for ``once_ttl`` seconds), so that adding them again (a job run again) adds nothing. Whether
        this call added them."""
        windows = self._windows(model_id, source, at)
        keys = [once, *(key for key, _ in windows)]
        increments = [item for field, n in counts.items() if n for item in (field, int(n))]
        added = bool(self._add_once(keys=keys, args=[once_ttl, *(expires for _, expires in windows), *increments]))
        if added:
            self.redis.zadd(self.keys.drift_models, {model_id: at})
        return added

    def _windows(self, model_id: str, source: str, at: float) -> list[tuple[str, int]]:
        """The windows (fine and hourly) holding time ``at``: (key, when it expires)."""
        windows = []
        for seconds in self.granularities():
            start = int(at // seconds * seconds)
            retention = self.settings.drift_retention_days * 24 * HOUR if seconds == HOUR else FINE_RETENTION_SECONDS
            windows.append((self.keys.drift_window(model_id, source, seconds, start), start + seconds + retention))
        return windows

    def windows(
        self, model_id: str, layout: Layout, since: float, until: float, sources: Sequence[str], seconds: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """(window starts, counts (windows, layout.size)) of the windows of ``seconds`` that meet [since, until),
        summed over ``sources``."""
        starts = np.arange(int(since // seconds * seconds), until, seconds, dtype=np.int64)
        position = {name: k for k, name in enumerate(layout.field_names())}
        pipe = self.redis.pipeline(transaction=False)
        for start in starts.tolist():
            for source in sources:
                pipe.hgetall(self.keys.drift_window(model_id, source, seconds, start))
        found = pipe.execute()
        counts = np.zeros((len(starts), layout.size), dtype=np.int64)
        for k, window in enumerate(found):
            row = counts[k // len(sources)]
            for name, value in window.items():
                index = position.get(name.decode() if isinstance(name, bytes) else name)
                if index is not None:  # a field of another layout: an earlier profile version's (Layout.field_names)
                    row[index] += int(value)
        return starts, counts

    def recent_models(self, since: float, limit: int) -> list[str]:
        """The models whose counts were added since ``since``, the latest first."""
        found = self.redis.zrevrangebyscore(self.keys.drift_models, "+inf", since, start=0, num=limit)
        return [member.decode() if isinstance(member, bytes) else str(member) for member in found]

    def delete(self, model_id: str) -> None:
        self.blobs.delete(self.keys.model_profile(model_id))
        self.blobs.delete(self.keys.model_monitoring(model_id))
        self.blobs.delete_matching(self.keys.drift_windows(model_id))
        self.redis.zrem(self.keys.drift_models, model_id)
