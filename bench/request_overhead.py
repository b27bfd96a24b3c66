"""The service's request overhead against a bare FastAPI app, in one run (a benchmark, not a test).

What it does:

1. starts a bare FastAPI app (one sync ``GET /healthz`` answering ``{"status": "ok"}``, nothing else) under
   uvicorn with the service's settings: one process, ``uvicorn.run(app, host, port, log_level="warning")`` as
   ``fire-rules serve --log-level warning`` runs it (app/cli.py; uvicorn's defaults otherwise: httptools and
   uvloop where installed), so access logs are off in both (uvicorn logs them at info);
2. starts the service as bench/scoring_load.py does (bench/service.py's `Service`: `fire-rules serve` and one
   `fire-rules worker` on the Redis given, under a fresh key prefix and queue removed at the end), uploads
   tests/data/abalone.csv.gz, runs bench/load.py's path job, promotes its selected step as name ``scoring-load``
   and points the alias ``champion`` at it (bench/scoring_load_runners.py's `prepare_fire`), then stops the worker:
   scoring needs none, and a worker still compiling the solver in the background (minutes on a cold numba cache)
   would take CPU from the servers under load;
3. for each route, in turn: a warm-up wrk run whose figures are dropped, then
   ``wrk -t THREADS -c CLIENTS -d SECONDS --timeout 5s --latency`` cycling through 512 different single-row
   bodies (bench/scoring_load_runners.py's Lua script): bare /healthz, service /healthz, /predict by model id,
   by alias (``/v1/registered-models/{name}/aliases/{alias}/predict``), the alias's MLflow /invocations with a CSV
   body, and the Open Inference Protocol's /v2/models/{name}/infer. With --rounds N the whole sequence runs N
   times and each route's figures are its round medians (the bare app is measured in every round, so each ratio
   compares figures from the same minutes);
4. prints a markdown table (requests/s, p50, p99, errors, and requests/s as a ratio of the bare app's) with the
   load average before and after, and writes it to bench/results/request_overhead.md.

Target (issue 31, "request overhead first"): single-row /predict by alias at >= 70% of the bare app's requests/s
in the same run, with p99 < 50 ms at 50 connections.

Usage: python bench/request_overhead.py [--redis redis://127.0.0.1:6379/0] [--clients 50] [--threads 2]
                                        [--seconds 10] [--warmup 2] [--rounds 1] [--quick] [--out PATH]
--quick: 3 s per route after 1 s of warm-up, and nothing written unless --out is given.
Needs wrk on the PATH (`apt-get install wrk`). Loopback only; every process it starts is stopped at the end.
"""

import argparse
import datetime
import gzip
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import git  # bench/machine.py
from scoring_load_runners import (
    ALIAS,
    BODIES,
    N_BODIES,
    NAME,
    Route,
    loadavg,
    predictions_of,
    prepare_fire,
    run_wrk,
    write_script,
)
from service import ABALONE, Service, free_port  # bench/service.py: the service under test, own prefix and queue

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO_ROOT / "bench" / "results" / "request_overhead.md"
TARGET_RATIO, TARGET_P99_MS = 0.70, 50.0
TARGET_ROUTE = "predict by alias"

# the bare app: what FastAPI and uvicorn answer on this machine now, with the service's uvicorn settings
BARE_APP = textwrap.dedent(
    """
    import sys

    import uvicorn
    from fastapi import FastAPI

    app = FastAPI()


    @app.get("/healthz")
    def healthz():
        return {"status": "ok"}


    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
    """
)


@dataclass
class Measured:
    route: Route
    runs: list[dict] = field(default_factory=list)  # one wrk result per round

    def median(self, key: str) -> float:
        return statistics.median(run[key] for run in self.runs)


