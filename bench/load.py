"""Load benchmark of the FIRE service (a benchmark, not a test): concurrent clients on loopback for a fixed time,
mixing single-row scoring, job polling and job submission, then a check that nothing was lost.

It starts its own service on the Redis given (bench/service.py's: a fresh key prefix and queue, removed at the
end): `fire-rules serve` with --api-processes API processes and --workers `fire-rules worker` processes. Before
the load it uploads tests/data/abalone.csv.gz, runs a path job and promotes --models models, scoring a fixed set of rows
with each. Then --clients clients run for --seconds:

- scoring clients (most of them) POST one row to a random model, back to back (--think-ms between requests);
- polling clients GET a random job submitted so far;
- submitting clients submit a small path job (its own forest), follow it until it ends, and submit the next.

Reported, as markdown: requests per second, p50/p99 latency and errors per kind (a 429 is counted apart: it is
the service's backpressure, not a failure); afterwards every submitted job must be final (waited for up to
--drain-seconds) and every model must predict exactly what it predicted before the load.

Usage: python bench/load.py [--redis redis://127.0.0.1:6379/0] [--clients 50] [--seconds 60]
                            [--api-processes 1] [--workers 2] [--think-ms 0]
Loopback only; bounded by --seconds and --drain-seconds.
"""

import argparse
import asyncio
import gzip
import json
import os
import random
import time
from collections import defaultdict

import httpx
import numpy as np
import pandas as pd
from service import (  # bench/service.py: the service under test, on its own key prefix and queue
    ABALONE,
    Service,
    upload_abalone,
)

SCORE, POLL, SUBMIT = "score (1 row)", "poll job", "submit job"
FOREST = {"n_estimators": 30, "max_depth": 3, "max_features": "sqrt"}
TERMINAL = ("succeeded", "failed", "canceled")


