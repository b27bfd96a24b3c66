"""Prometheus figures: HTTP traffic, jobs by status, matrix-cache hits (counted in Redis by the workers), whether
Redis answers. Label values come from fixed sets (methods, route templates, statuses), so no request can grow
the number of series."""

import logging
import time
from collections import Counter as Tally
from typing import get_args

from fastapi import FastAPI
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from app.api.drift_metrics import DriftCollector
from app.core.connections import REDIS_FAILURES
from app.core.container import Core
from app.core.errors import Unavailable
from app.core.job_documents import Status

log = logging.getLogger(__name__)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class ServiceCollector:
    """Read at scrape time from Redis, so the figures cover every API and worker process."""

    def __init__(self, core: Core):
        self.core = core

    def collect(self):
        up = GaugeMetricFamily("fire_redis_up", "Whether the durable Redis answered this scrape")
        try:
            self.core.redis_health.check()
            records = self.core.records
            counts = Tally(record.status for record in records.get_many(records.recent_ids(1000)) if record is not None)
            cache_counts = self.core.leaf_cache.counts()
        except (*REDIS_FAILURES, Unavailable) as error:
            log.warning("metrics without Redis figures: %s", error)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        jobs = GaugeMetricFamily("fire_jobs", "Recent jobs (last 1000) by status", labels=["status"])
        for status in get_args(Status):
            jobs.add_metric([status], counts[status])
        yield jobs
        cache = CounterMetricFamily("fire_matrix_cache", "Leaf-matrix cache lookups", labels=["result"])
        for result, count in cache_counts.items():
            cache.add_metric([result], count)
        yield cache


def install_metrics(app: FastAPI, core: Core) -> CollectorRegistry:
    registry = CollectorRegistry()
    requests = Counter("fire_http_requests", "HTTP requests", ["method", "route", "status"], registry=registry)
    latency = Histogram(
        "fire_http_request_seconds",
        "HTTP request latency",
        ["method", "route"],
        registry=registry,
        buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10),
    )
    registry.register(ServiceCollector(core))
    registry.register(DriftCollector(core))

    app.add_middleware(HttpMetricsMiddleware, requests=requests, latency=latency)
    return registry


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
