"""Single-row scoring under load on every scoring route of the FIRE service (wrk: saturating; locust: paced),
beside MLflow's own scoring server (`mlflow models serve`) of a comparable scikit-learn model on the same machine,
in the same run, with the same load tools and settings (a benchmark, not a test).

What it does:

1. starts the service as bench/load.py does (bench/service.py's `Service`: `fire-rules serve` with
   --api-processes uvicorn processes and one `fire-rules worker`, on the Redis given, under a fresh key prefix
   and queue removed at the end); uploads tests/data/abalone.csv.gz, runs bench/load.py's path job (a 30-tree
   forest of depth 3, 20 lambdas, at most 12 rules), promotes its selected step as name `scoring-load`
   (version 1) and points the alias `champion` at version 1;
2. fits the comparable scikit-learn model on the same table: a Pipeline of a OneHotEncoder for Sex and a
   RandomForestRegressor with the forest's own settings (the ensemble the rules are extracted from; numeric
   columns passed through), saves it with `mlflow.sklearn.save_model` (with its signature, so MLflow checks
   each request's schema as a real deployment does) and serves it with
   `mlflow models serve --env-manager local --workers N` (N = --api-processes, the same uvicorn process count
   as the service; both servers log at warning level, without access logs);
3. checks that every route answers the same first rows with 200 and the same predictions (the FIRE routes
   each other's, MLflow the pipeline's own); times --single-repeats requests per route from one client, the
   routes in turn (a request's cost without queueing); then for each route runs wrk (`-t THREADS -c CLIENTS -d SECONDS
   --timeout 5s`, after a short warm-up run whose figures are dropped) with a Lua script that cycles through
   512 different single-row bodies; first MLflow's empty GET /ping, not a scoring route but a yardstick of
   what uvicorn and FastAPI answer on this machine at the time. This is the saturating phase: the clients never
   pause, so it measures each server's throughput, and its latency is queueing (Little's law: mean latency =
   clients / throughput);
4. the paced phase, as internal apps call a model: for each route again, CLIENTS locust users (headless,
   `FastHttpUser`, `locust -f <generated locustfile> --headless -u CLIENTS -r CLIENTS -t PACED_SECONDS --csv ...`)
   each sending one single-row request every --pace-ms (`constant_throughput`; each user starts at a random
   phase of its period, as independent callers would, and cycles through the same 512 bodies): with 50 users
   and 100 ms, 500 requests/s offered in all. A server slower than that (MLflow's does about 40 a second on
   the 2-core machine) falls behind, and its users then wait on it as wrk's do: its achieved requests/s and
   latency are reported as they are. p50/p90/p99, requests and failures come from the "Aggregated" row of
   locust's `_stats.csv` table (whole milliseconds under 100 ms, two significant digits above), which the
   generated locustfile writes once more at the test's stop as `<prefix>_final_stats.csv` (locust rewrites its
   own file each second while the test runs, not at its end: it misses up to the last second);
5. writes a markdown report with both tables (paced: offered and achieved requests/s, p50, p90, p99, max,
   failures, target met?; saturating: one-client p50, requests/s, p50, p90, p99, errors) and a JSON with every
   figure, the load average around each run, versions and settings.

Target (issue 19): single-row scoring p99 < 50 ms with 50 clients and no errors on every scoring route, measured
with a standard load tool. It is checked on the paced phase (with at least 90% of the offered requests/s
achieved): in the saturating phase the latency is clients / throughput whatever a request costs (there even
MLflow's empty GET /ping has a p99 of hundreds of ms), so its p99s are reported, not judged.

Routes: /v1/models/{id}/predict; /v1/registered-models/{name}/predict, .../versions/{v}/predict,
.../aliases/{alias}/predict; .../aliases/{alias}/invocations (JSON and CSV); the Open Inference Protocol's
/v2/models/{name}/infer and /v2/models/{name}/versions/{version}/infer (run where the routes exist, reported as not
run otherwise); MLflow's /invocations (JSON split, records and CSV).

Usage: python bench/scoring_load.py [--redis redis://127.0.0.1:6379/0] [--clients 50] [--threads 2]
                                    [--seconds 15] [--warmup 3] [--api-processes 1] [--single-repeats 200]
                                    [--pace-ms 100] [--paced-seconds 15] [--no-paced] [--quick]
                                    [--out bench/results/scoring_load]
--quick: 3 s per route after a 1 s warm-up, 5 s paced runs, 50 one-client requests, and nothing written unless
--out is given. --no-paced: the saturating phase only (the target is then not checked).
Needs wrk on the PATH (`apt-get install wrk`), locust (`pip install locust`; run as `python -m locust`) and the
bench extras (mlflow-skinny). Loopback only; every process it starts is stopped at the end.
"""

