"""End-to-end figures of the FIRE service on a real Redis, a real worker process and a real uvicorn server.

Reports, as a markdown table:
- a small job (1,000 rows, 100 trees of depth 3): end-to-end latency split into queue wait, matrix build
  and path, with a cold and a warm leaf-matrix cache;
- the cache speed-up of the matrix build on a larger case (all 16,599 elevators rows, 250 trees of depth 5);
- scoring: single rows at a paced 200 requests/s from one client, and 10,000-row batches (p50/p99).

Usage: python bench/service.py [--redis redis://127.0.0.1:6379/0] [--repeats 5] [--seconds 10]
Writes only under a fresh key prefix and queue name, and removes them at the end.
"""

import argparse
import gzip
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
from redis import Redis

REPO_ROOT = Path(__file__).resolve().parents[1]
ELEVATORS = REPO_ROOT.parent / "shared" / "datasets" / "elevators.csv.gz"
ABALONE = (
    REPO_ROOT / "tests" / "data" / "abalone.csv.gz"
)  # the table bench/load.py, scoring_load.py and cold_start.py use


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def upload_abalone(http: httpx.Client) -> dict:
    """ABALONE uploaded as a dataset (target ``rings``): its document."""
    return (
        http.post(
            "/v1/datasets?target=rings", content=ABALONE.read_bytes(), headers={"Content-Type": "application/gzip"}
        )
        .raise_for_status()
        .json()
    )


def percentile(values, q) -> float:
    return float(np.percentile(np.asarray(values), q))


