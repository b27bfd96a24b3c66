"""Served models that watch their own rules: each scored row's fired rules and column bins counted per model
version, in windows kept in Redis, and read back as drift (the statistics: app.core.drift).

- :class:`FiringMonitor` counts in one process. A scoring request only appends its encoded rows to a queue
  (``record``); a thread bins them every DRAIN_SECONDS and adds the counts to Redis every FIRE_DRIFT_FLUSH_SECONDS
  and at shutdown (``close``), so a count survives a restart of the API. While Redis is down the counts wait in
  memory. A batch counts only the rows it delivered: each chunk job stores its rows' counts beside its scored rows
  (``counts``), and the batch adds them all to its model's windows once it succeeded, once (``add_delivered``).
- app.core.drift_store keeps them, beside each model's training profile and thresholds.
- :class:`ModelMonitoring` reads a model's drift over a time range: figures per rule and column, a time series,
  and the flags of its thresholds.
"""

import logging
import math
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from pydantic import Field

from app.core.blobs import Document
from app.core.config import Settings
from app.core.connections import REDIS_FAILURES
from app.core.drift import (
    SOURCES,
    Binning,
    DriftFigures,
    DriftSummary,
    DriftThresholds,
    Layout,
    Source,
    TrainingProfile,
    drift_figures,
    psi,
)
from app.core.drift_store import HOUR, DriftStore
from app.core.errors import FieldFault, Invalid, NotFound, Unreadable
from app.core.model_documents import ModelInfo
from app.core.model_scoring import ScoringModel
from app.core.models import ModelStore

log = logging.getLogger(__name__)
DRAIN_SECONDS = 0.5
SETTINGS_RECHECK_SECONDS = 10.0
MAX_POINTS = 120  # points of a drift time series (windows are merged into as many)
METRICS_MODELS_SCANNED = 1000  # a tenant's /metrics scrape looks for its models among this many last scored


@dataclass
class _Watched:
    """A model's binning (None: no profile, or monitoring off) and when its settings were read."""

    binning: Binning | None
    checked_at: float


class FiringMonitor:
    """This process's drift counts of live requests, and the adding of a succeeded batch's (see the module
    docstring). ``profile_of(model_id)``: the model's training profile (built where it was never stored), None where
    it cannot be had."""

    def __init__(self, settings: Settings, store: DriftStore, profile_of: Callable[[str], TrainingProfile | None]):
        self.settings = settings
        self.store = store
        self.profile_of = profile_of
        self._queue: deque = deque()  # (scoring model, rows or None, (column, rows) or None, time)
        self._pending: dict[tuple[str, int], tuple[Layout, np.ndarray]] = {}  # (model, fine window): counts
        self._watched: dict[str, _Watched] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def record(self, scoring: ScoringModel, X: np.ndarray) -> None:
        """Count encoded rows ``X`` scored by ``scoring`` (the request path: an append, nothing more)."""
        if self.settings.monitoring:
            self._queue.append((scoring, X, None, time.time()))

    def counts(self, scoring: ScoringModel, X: np.ndarray) -> dict[str, int] | None:
        """The counts of encoded rows ``X`` scored by ``scoring``, by field name (those not 0), added nowhere: None
        where the model's rows are not counted (monitoring off, no profile). A batch chunk stores them beside its
        scored rows; the batch adds its chunks' counts once it succeeded (``add_delivered``), so that rows a batch
        did not deliver (failed, canceled) are never counted."""
        binning = self._binning(scoring) if self.settings.monitoring else None
        if binning is None:
            return None
        counts = binning.count(X)
        fields = binning.layout.field_names()
        return {fields[index]: int(counts[index]) for index in np.flatnonzero(counts)}

    def add_delivered(self, model_id: str, chunks: Iterable[Mapping[str, int]], once: str) -> bool:
        """Add the counts of a succeeded batch's chunks (``counts``) to the model's batch windows of now, once: the
        key ``once`` is set in the same step, so a batch run again after its worker died adds nothing more. Whether
        this call added them."""
        total: Counter[str] = Counter()
        for counts in chunks:
            total.update(counts)
        return self.store.add_once(model_id, "batch", time.time(), total, once, self.settings.result_ttl_seconds)

    def record_unseen(self, scoring: ScoringModel, column: str, n_rows: int) -> None:
        """Count ``n_rows`` rows refused for a level of ``column`` the training table never had."""
        if self.settings.monitoring:
            self._queue.append((scoring, None, (column, n_rows), time.time()))

    def start(self) -> None:
        if self.settings.monitoring and self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True, name="fire-drift")
            self._thread.start()

    def close(self) -> None:
        """Stop the thread and add what is counted to Redis (an API process's shutdown)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self.flush()

    def _run(self) -> None:
        last_flush = time.monotonic()
        while not self._stop.wait(DRAIN_SECONDS):
            try:
                self.drain()
                if time.monotonic() - last_flush >= self.settings.drift_flush_seconds:
                    last_flush = time.monotonic()
                    self.flush()
            except Exception:  # a bad batch must not end the counting of every later one
                log.exception("drift counting failed")

    def drain(self) -> None:
        """Bin the queued rows into the pending counts, per model and fine window."""
        groups: dict[tuple[str, int], tuple[ScoringModel, list, list]] = {}
        seconds = self.settings.drift_window_seconds
        while True:
            try:
                scoring, X, unseen, at = self._queue.popleft()
            except IndexError:  # empty (another thread, a flush, may drain it too)
                break
            key = (scoring.id, int(at // seconds * seconds))
            group = groups.setdefault(key, (scoring, [], []))
            (group[1] if X is not None else group[2]).append(X if X is not None else unseen)
        for key, (scoring, rows, refused) in groups.items():
            binning = self._binning(scoring)
            if binning is None:
                continue
            counts = binning.count(np.concatenate(rows)) if rows else np.zeros(binning.layout.size, np.int64)
            for column, n_rows in refused:
                counts += binning.unseen(column, n_rows)
            self._add_pending(key, binning.layout, counts)

    def flush(self) -> None:
        """Drain, then add the pending counts to Redis; what Redis refuses waits for the next flush."""
        self.drain()
        with self._lock:
            pending, self._pending = self._pending, {}
        failed = {}
        for (model_id, start), (layout, counts) in pending.items():
            try:
                self.store.add(model_id, "live", start, layout, counts)
            except REDIS_FAILURES as error:
                log.warning("drift counts of model %s kept for later: %s", model_id, error)
                failed[(model_id, start)] = (layout, counts)
        for key, (layout, counts) in failed.items():
            self._add_pending(key, layout, counts)

    def _add_pending(self, key: tuple[str, int], layout: Layout, counts: np.ndarray) -> None:
        with self._lock:
            if key in self._pending:
                self._pending[key][1][:] += counts
            else:
                self._pending[key] = (layout, counts)

    def _binning(self, scoring: ScoringModel) -> Binning | None:
        """The model's binning, its settings reread every SETTINGS_RECHECK_SECONDS (None: not counted)."""
        now = time.monotonic()
        watched = self._watched.get(scoring.id)
        if watched is not None and now - watched.checked_at < SETTINGS_RECHECK_SECONDS:
            return watched.binning
        try:
            binning = watched.binning if watched is not None and watched.binning is not None else None
            if binning is None:
                profile = self.profile_of(scoring.id)
                binning = None if profile is None else Binning(scoring.ensemble, scoring.encoding, profile)
            if binning is not None and not self.store.thresholds(scoring.id).enabled:
                binning = None
        except REDIS_FAILURES as error:
            log.warning("drift settings of model %s unread: %s", scoring.id, error)
            return watched.binning if watched is not None else None
        except Unreadable as error:  # whether it is to be counted is unknown: it is not, until they read again
            log.warning("model %s not counted: %s", scoring.id, error.detail)
            binning = None
        self._watched[scoring.id] = _Watched(binning, now)
        return binning