import argparse
import datetime
import gzip
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import git  # bench/machine.py
from scoring_load_report import (
    PACED_MIN_ACHIEVED,
    TARGET_P99_MS,
    markdown,
    summarize_paced,
    summarize_saturating,
    whole,
)
from scoring_load_runners import (
    BODIES,
    FOREST,
    N_BODIES,
    MlflowServer,
    Route,
    loadavg,
    predictions_of,
    prepare_fire,
    routes,
    run_locust,
    run_wrk,
    write_locustfile,
    write_script,
)
from service import ABALONE, Service  # bench/service.py: the service under test, own prefix and queue

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO_ROOT / "bench" / "results" / "scoring_load"
PACED_SETTLE_S = 2.0  # pause after each paced run: a server that fell behind answers what it still holds


# ---------------------------------------------------------------------------------------------------------------
# the run


def check_routes(
    todo: list[Route], bases: dict, columns: list[str], rows: list[list], expected: dict[str, np.ndarray]
) -> list[Route]:
    """The routes that answer the first rows with 200 and the expected predictions; an optional route that is
    missing (404 or 405 of the router) is dropped with a note, anything else wrong stops the benchmark."""
    kept = []
    for route in todo:
        make, content_type = BODIES[route.body]
        if route.method == "GET":
            httpx.get(bases[route.server] + route.path, timeout=30).raise_for_status()
            kept.append(route)
            continue
        got = []
        for row in rows[:5]:
            response = httpx.post(
                bases[route.server] + route.path,
                content=make(columns, row),
                headers={"Content-Type": content_type},
                timeout=30,
            )
            if route.optional and response.status_code in (404, 405) and not got:
                route.result = {"skipped": f"route missing ({response.status_code})"}
                break
            if response.status_code != 200:
                raise RuntimeError(f"{route.label} ({route.body}): {response.status_code} {response.text[:400]}")
            got.extend(predictions_of(response.json()))
        if route.result.get("skipped"):
            print(f"- {route.label} ({route.body}): {route.result['skipped']}", file=sys.stderr)
            continue
        want = expected[route.server]
        if not np.allclose(got, want, rtol=1e-9, atol=1e-9):
            raise RuntimeError(f"{route.label} ({route.body}) predicted {got}, expected {list(want)}")
        kept.append(route)
    return kept


def single_client(runnable: list[Route], bases: dict, columns: list[str], rows: list[list], repeats: int) -> list:
    """Each route's median milliseconds with one client and nothing else of ours running: the routes in turn,
    round-robin, so that the machine's other load weighs on each alike."""
    clients = {server: httpx.Client(base_url=base, timeout=30) for server, base in bases.items()}
    times: list[list[float]] = [[] for _ in runnable]
    try:
        for k in range(repeats):
            row = rows[k % len(rows)]
            for index, route in enumerate(runnable):
                make, content_type = BODIES[route.body]
                client = clients[route.server]
                started = time.perf_counter()
                if route.method == "GET":
                    response = client.get(route.path)
                else:
                    response = client.post(
                        route.path, content=make(columns, row), headers={"Content-Type": content_type}
                    )
                times[index].append(time.perf_counter() - started)
                response.raise_for_status()
    finally:
        for client in clients.values():
            client.close()
    return [float(np.median(values)) * 1000 for values in times]


def git_commit() -> str:
    head, dirty = git("rev-parse", "--short", "HEAD"), git("status", "--porcelain", "--", "app", "solver", "worker")
    if head is None or dirty is None:
        return "unknown"
    return head + (" (with uncommitted changes in app/, solver/ or worker/)" if dirty else "")


