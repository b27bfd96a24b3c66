"""Prometheus figures: HTTP traffic, jobs by status, matrix-cache hits (counted in Redis by the workers), whether
Redis answers. Label values come from fixed sets (methods, route templates, statuses), so no request can grow
the number of series.

Who reads what (:meth:`Metrics.exposition`): an operator (FIRE_METRICS_KEYS), or anyone where no key is configured,
reads every series; a tenant's key reads ``fire_redis_up`` (whether the service's Redis answers: the same for
everyone, it tells nothing of any tenant), ``fire_jobs`` of its own jobs and its own models' drift. HTTP traffic and
matrix-cache lookups count every tenant's requests and jobs together: they are the operator's only."""

import logging
import time
from collections import Counter as Tally
from collections.abc import Sequence
from typing import get_args

from fastapi import FastAPI
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from app.api.drift_metrics import DriftCollector
from app.core.blobs import UNREADABLE
from app.core.connections import REDIS_FAILURES
from app.core.container import Core
from app.core.errors import Unavailable
from app.core.job_documents import JobRecord, Status

log = logging.getLogger(__name__)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
RECENT_JOBS = 1000  # fire_jobs counts this many of the newest jobs


class ServiceCollector:
    """Read at scrape time from Redis, so the figures cover every API and worker process."""

    def __init__(self, core: Core):
        self.core = core

    def collect(self, tenant: str | None = None):
        """Every tenant's figures (``tenant`` None), or what ``tenant`` may read (the module's docstring)."""
        up = GaugeMetricFamily("fire_redis_up", "Whether the durable Redis answered this scrape")
        try:
            self.core.redis_health.check()
            records = self.core.records
            recent: Sequence[JobRecord | None]
            if tenant is None:
                recent = records.get_many(records.recent_ids(RECENT_JOBS))
            else:
                recent = records.recent(tenant, limit=RECENT_JOBS, scanned=RECENT_JOBS)
            counts = Tally(record.status for record in recent if record is not None)
            cache_counts = self.core.leaf_cache.counts() if tenant is None else {}
        except (*REDIS_FAILURES, Unavailable) as error:
            log.warning("metrics without Redis figures: %s", error)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        jobs = GaugeMetricFamily(
            "fire_jobs",
            f"Recent jobs by status: the last {RECENT_JOBS} of the service (an operator) or of the key's tenant",
            labels=["status"],
        )
        for status in get_args(Status):
            jobs.add_metric([status], counts[status])
        yield jobs
        if tenant is None:
            cache = CounterMetricFamily("fire_matrix_cache", "Leaf-matrix cache lookups", labels=["result"])
            for result, count in cache_counts.items():
                cache.add_metric([result], count)
            yield cache
            unreadable = CounterMetricFamily(
                "fire_unreadable_documents",
                "Reads of stored documents that could not be read, by the document's model, since this process "
                "started: each left out of what read it (a listing, the drift figures) or a 409 on its own route",
                labels=["document"],
            )
            for document, count in sorted(UNREADABLE.items()):
                unreadable.add_metric([document], count)
            yield unreadable


class Metrics:
    """The registry every series is in (an operator's scrape) and the collectors a tenant's scrape reads from."""

    def __init__(self, registry: CollectorRegistry, service: ServiceCollector, drift: DriftCollector):
        self.registry = registry
        self.service = service
        self.drift = drift

    def exposition(self, tenant: str | None) -> bytes:
        """The text exposition of every series (``tenant`` None), or of those ``tenant`` may read."""
        if tenant is None:
            return generate_latest(self.registry)
        return generate_latest(_TenantScrape(self, tenant))


class _TenantScrape(Collector):
    """A tenant's view, a collector as generate_latest reads one (its ``collect``)."""

    def __init__(self, metrics: Metrics, tenant: str):
        self.metrics = metrics
        self.tenant = tenant

    def collect(self):
        yield from self.metrics.service.collect(self.tenant)
        yield from self.metrics.drift.collect(self.tenant)


def install_metrics(app: FastAPI, core: Core) -> Metrics:
    registry = CollectorRegistry()
    requests = Counter("fire_http_requests", "HTTP requests", ["method", "route", "status"], registry=registry)
    latency = Histogram(
        "fire_http_request_seconds",
        "HTTP request latency",
        ["method", "route"],
        registry=registry,
        buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10),
    )
    service, drift = ServiceCollector(core), DriftCollector(core)
    registry.register(service)
    registry.register(drift)

    app.add_middleware(HttpMetricsMiddleware, requests=requests, latency=latency)
    return Metrics(registry, service, drift)


class HttpMetricsMiddleware:
    """Counts and times requests by route template. Plain ASGI: no body buffering on the scoring path. Each
    (method, route, status)'s series is looked up once and kept: prometheus_client's ``labels`` takes a lock and
    builds its key on every call."""

    def __init__(self, app, requests: Counter, latency: Histogram):
        self.app = app
        self.requests = requests
        self.latency = latency
        self._series: dict[tuple[str, str, int], tuple[Histogram, Counter]] = {}

    def _series_of(self, method: str, template: str, status: int) -> tuple[Histogram, Counter]:
        key = (method, template, status)
        series = self._series.get(key)
        if series is None:  # fixed sets of methods, templates and statuses: this dict stays small
            series = self.latency.labels(method, template), self.requests.labels(method, template, str(status))
            self._series[key] = series
        return series

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_with_status(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_with_status)
        finally:
            template = getattr(scope.get("route"), "path", "unmatched")
            method = scope["method"] if scope["method"] in METHODS else "OTHER"
            latency, requests = self._series_of(method, template, status)
            latency.observe(time.perf_counter() - started)
            requests.inc()