# ---- reading ------------------------------------------------------------------------------------------------


class DriftSeries(Document):
    starts: list[float] = Field(description="each point's start (Unix seconds); it covers resolution_seconds")
    rows: list[int]
    rule_ratios: list[list[float | None]] = Field(
        description="per rule (the order of rules), its live/training firing-rate ratio at each point"
    )
    column_psi: list[list[float | None]] = Field(description="per column (the order of columns), its PSI at each point")


class DriftReport(DriftFigures):
    model_id: str
    tenant: str
    name: str
    version: int
    since: float
    until: float
    sources: list[Source]
    resolution_seconds: int
    thresholds: DriftThresholds
    drifted_rules: list[int]
    drifted_columns: list[str]
    series: DriftSeries


class ModelMonitoring:
    """A model's drift and monitoring settings, for its tenant."""

    def __init__(self, settings: Settings, models: ModelStore, store: DriftStore):
        self.settings = settings
        self.models = models
        self.store = store

    def thresholds(self, model_id: str, *, tenant: str) -> DriftThresholds:
        self.models.get(model_id, tenant=tenant)
        return self.store.thresholds(model_id)

    def set_thresholds(self, model_id: str, thresholds: DriftThresholds, *, tenant: str) -> DriftThresholds:
        self.models.get(model_id, tenant=tenant)
        self.store.set_thresholds(model_id, thresholds)
        return thresholds

    def report(
        self,
        model_id: str,
        *,
        tenant: str,
        since: float | None = None,
        until: float | None = None,
        source: Source | None = None,
    ) -> DriftReport:
        """Drift over [since, until) (default: the last FIRE_DRIFT_SUMMARY_SECONDS), of live requests, batch jobs
        or both (``source`` None). Windows of FIRE_DRIFT_WINDOW_SECONDS up to six hours, hourly ones beyond."""
        return self._report(self.models.get(model_id, tenant=tenant), since, until, source)

    def _report(
        self, model: ModelInfo, since: float | None = None, until: float | None = None, source: Source | None = None
    ) -> DriftReport:
        model_id = model.id
        until = time.time() if until is None else until
        since = until - self.settings.drift_summary_seconds if since is None else since
        if not since < until:
            raise Invalid(
                "The drift range is empty.",
                [
                    FieldFault(
                        "since", f"since {since} is not before until {until}", "give since < until (Unix seconds)"
                    )
                ],
            )
        profile = self.models.profile(model_id)
        if profile is None:
            raise NotFound("training profile of model", model_id)
        fine, _ = self.store.granularities()
        seconds = fine if until - since <= 6 * HOUR else HOUR
        if until - since > (self.settings.drift_retention_days * 24 + 1) * HOUR:
            raise Invalid(
                "The drift range is longer than the counts are kept.",
                [FieldFault("since", f"{until - since:.0f} s", "ask for at most FIRE_DRIFT_RETENTION_DAYS days")],
            )
        sources = list(SOURCES) if source is None else [source]
        layout = Layout(profile)
        starts, counts = self.store.windows(model_id, layout, since, until, sources, seconds)
        thresholds = self.store.thresholds(model_id)
        figures = drift_figures(profile, counts.sum(axis=0), thresholds)
        return DriftReport(
            **dict(figures),
            model_id=model.id,
            tenant=model.tenant,
            name=model.name,
            version=model.version,
            since=since,
            until=until,
            sources=sources,
            resolution_seconds=seconds * _merge_factor(len(starts)),
            thresholds=thresholds,
            drifted_rules=[rule.rule for rule in figures.rules if rule.drifted],
            drifted_columns=[column.column for column in figures.columns if column.drifted],
            series=_series(profile, layout, starts, counts),
        )

    def recent_reports(self, tenant: str | None = None) -> list[DriftReport]:
        """The drift of the models last scored within FIRE_DRIFT_METRICS_SECONDS (at most FIRE_DRIFT_METRICS_MODELS,
        the latest first) over that time: what /metrics exposes. ``tenant``: its own models only, looked for among
        the last METRICS_MODELS_SCANNED models scored."""
        until = time.time()
        since = until - self.settings.drift_metrics_seconds
        limit = self.settings.drift_metrics_models
        reports: list[DriftReport] = []
        for model_id in self.store.recent_models(since, limit if tenant is None else METRICS_MODELS_SCANNED):
            if len(reports) == limit:
                break
            try:
                model = self.models.find(model_id)
                if model is None or tenant not in (None, model.tenant):
                    continue
                reports.append(self._report(model, since, until))
            except NotFound:  # no profile
                continue
            except Unreadable as error:  # left out, this model alone (counted: blobs.UNREADABLE)
                log.warning("model %s left out of the drift metrics: %s", model_id, error.detail)
                continue
        return reports

    def model(self, model_id: str, *, tenant: str) -> ModelInfo:
        """The model (ModelStore.get) with the drift flags of the last FIRE_DRIFT_SUMMARY_SECONDS (none where it
        has no training profile, or its stored thresholds cannot be read)."""
        model = self.models.get(model_id, tenant=tenant)
        try:
            report = self._report(model)
        except NotFound:
            return model
        except Unreadable as error:  # the model is served; its /drift and /monitoring answer the fault and its fix
            log.warning("model %s served without its drift flags: %s", model_id, error.detail)
            return model
        model.drift = DriftSummary(
            since=report.since,
            until=report.until,
            rows=report.rows,
            thresholds=report.thresholds,
            drifted_rules=report.drifted_rules,
            drifted_columns=report.drifted_columns,
        )
        return model