def versions() -> dict:
    import fastapi
    import mlflow
    import sklearn
    import uvicorn

    wrk = subprocess.run(["wrk", "--version"], capture_output=True, text=True)
    try:  # not imported here: importing locust monkey-patches the process with gevent
        locust_version = importlib.metadata.version("locust")
    except importlib.metadata.PackageNotFoundError:
        locust_version = "not installed"
    return {
        "python": platform.python_version(),
        "fastapi": fastapi.__version__,
        "uvicorn": uvicorn.__version__,
        "mlflow": mlflow.__version__,
        "scikit-learn": sklearn.__version__,
        "wrk": (wrk.stdout or wrk.stderr).splitlines()[0].strip() if (wrk.stdout or wrk.stderr) else "unknown",
        "locust": locust_version,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--redis", default=os.environ.get("FIRE_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument(
        "--clients", type=int, default=50, help="clients: wrk connections (never pause), locust users (paced)"
    )
    parser.add_argument("--threads", type=int, default=2, help="wrk threads")
    parser.add_argument("--seconds", type=float, default=15.0, help="measured seconds per route")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds of load per route before measuring")
    parser.add_argument(
        "--api-processes",
        type=int,
        default=1,
        help="uvicorn processes of each server (FIRE_API_WORKERS, mlflow models serve --workers)",
    )
    parser.add_argument(
        "--single-repeats", type=int, default=200, help="requests per route with one client, before the load"
    )
    parser.add_argument(
        "--pace-ms",
        type=float,
        default=100.0,
        help="paced phase: each of the --clients locust users sends one request every this many ms",
    )
    parser.add_argument("--paced-seconds", type=float, default=15.0, help="paced phase: seconds per route")
    parser.add_argument("--no-paced", action="store_true", help="the saturating (wrk) phase only")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="3 s per route after 1 s, 5 s paced runs, 50 one-client requests; writes nothing unless --out",
    )
    parser.add_argument("--out", type=Path, default=None, help=f"results prefix (.md, .json); default {DEFAULT_OUT}")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.warmup, args.single_repeats, args.paced_seconds = 3.0, 1.0, 50, 5.0
    out = args.out if args.out is not None else (None if args.quick else DEFAULT_OUT)
    if shutil.which("wrk") is None:
        sys.exit("wrk is not on the PATH (apt-get install wrk)")
    if not args.no_paced and importlib.util.find_spec("locust") is None:
        sys.exit("locust is not installed for this Python (pip install locust), or pass --no-paced")
    if args.pace_ms <= 0 or args.paced_seconds <= 0:
        sys.exit("--pace-ms and --paced-seconds must be positive")
    offered = args.clients * 1000 / args.pace_ms

    with gzip.open(ABALONE) as table:
        frame = pd.read_csv(table)
    target = frame.pop("rings")
    columns = list(frame.columns)
    sample = frame.sample(N_BODIES, random_state=0)
    rows = [
        [value.item() if hasattr(value, "item") else value for value in row] for row in sample.itertuples(index=False)
    ]

    started = datetime.datetime.now().astimezone()
    loadavg_start = loadavg()
    results: list[dict] = []
    in_process: dict = {}
    with tempfile.TemporaryDirectory(prefix="scoring-load-") as scratch:
        scratch_dir = Path(scratch)
        service = mlflow_server = None
        try:
            print("starting the service and training the model ...", file=sys.stderr)
            service = Service(args.redis, args.api_processes, workers=1)
            model_id, model = prepare_fire(service.http)
            print("fitting and serving the scikit-learn pipeline with mlflow ...", file=sys.stderr)
            mlflow_server = MlflowServer(frame, target, args.api_processes, scratch_dir)
            check_rows = pd.DataFrame(rows[:5], columns=columns)
            expected = {
                "FIRE": np.asarray(
                    predictions_of(
                        service.http.post(
                            f"/v1/models/{model_id}/predict",
                            json={"dataframe_split": {"columns": columns, "data": rows[:5]}},
                        )
                        .raise_for_status()
                        .json()
                    )
                ),
                "MLflow": mlflow_server.pipeline.predict(check_rows),
            }
            in_process = mlflow_server.in_process_ms(sample)
            bases = {"FIRE": service.base, "MLflow": mlflow_server.base}
            todo = routes(model_id)
            runnable = check_routes(todo, bases, columns, rows, expected)
            print("one client, the routes in turn ...", file=sys.stderr)
            alone = single_client(runnable, bases, columns, rows, args.single_repeats)
            for index, route in enumerate(runnable):
                make = BODIES[route.body][0]
                script = write_script(scratch_dir, index, route, [make(columns, row) for row in rows])
                print(f"{route.server} {route.path} ({route.body}) ...", file=sys.stderr)
                if args.warmup > 0:
                    run_wrk(bases[route.server], script, args.threads, args.clients, args.warmup)
                before = loadavg()
                figures = run_wrk(bases[route.server], script, args.threads, args.clients, args.seconds)
                errors = sum(figures[k] for k in ("connect", "read", "write", "status", "timeout"))
                p99 = figures["p99_us"] / 1000
                route.result = {
                    "requests": figures["requests"],
                    "requests_per_s": figures["requests"] / (figures["duration_us"] / 1e6),
                    "p50_ms": figures["p50_us"] / 1000,
                    "p90_ms": figures["p90_us"] / 1000,
                    "p99_ms": p99,
                    "p999_ms": figures["p999_us"] / 1000,
                    "mean_ms": figures["mean_us"] / 1000,
                    "max_ms": figures["max_us"] / 1000,
                    "errors": errors,
                    "error_kinds": {k: figures[k] for k in ("connect", "read", "write", "status", "timeout")},
                    "wrk_cpu_s": round(figures["tool_cpu_s"], 2),
                    "wrk_cores": round(figures["tool_cpu_s"] / (figures["duration_us"] / 1e6), 2),
                    # not the target (which applies to the paced phase): p99 < 50 ms in this closed loop
                    "p99_under_target": None if route.method == "GET" else bool(p99 < TARGET_P99_MS and errors == 0),
                    "loadavg_before": before,
                    "loadavg_after": loadavg(),
                }
                print(
                    f"  {route.result['requests_per_s']:.0f} req/s, p50 {route.result['p50_ms']:.1f} ms, "
                    f"p90 {route.result['p90_ms']:.1f} ms, p99 {p99:.1f} ms, errors {errors}",
                    file=sys.stderr,
                )
            if not args.no_paced:
                print(
                    f"paced: {args.clients} locust users, a request each every {args.pace_ms:g} ms "
                    f"({offered:,.0f}/s offered), {args.paced_seconds:g} s per route ...",
                    file=sys.stderr,
                )
            for index, route in enumerate(runnable if not args.no_paced else []):
                make = BODIES[route.body][0]
                locustfile = write_locustfile(
                    scratch_dir, index, route, [make(columns, row) for row in rows], args.pace_ms
                )
                print(f"{route.server} {route.path} ({route.body}) paced ...", file=sys.stderr)
                before = loadavg()
                figures = run_locust(
                    bases[route.server],
                    locustfile,
                    args.clients,
                    args.paced_seconds,
                    scratch_dir / f"paced{index}",
                )
                after = loadavg()
                time.sleep(PACED_SETTLE_S)
                p99 = figures["p99_ms"]
                route.paced = {
                    "offered_per_s": offered,
                    **figures,
                    "target_met": None
                    if route.method == "GET"
                    else bool(
                        p99 is not None
                        and p99 < TARGET_P99_MS
                        and figures["failures"] == 0
                        and figures["requests_per_s"] >= PACED_MIN_ACHIEVED * offered
                    ),
                    "loadavg_before": before,
                    "loadavg_after": after,
                }
                print(
                    f"  {figures['requests_per_s']:.0f} of {offered:.0f} req/s, p50 {whole(figures['p50_ms'])} ms, "
                    f"p90 {whole(figures['p90_ms'])} ms, p99 {whole(p99)} ms, failures {figures['failures']}",
                    file=sys.stderr,
                )
            results = []
            for r in todo:
                if not r.result:
                    continue
                row = {"server": r.server, "route": r.label, "path": r.path, "body": r.body, "method": r.method}
                if "skipped" in r.result:
                    results.append({**row, **r.result})
                    continue
                row["single_client_p50_ms"] = alone[runnable.index(r)]
                row["saturating"] = r.result
                if r.paced:
                    row["paced"] = r.paced
                results.append(row)
        finally:
            if mlflow_server is not None:
                mlflow_server.close()
            if service is not None:
                service.close()

    metrics = model.get("metrics") or {}
    report = {
        "command": " ".join(["python bench/scoring_load.py", *sys.argv[1:]]),
        "date": started.isoformat(timespec="seconds"),
        "commit": git_commit(),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "loadavg_start": loadavg_start,
            "loadavg_end": loadavg(),
        },
        "settings": {
            "clients": args.clients,
            "threads": args.threads,
            "seconds": args.seconds,
            "warmup": args.warmup,
            "api_processes": args.api_processes,
            "rows_cycled": N_BODIES,
            "single_client_repeats": args.single_repeats,
            "wrk_timeout_s": 5,
            "paced": not args.no_paced,
            "pace_ms": args.pace_ms,
            "paced_seconds": args.paced_seconds,
            "paced_offered_per_s": offered,
            "paced_min_achieved_fraction": PACED_MIN_ACHIEVED,
            "locust_timeout_s": 5,
            "target_p99_ms": TARGET_P99_MS,
            "target_checked_on": None if args.no_paced else "paced",
        },
        "versions": versions(),
        "fire_model": (
            f"abalone, a path job on a {FOREST['n_estimators']}-tree forest of depth {FOREST['max_depth']} "
            f"(20 lambdas, at most 12 rules), its selected step: {model.get('n_rules', '?')} rules"
            + (f", {model.get('n_linear')} linear terms" if model.get("n_linear") else "")
        ),
        "fire_model_metrics": metrics,
        "mlflow_model": (
            f"a scikit-learn Pipeline (OneHotEncoder of Sex, other columns passed through, "
            f"RandomForestRegressor({', '.join(f'{k}={v!r}' for k, v in FOREST.items())}) - the forest the "
            f"rules come from) on the same abalone table, saved by mlflow.sklearn.save_model with its signature"
        ),
        "mlflow_model_in_process_ms": in_process,
        "routes": results,
    }
    report["summary_saturating"] = summarize_saturating(results)
    if not args.no_paced:
        report["summary_paced"] = summarize_paced(results, offered)
    text = markdown(report)
    print(text)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".md").write_text(text)
        out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
        print(f"written: {out.with_suffix('.md')}, {out.with_suffix('.json')}", file=sys.stderr)


if __name__ == "__main__":
    main()