class BareApp:
    """The bare FastAPI app under uvicorn, in a process of its own."""

    def __init__(self, directory: Path):
        script = directory / "bare_app.py"
        script.write_text(BARE_APP)
        port = free_port()
        self.base = f"http://127.0.0.1:{port}"
        self.process = subprocess.Popen(
            [sys.executable, str(script), str(port)], cwd=directory, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.base + "/healthz", timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.close()
        raise TimeoutError("the bare app did not start")

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def stop_workers(service: Service) -> None:
    """The service's worker processes (all but its API, the first), stopped with what they started."""
    for process in service.processes[1:]:
        process.terminate()
    for process in service.processes[1:]:
        process.wait(timeout=60)


def bench_routes(model_id: str) -> list[tuple[str, Route]]:
    by_name = f"/v1/registered-models/{NAME}"
    return [
        ("bare /healthz", Route("bare", "GET /healthz (bare FastAPI app)", "/healthz", "none", method="GET")),
        ("service /healthz", Route("FIRE", "GET /healthz", "/healthz", "none", method="GET")),
        (
            "predict by id",
            Route("FIRE", "POST /v1/models/{id}/predict", f"/v1/models/{model_id}/predict", "dataframe_split"),
        ),
        (
            TARGET_ROUTE,
            Route(
                "FIRE",
                "POST /v1/registered-models/{name}/aliases/{alias}/predict",
                f"{by_name}/aliases/{ALIAS}/predict",
                "dataframe_split",
            ),
        ),
        (
            "invocations CSV",
            Route(
                "FIRE",
                "POST /v1/registered-models/{name}/aliases/{alias}/invocations",
                f"{by_name}/aliases/{ALIAS}/invocations",
                "csv",
            ),
        ),
        (
            "OIP infer",
            Route("FIRE", "POST /v2/models/{name}/infer", f"/v2/models/{NAME}/infer", "oip"),
        ),
    ]


def check(route: Route, base: str, columns: list[str], rows: list[list]) -> None:
    """Every route answers 200 (a scoring route: with predictions) before it is loaded."""
    make, content_type = BODIES[route.body]
    if route.method == "GET":
        httpx.get(base + route.path, timeout=30).raise_for_status()
        return
    response = httpx.post(
        base + route.path, content=make(columns, rows[0]), headers={"Content-Type": content_type}, timeout=30
    )
    if response.status_code != 200:
        raise RuntimeError(f"{route.path} ({route.body}): {response.status_code} {response.text[:400]}")
    if len(predictions_of(response.json())) != 1:
        raise RuntimeError(f"{route.path} ({route.body}) did not answer one prediction: {response.text[:400]}")


def figures_of(wrk: dict) -> dict:
    errors = sum(wrk[k] for k in ("connect", "read", "write", "status", "timeout"))
    return {
        "rps": wrk["requests"] / (wrk["duration_us"] / 1e6),
        "p50_ms": wrk["p50_us"] / 1000,
        "p99_ms": wrk["p99_us"] / 1000,
        "errors": errors,
    }


def markdown(table: list[tuple[str, Measured]], settings: dict) -> str:
    bare = dict(table)["bare /healthz"]
    lines = [
        "# Request overhead: the service against a bare FastAPI app",
        "",
        f"`{settings['command']}` on {settings['date']}, commit {settings['commit']}; {settings['cpus']} cores, "
        f"{settings['platform']}; load average {settings['loadavg_start']} at the start, "
        f"{settings['loadavg_end']} at the end.",
        "",
        f"wrk -t{settings['threads']} -c{settings['clients']} -d{settings['seconds']:g}s --timeout 5s after "
        f"{settings['warmup']:g} s of warm-up per route; {settings['rounds']} round(s), round medians. Both servers: "
        "one uvicorn process, log level warning (no access log), uvicorn's defaults otherwise "
        f"({settings['uvicorn']}).",
        "",
        "| route | requests/s | p50 ms | p99 ms | errors | ratio to bare |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, measured in table:
        ratio = measured.median("rps") / bare.median("rps")
        lines.append(
            f"| {label} (`{measured.route.path}`) | {measured.median('rps'):,.0f} | {measured.median('p50_ms'):.1f} "
            f"| {measured.median('p99_ms'):.1f} | {sum(run['errors'] for run in measured.runs)} | {ratio:.2f} |"
        )
    target = dict(table)[TARGET_ROUTE]
    ratio = target.median("rps") / bare.median("rps")
    met = ratio >= TARGET_RATIO and target.median("p99_ms") < TARGET_P99_MS
    lines += [
        "",
        f"Target: {TARGET_ROUTE} at >= {TARGET_RATIO:.0%} of the bare app's requests/s with p99 < "
        f"{TARGET_P99_MS:g} ms: {ratio:.0%}, p99 {target.median('p99_ms'):.1f} ms: {'met' if met else 'MISSED'}.",
    ]
    if settings["rounds"] > 1:
        lines += ["", "Requests/s per round:", ""]
        for label, measured in table:
            lines.append(f"- {label}: " + ", ".join(f"{run['rps']:,.0f}" for run in measured.runs))
    return "\n".join(lines) + "\n"


def uvicorn_setup() -> str:
    import uvicorn

    parts = [f"uvicorn {uvicorn.__version__}"]
    for module in ("httptools", "uvloop"):
        try:
            parts.append(f"{module} {__import__(module).__version__}")
        except ImportError:
            parts.append(f"no {module}")
    return ", ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--redis", default=os.environ.get("FIRE_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument("--clients", type=int, default=50, help="wrk connections")
    parser.add_argument("--threads", type=int, default=2, help="wrk threads")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per route and round")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of load per route before measuring")
    parser.add_argument("--rounds", type=int, default=1, help="times the whole sequence runs (round medians)")
    parser.add_argument("--quick", action="store_true", help="3 s per route after 1 s; writes nothing unless --out")
    parser.add_argument("--out", type=Path, default=None, help=f"the markdown report (default {DEFAULT_OUT})")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.warmup = 3.0, 1.0
    out = args.out if args.out is not None else (None if args.quick else DEFAULT_OUT)
    if shutil.which("wrk") is None:
        sys.exit("wrk is not on the PATH (apt-get install wrk)")

    with gzip.open(ABALONE) as handle:
        frame = pd.read_csv(handle)
    frame.pop("rings")
    columns = list(frame.columns)
    rows = [
        [value.item() if hasattr(value, "item") else value for value in row]
        for row in frame.sample(N_BODIES, random_state=0).itertuples(index=False)
    ]
    started = datetime.datetime.now().astimezone()
    loadavg_start = loadavg()
    with tempfile.TemporaryDirectory(prefix="request-overhead-") as scratch:
        directory = Path(scratch)
        bare = service = None
        try:
            print("starting the bare app, the service, and training the model ...", file=sys.stderr)
            bare = BareApp(directory)
            service = Service(args.redis, api_processes=1, workers=1)
            model_id, _ = prepare_fire(service.http)
            stop_workers(service)
            bases = {"bare": bare.base, "FIRE": service.base}
            table = [(label, Measured(route)) for label, route in bench_routes(model_id)]
            scripts = {}
            for index, (label, measured) in enumerate(table):
                route = measured.route
                check(route, bases[route.server], columns, rows)
                make = BODIES[route.body][0]
                scripts[label] = write_script(directory, index, route, [make(columns, row) for row in rows])
            for round_number in range(args.rounds):
                for label, measured in table:
                    base = bases[measured.route.server]
                    if args.warmup > 0:
                        run_wrk(base, scripts[label], args.threads, args.clients, args.warmup)
                    before = loadavg()
                    figures = figures_of(run_wrk(base, scripts[label], args.threads, args.clients, args.seconds))
                    measured.runs.append({**figures, "loadavg_before": before, "loadavg_after": loadavg()})
                    print(
                        f"round {round_number + 1} {label}: {figures['rps']:,.0f} req/s, p50 "
                        f"{figures['p50_ms']:.1f} ms, p99 {figures['p99_ms']:.1f} ms, errors {figures['errors']} "
                        f"(load {before[0]})",
                        file=sys.stderr,
                    )
        finally:
            if service is not None:
                service.close()
            if bare is not None:
                bare.close()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", "app", "worker")
    settings = {
        "command": " ".join(["python bench/request_overhead.py", *sys.argv[1:]]),
        "date": started.isoformat(timespec="seconds"),
        "commit": head + (" (with uncommitted changes in app/ or worker/)" if dirty else ""),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "loadavg_start": loadavg_start,
        "loadavg_end": loadavg(),
        "clients": args.clients,
        "threads": args.threads,
        "seconds": args.seconds,
        "warmup": args.warmup,
        "rounds": args.rounds,
        "uvicorn": uvicorn_setup(),
    }
    text = markdown(table, settings)
    print(text)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"written: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