def _merge_factor(n_windows: int) -> int:
    return max(1, math.ceil(n_windows / MAX_POINTS))


def _series(profile: TrainingProfile, layout: Layout, starts: np.ndarray, counts: np.ndarray) -> DriftSeries:
    """Windows merged into at most MAX_POINTS points: rows, each rule's firing ratio and each column's PSI."""
    factor = _merge_factor(len(starts))
    n_points = math.ceil(len(starts) / factor)
    padded = np.zeros((n_points * factor, layout.size), dtype=np.int64)
    padded[: len(counts)] = counts
    merged = padded.reshape(n_points, factor, layout.size).sum(axis=1)
    rows = merged[:, 0]
    training_rates = np.asarray(profile.rule_rows, dtype=np.float64) / max(profile.n_rows, 1)
    rule_ratios = []
    for i, rate in enumerate(training_rates):
        fired = merged[:, layout.rules_at + i]
        rule_ratios.append([float(f / n / rate) if n and rate else None for f, n in zip(fired, rows)])
    column_psi = []
    for j, column in enumerate(profile.columns):
        training = np.asarray(column.rows, dtype=np.float64)
        shares = training / max(training.sum(), 1)
        live = merged[:, layout.bins_at[j] : layout.bins_at[j + 1]]
        column_psi.append([psi(shares, row / n) if n else None for row, n in zip(live, rows)])
    return DriftSeries(
        starts=starts[::factor].astype(float).tolist(),
        rows=rows.tolist(),
        rule_ratios=rule_ratios,
        column_psi=column_psi,
    )