class Service:
    """`fire-rules serve` (API only) and worker processes on the given Redis, under a fresh key prefix and queue
    that `close` removes."""

    def __init__(self, redis_url: str, api_processes: int = 1, workers: int = 1, env: dict | None = None):
        token = uuid.uuid4().hex[:10]
        self.prefix, self.queue = f"fire-bench-{token}:", f"fire-bench-{token}"
        self.redis = Redis.from_url(redis_url)
        self.env = {
            **os.environ,
            "PYTHONPATH": str(REPO_ROOT),
            "FIRE_REDIS_URL": redis_url,
            "FIRE_KEY_PREFIX": self.prefix,
            "FIRE_QUEUE_NAME": self.queue,
            "FIRE_API_WORKERS": str(api_processes),
            **(env or {}),
        }
        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        self.processes = [
            subprocess.Popen(
                [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--log-level", "warning"],
                env=self.env,
                cwd=REPO_ROOT,
                stderr=subprocess.DEVNULL,
            ),
            *[
                subprocess.Popen(
                    [sys.executable, "-m", "app.cli", "worker"],
                    env=self.env,
                    cwd=REPO_ROOT,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for _ in range(workers)
            ],
        ]
        self.http = httpx.Client(base_url=self.base, timeout=60)
        self._wait_ready()

    def _wait_ready(self) -> None:
        """Until a worker is ready (has compiled the solver), not only alive."""
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                response = self.http.get("/readyz")
                if response.status_code == 200 and response.json()["status"] == "ready":
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise TimeoutError("the service did not become ready")

    def close(self) -> None:
        self.http.close()
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            process.wait(timeout=60)
        job_ids = [i.decode() for i in self.redis.zrange(f"{self.prefix}jobs", 0, -1)]
        for pattern in [f"{self.prefix}*", f"rq:*{self.queue}*"] + [f"rq:*{j}*" for j in job_ids]:
            keys = list(self.redis.scan_iter(match=pattern, count=1000))
            for start in range(0, len(keys), 500):
                self.redis.unlink(*keys[start : start + 500])

    def upload(self, csv: bytes, target: str) -> dict:
        response = self.http.post(f"/v1/datasets?target={target}", content=csv, headers={"Content-Type": "text/csv"})
        response.raise_for_status()
        return response.json()

    def wait(self, job_id: str, poll: float = 0.002) -> tuple[dict, float]:
        """(final job, seconds until the client saw it finish)."""
        started = time.perf_counter()
        while True:
            job = self.http.get(f"/v1/jobs/{job_id}").json()
            if job["status"] in ("succeeded", "failed", "canceled"):
                if job["status"] != "succeeded":
                    raise RuntimeError(f"job {job_id} {job['status']}: {job['error']}")
                return job, time.perf_counter() - started
            time.sleep(poll)

    def train(self, dataset_id: str, **params) -> str:
        response = self.http.post("/v1/forests/train", json={"dataset_id": dataset_id, **params})
        response.raise_for_status()
        return self.wait(response.json()["id"], poll=0.05)[0]["summary"]["forest_id"]

    def run_job(self, body: dict) -> tuple[dict, float]:
        started = time.perf_counter()
        response = self.http.post("/v1/jobs", json=body)
        response.raise_for_status()
        job, _ = self.wait(response.json()["id"])
        return job, time.perf_counter() - started

    def drop_matrix_cache(self) -> None:
        for key in self.redis.scan_iter(match=f"{self.prefix}leafcache:*"):
            self.redis.unlink(key)


def job_figures(service: Service, body: dict, repeats: int, cold: bool) -> dict:
    rows = []
    for _ in range(repeats):
        if cold:
            service.drop_matrix_cache()
        job, latency = service.run_job(body)
        assert job["cache_hit"] is (not cold)
        timings = job["timings"]
        rows.append(
            {
                "end_to_end": latency,
                "queue_wait": timings["queue_wait"],
                "matrix_build": timings["matrix_build"],
                "path": timings["path"],
            }
        )
    return {name: statistics.median(row[name] for row in rows) for name in rows[0]}


def scoring_figures(
    service: Service, model_id: str, frame: pd.DataFrame, rate: float, seconds: float, batch_rows: int, batches: int
) -> dict:
    url = f"/v1/models/{model_id}/predict"
    columns = list(frame.columns)
    records = frame.to_numpy().tolist()
    single = []
    interval = 1.0 / rate
    start = time.perf_counter()
    for k in range(int(rate * seconds)):
        due = start + k * interval
        pause = due - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        sent = time.perf_counter()
        row = records[k % len(records)]
        response = service.http.post(url, json={"dataframe_split": {"columns": columns, "data": [row]}})
        single.append(time.perf_counter() - sent)
        response.raise_for_status()
    achieved_rate = len(single) / (time.perf_counter() - start)
    rng = np.random.default_rng(0)
    batch = [records[i] for i in rng.integers(0, len(records), batch_rows)]
    body = {"dataframe_split": {"columns": columns, "data": batch}}
    batch_latency = []
    for _ in range(batches):
        sent = time.perf_counter()
        response = service.http.post(url, json=body)
        batch_latency.append(time.perf_counter() - sent)
        response.raise_for_status()
        assert len(response.json()["predictions"]) == batch_rows
    return {
        "single_p50": percentile(single, 50),
        "single_p99": percentile(single, 99),
        "rate": achieved_rate,
        "n_single": len(single),
        "batch_p50": percentile(batch_latency, 50),
        "batch_p99": percentile(batch_latency, 99),
        "batch_rows_per_s": batch_rows / statistics.median(batch_latency),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--redis", default=os.environ.get("FIRE_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of the paced single-row run")
    args = parser.parse_args()

    full = pd.read_csv(ELEVATORS)
    small_csv = full.head(1000).to_csv(index=False).encode()
    service = Service(args.redis)
    try:
        small = service.upload(small_csv, "Goal")
        small_forest = service.train(small["id"], n_estimators=100, max_depth=3, max_features="sqrt")
        small_job = {
            "dataset_id": small["id"],
            "forest_id": small_forest,
            "fusion_ratio": 1.0,
            "n_lambdas": 50,
            "max_rules": 15,
        }
        service.run_job(small_job)  # first contact: connections, imports
        cold = job_figures(service, small_job, args.repeats, cold=True)
        warm = job_figures(service, small_job, args.repeats, cold=False)

        large = service.upload(gzip.decompress(ELEVATORS.read_bytes()), "Goal")
        large_forest = service.train(large["id"], n_estimators=250, max_depth=5, max_features="sqrt")
        large_job = {"dataset_id": large["id"], "forest_id": large_forest, "n_lambdas": 3, "max_rules": 15}
        large_cold = job_figures(service, large_job, args.repeats, cold=True)
        large_warm = job_figures(service, large_job, args.repeats, cold=False)

        job, _ = service.run_job(small_job)
        model = service.http.post("/v1/models", json={"job_id": job["id"], "name": "bench"}).json()
        scoring = scoring_figures(
            service,
            model["id"],
            full.drop(columns=["Goal"]),
            rate=200,
            seconds=args.seconds,
            batch_rows=10_000,
            batches=20,
        )
    finally:
        service.close()

    ms = lambda seconds: f"{seconds * 1000:.1f} ms"  # noqa: E731
    print(f"FIRE service benchmark ({os.cpu_count()} cores; medians of {args.repeats} jobs; one worker)\n")
    print("| figure | value | target |")
    print("|---|---|---|")
    print(f"| small job (1,000 rows, 100 trees d3, 50 λ) end to end, cold cache | {ms(cold['end_to_end'])} | |")
    print(f"| … queue wait (enqueue → worker starts) | {ms(cold['queue_wait'])} | < 50 ms |")
    print(f"| … matrix build (cold) | {ms(cold['matrix_build'])} | |")
    print(f"| … path | {ms(cold['path'])} | |")
    print(f"| small job end to end, warm cache | {ms(warm['end_to_end'])} | |")
    print(f"| … matrix from cache | {ms(warm['matrix_build'])} | |")
    print(
        f"| matrix build, elevators 16,599 rows × 250 trees d5: cold / cached | "
        f"{ms(large_cold['matrix_build'])} / {ms(large_warm['matrix_build'])} "
        f"({large_cold['matrix_build'] / large_warm['matrix_build']:.1f}× faster) | |"
    )
    print(
        f"| that job end to end (3 λ): cold / cached | {ms(large_cold['end_to_end'])} / "
        f"{ms(large_warm['end_to_end'])} ({large_cold['end_to_end'] / large_warm['end_to_end']:.2f}×) | |"
    )
    print(
        f"| single-row scoring over HTTP at {scoring['rate']:.0f} req/s ({scoring['n_single']} requests): "
        f"p50 / p99 | {ms(scoring['single_p50'])} / {ms(scoring['single_p99'])} | p99 < 10 ms at 200 req/s |"
    )
    print(
        f"| 10,000-row batch scoring over HTTP: p50 / p99 | {ms(scoring['batch_p50'])} / "
        f"{ms(scoring['batch_p99'])} ({scoring['batch_rows_per_s']:,.0f} rows/s) | < 100 ms |"
    )


if __name__ == "__main__":
    main()
