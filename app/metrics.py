"""Prometheus figures: HTTP traffic, jobs by status, matrix-cache hits (counted in Redis by the workers)."""
import time

from fastapi import FastAPI
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

CACHE_HITS_FIELD, CACHE_MISSES_FIELD = "cache_hits", "cache_misses"


def stats_key(key_prefix: str) -> str:
    return f"{key_prefix}stats"


class ServiceCollector:
    """Read at scrape time from Redis, so the figures cover every API and worker process."""

    def __init__(self, services):
        self.services = services

    def collect(self):
        jobs = GaugeMetricFamily("fire_jobs", "Recent jobs (last 1000) by status", labels=["status"])
        counts: dict[str, int] = {}
        records = self.services.records
        for record in records.get_many(records.recent_ids(1000)):
            if record is not None:
                counts[record["status"]] = counts.get(record["status"], 0) + 1
        for status in ("queued", "running", "succeeded", "failed", "canceled"):
            jobs.add_metric([status], counts.get(status, 0))
        yield jobs
        stats = self.services.redis.hgetall(stats_key(self.services.settings.key_prefix))
        cache = CounterMetricFamily("fire_matrix_cache", "Leaf-matrix cache lookups", labels=["result"])
        cache.add_metric(["hit"], int(stats.get(CACHE_HITS_FIELD.encode(), 0)))
        cache.add_metric(["miss"], int(stats.get(CACHE_MISSES_FIELD.encode(), 0)))
        yield cache


def install_metrics(app: FastAPI, services) -> CollectorRegistry:
    registry = CollectorRegistry()
    requests = Counter("fire_http_requests", "HTTP requests", ["method", "route", "status"], registry=registry)
    latency = Histogram("fire_http_request_seconds", "HTTP request latency", ["method", "route"],
                        registry=registry, buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10))
    registry.register(ServiceCollector(services))

    app.add_middleware(HttpMetricsMiddleware, requests=requests, latency=latency)
    return registry


class HttpMetricsMiddleware:
    """Counts and times requests by route template. Plain ASGI: no body buffering on the scoring path."""

    def __init__(self, app, requests: Counter, latency: Histogram):
        self.app = app
        self.requests = requests
        self.latency = latency

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = [500]

        async def send_with_status(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_with_status)
        finally:
            template = getattr(scope.get("route"), "path", "unmatched")
            self.latency.labels(scope["method"], template).observe(time.perf_counter() - started)
            self.requests.labels(scope["method"], template, str(status[0])).inc()