def wait_job(http: httpx.Client, job_id: str, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = http.get(f"/v1/jobs/{job_id}").json()
        if job["status"] in TERMINAL:
            return job
        time.sleep(0.05)
    raise TimeoutError(job_id)


def prepare(http: httpx.Client, n_models: int) -> tuple[dict, list[str], list[dict], dict[str, list[float]]]:
    """(dataset, model ids, scoring rows, each model's predictions of the check rows)."""
    dataset = upload_abalone(http)
    models = []
    for index in range(n_models):
        job = (
            http.post(
                "/v1/jobs",
                json={
                    "dataset_id": dataset["id"],
                    "forest": {**FOREST, "random_state": index},
                    "n_lambdas": 20,
                    "max_rules": 12,
                },
            )
            .raise_for_status()
            .json()
        )
        done = wait_job(http, job["id"])
        assert done["status"] == "succeeded", done
        models.append(
            http.post("/v1/models", json={"job_id": job["id"], "name": f"load-{index}"}).raise_for_status().json()["id"]
        )
    with gzip.open(ABALONE) as table:
        frame = pd.read_csv(table).drop(columns=["rings"])
    rows = frame.to_dict(orient="records")
    check = {"dataframe_records": rows[:200]}
    before = {
        model: http.post(f"/v1/models/{model}/predict", json=check).raise_for_status().json()["predictions"]
        for model in models
    }
    return dataset, models, rows, before


class Tally:
    def __init__(self):
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.errors: dict[str, int] = defaultdict(int)
        self.throttled: dict[str, int] = defaultdict(int)
        self.error_examples: list[str] = []

    def record(self, kind: str, started: float, response: "Reply | None", error: str | None = None) -> None:
        self.latency[kind].append(time.perf_counter() - started)
        if response is not None and response.status_code == 429:
            self.throttled[kind] += 1
        elif response is None or response.status_code >= 400:
            self.errors[kind] += 1
            if len(self.error_examples) < 5:
                self.error_examples.append(f"{kind}: {error or (response.status_code, response.text[:200])}")


class Connection:
    """One keep-alive HTTP/1.1 connection on raw asyncio streams: a client that costs little CPU, so that on a
    small machine the figures are the server's rather than the load generator's."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader = self.writer = None

    async def request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\n"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        self.writer.write(head.encode() + b"\r\n" + (body or b""))
        try:
            status_line = await self.reader.readuntil(b"\r\n")
            headers = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
            length = int(headers.split("content-length:", 1)[1].split("\r\n", 1)[0])
            payload = await self.reader.readexactly(length)
        except (OSError, asyncio.IncompleteReadError, IndexError, ValueError):
            self.writer.close()
            self.writer = None
            raise
        if "connection: close" in headers:
            self.writer.close()
            self.writer = None
        return int(status_line.split()[1]), payload


class Reply:
    def __init__(self, status: int, payload: bytes):
        self.status_code, self.payload = status, payload

    def json(self):
        return json.loads(self.payload)

    @property
    def text(self) -> str:
        return self.payload.decode(errors="replace")


async def timed(connection: Connection, tally: "Tally", kind: str, method: str, path: str, body=None):
    started = time.perf_counter()
    try:
        status, payload = await connection.request(method, path, None if body is None else json.dumps(body).encode())
    except (OSError, asyncio.IncompleteReadError, IndexError, ValueError) as error:
        tally.record(kind, started, None, repr(error))
        return None
    reply = Reply(status, payload)
    tally.record(kind, started, reply)
    return reply


async def scorer(client, tally, models, rows, stop_at, think):
    rng = random.Random()
    while time.monotonic() < stop_at:
        body = {"dataframe_records": [rows[rng.randrange(len(rows))]]}
        await timed(client, tally, SCORE, "POST", f"/v1/models/{rng.choice(models)}/predict", body)
        if think:
            await asyncio.sleep(think)


async def poller(client, tally, jobs, stop_at, think):
    rng = random.Random()
    while time.monotonic() < stop_at:
        await timed(client, tally, POLL, "GET", f"/v1/jobs/{rng.choice(jobs)}")
        if think:
            await asyncio.sleep(think)


async def submitter(client, tally, dataset_id, jobs, stop_at, index):
    rng = random.Random(index)
    while time.monotonic() < stop_at:
        body = {
            "dataset_id": dataset_id,
            "forest": {**FOREST, "random_state": rng.randrange(10**6)},
            "n_lambdas": 10,
            "max_rules": 8,
        }
        response = await timed(client, tally, SUBMIT, "POST", "/v1/jobs", body)
        if response is None or response.status_code != 202:
            await asyncio.sleep(1)
            continue
        job_id = response.json()["id"]
        jobs.append(job_id)
        while time.monotonic() < stop_at:
            polled = await timed(client, tally, POLL, "GET", f"/v1/jobs/{job_id}")
            if polled is not None and polled.status_code == 200 and polled.json()["status"] in TERMINAL:
                break
            await asyncio.sleep(0.2)


async def run_load(
    base: str,
    clients: int,
    seconds: float,
    think: float,
    dataset_id: str,
    models: list[str],
    rows: list[dict],
    first_jobs: list[str],
) -> tuple[Tally, float, list[str]]:
    n_submitters = max(1, clients // 16)
    n_pollers = max(1, clients // 7)
    n_scorers = clients - n_submitters - n_pollers
    tally, jobs = Tally(), list(first_jobs)
    host, port = base.removeprefix("http://").split(":")
    connect = lambda: Connection(host, int(port))  # noqa: E731  one connection per client, as 50 apps would
    started = time.monotonic()
    stop_at = started + seconds
    await asyncio.gather(
        *[scorer(connect(), tally, models, rows, stop_at, think) for _ in range(n_scorers)],
        *[poller(connect(), tally, jobs, stop_at, think) for _ in range(n_pollers)],
        *[submitter(connect(), tally, dataset_id, jobs, stop_at, index) for index in range(n_submitters)],
    )
    return tally, time.monotonic() - started, jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--redis", default=os.environ.get("FIRE_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--api-processes", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--models", type=int, default=3)
    parser.add_argument("--think-ms", type=float, default=0.0, help="pause of each client between its requests")
    parser.add_argument("--drain-seconds", type=float, default=120.0)
    args = parser.parse_args()

    # the tenant's limit on active jobs is the service's backpressure; the benchmark measures without it
    service = Service(args.redis, args.api_processes, args.workers, env={"FIRE_MAX_ACTIVE_JOBS": "1000"})
    try:
        http = service.http
        dataset, models, rows, before = prepare(http, args.models)
        first_jobs = [job["id"] for job in http.get("/v1/jobs").json()]
        tally, elapsed, jobs = asyncio.run(
            run_load(
                service.base, args.clients, args.seconds, args.think_ms / 1000, dataset["id"], models, rows, first_jobs
            )
        )
        deadline = time.monotonic() + args.drain_seconds
        finals = {}
        for job_id in set(jobs):
            job = wait_job(http, job_id, max(1.0, deadline - time.monotonic()))
            finals[job_id] = job["status"]
        check = {"dataframe_records": rows[:200]}
        same = sum(
            http.post(f"/v1/models/{model}/predict", json=check).json()["predictions"] == before[model]
            for model in models
        )
    finally:
        service.close()

    total = sum(len(values) for values in tally.latency.values())
    print(
        f"FIRE load benchmark: {args.clients} clients for {elapsed:.0f} s on {os.cpu_count()} cores, "
        f"{args.api_processes} API process(es), {args.workers} workers, think time {args.think_ms:g} ms\n"
    )
    print("| kind | requests | per second | p50 | p99 | errors | 429 |")
    print("|---|---|---|---|---|---|---|")
    for kind in (SCORE, POLL, SUBMIT):
        values = np.asarray(tally.latency.get(kind, [float("nan")])) * 1000
        print(
            f"| {kind} | {len(tally.latency.get(kind, []))} | {len(tally.latency.get(kind, [])) / elapsed:.1f} | "
            f"{np.percentile(values, 50):.1f} ms | {np.percentile(values, 99):.1f} ms | {tally.errors[kind]} | "
            f"{tally.throttled[kind]} |"
        )
    print(
        f"| all | {total} | {total / elapsed:.1f} | | | {sum(tally.errors.values())} | "
        f"{sum(tally.throttled.values())} |"
    )
    statuses = defaultdict(int)
    for status in finals.values():
        statuses[status] += 1
    print(
        f"\njobs submitted and final: {sum(status in TERMINAL for status in finals.values())}/{len(finals)} "
        f"({dict(statuses)}); models predicting as before the load: {same}/{len(models)}"
    )
    for example in tally.error_examples:
        print(f"- error: {example}")


if __name__ == "__main__":
    main()
