"""What counting rows for drift costs single-row scoring (a benchmark, not a test; issue 31's target: at most 5%
fewer requests per second with monitoring on than off, under wrk with 50 connections, in one run).

One service (`fire-rules serve`, one API process, one worker, on the Redis given, under a fresh key prefix): the
abalone path job of bench/scoring_load.py, its selected step promoted twice, as `watched` (monitoring on, the
default) and `unwatched` (``PUT /v1/models/{id}/monitoring {"enabled": false}``: its rows are dropped by the
counting thread, not binned nor written), each with the alias `champion`. Then rounds of wrk runs on the two
aliases' `/predict` in the order A B B A (so that drift in the machine's load falls on both alike), each cycling
through 512 single-row bodies. Reports each side's median requests/s and p99, the median of the rounds' paired
ratios (on a shared machine the load moves by more than the effect between rounds, much less within one), and
the rows the watched model counted (GET /v1/models/{id}/drift) against the requests wrk saw answered: nothing lost
under load. Then, in this process on the same Redis, the request path's own cost (parsing and scoring a
single-row body, ``score_rows``) with the row counted and without, alternated, and what binning 1,000 queued rows
and adding them to Redis take (the counting thread's work).

Usage: python bench/monitoring_overhead.py [--redis redis://127.0.0.1:6379/0] [--rounds 3] [--seconds 10]
       [--clients 50] [--threads 2] [--write]   (--write: bench/results/monitoring_overhead.md)
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from scoring_load_runners import ALIAS, N_BODIES, Route, loadavg, prepare_fire, run_wrk, split_body, write_script
from service import ABALONE, Service

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "bench" / "results" / "monitoring_overhead.md"


def promote(service: Service, job_id: str, name: str) -> dict:
    model = service.http.post("/v1/models", json={"job_id": job_id, "name": name}).raise_for_status().json()
    service.http.put(f"/v1/registered-models/{name}/aliases/{ALIAS}", json={"version": 1}).raise_for_status()
    return model


def request_path_cost(redis_url: str, prefix: str, body: bytes, n: int = 3000, rounds: int = 6) -> dict:
    """Microseconds per single-row request of parsing and ``score_rows`` with the row counted and without
    (alternated, medians), and milliseconds to bin 1,000 queued rows and to add them to Redis."""
    sys.path.insert(0, str(REPO_ROOT))  # the repository's solver package, not bench/solver.py beside this script
    from app.api.scoring import parse_body  # the service's own code, on the bench service's keys
    from app.core.config import Settings
    from app.core.container import build_core
    from app.core.model_scoring import score_rows
    from app.core.registry import ModelRef

    core = build_core(Settings(redis_url=redis_url, key_prefix=prefix))
    scoring = core.models.scoring_model(ModelRef("watched", alias=ALIAS), "default")

    def per_request(counter) -> float:
        started = time.perf_counter()
        for _ in range(n):
            parsed = parse_body(body, "application/json")
            score_rows(scoring, parsed.read_table, False, 1, None, counter)
        return (time.perf_counter() - started) / n * 1e6

    times: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(rounds):
        times["off"].append(per_request(None))
        times["on"].append(per_request(core.monitor))
    core.monitor.flush()
    for _ in range(1000):
        score_rows(scoring, parse_body(body, "application/json").read_table, False, 1, None, core.monitor)
    started = time.perf_counter()
    core.monitor.drain()
    drained = time.perf_counter()
    core.monitor.flush()
    flushed = time.perf_counter()
    return {
        "us_off": statistics.median(times["off"]),
        "us_on": statistics.median(times["on"]),
        "drain_1000_ms": (drained - started) * 1e3,
        "flush_ms": (flushed - drained) * 1e3,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()

    frame = pd.read_csv(ABALONE).drop(columns=["rings"])
    columns = list(frame.columns)
    bodies = [split_body(columns, row) for row in frame.head(N_BODIES).values.tolist()]
    service = Service(args.redis, workers=1, env={"FIRE_DRIFT_FLUSH_SECONDS": "1"})
    try:
        _, first = prepare_fire(service.http)
        job_id = first["provenance"]["job_id"]
        models = {name: promote(service, job_id, name) for name in ("watched", "unwatched")}
        service.http.put(
            f"/v1/models/{models['unwatched']['id']}/monitoring", json={"enabled": False}
        ).raise_for_status()
        scripts, served = {}, dict.fromkeys(models, 0)
        with tempfile.TemporaryDirectory() as directory:
            for index, name in enumerate(models):
                path = f"/v1/registered-models/{name}/aliases/{ALIAS}/predict"
                route = Route("FIRE", f"{name}: POST {path}", path, "dataframe_split")
                scripts[name] = write_script(Path(directory), index, route, bodies)
            for name in models:  # warm-up, counted as served
                served[name] += run_wrk(service.base, scripts[name], args.threads, args.clients, 2)["requests"]
            runs: dict[str, list[dict]] = {name: [] for name in models}
            for round_index in range(args.rounds):
                order = ["watched", "unwatched"] if round_index % 2 == 0 else ["unwatched", "watched"]
                for name in order:
                    load = loadavg()
                    result = run_wrk(service.base, scripts[name], args.threads, args.clients, args.seconds)
                    result["loadavg_before"] = load
                    runs[name].append(result)
                    served[name] += result["requests"]
                    errors = result["status"] + result["timeout"] + result["connect"] + result["read"]
                    print(
                        f"round {round_index} {name:9s} {result['requests'] / result['duration_us'] * 1e6:8.0f} req/s "
                        f"p99 {result['p99_us'] / 1000:6.1f} ms errors {errors} load {load}",
                        flush=True,
                    )
        time.sleep(3)  # past FIRE_DRIFT_FLUSH_SECONDS: every count in Redis
        counted = {
            name: service.http.get(f"/v1/models/{model['id']}/drift").raise_for_status().json()["rows"]
            for name, model in models.items()
        }
        in_process = request_path_cost(args.redis, service.prefix, bodies[0])
    finally:
        service.close()

    def rps(result: dict) -> float:
        return result["requests"] / result["duration_us"] * 1e6

    summary = {
        name: {
            "rps_median": statistics.median(rps(run) for run in runs[name]),
            "p99_ms_median": statistics.median(run["p99_us"] / 1000 for run in runs[name]),
            "rps_runs": [round(rps(run)) for run in runs[name]],
            "served": served[name],
            "counted": counted[name],
        }
        for name in runs
    }
    paired = [rps(on) / rps(off) for on, off in zip(runs["watched"], runs["unwatched"])]
    ratio = statistics.median(paired)
    lines = [
        "# Monitoring overhead: single-row /predict by alias, drift counting on against off",
        "",
        f"`python bench/monitoring_overhead.py --rounds {args.rounds} --seconds {args.seconds:g} --clients "
        f"{args.clients} --threads {args.threads}`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; one API "
        "process, wrk with a Lua script cycling through 512 single-row `dataframe_split` bodies; rounds in the "
        "order A B B A.",
        "",
        "| model | monitoring | req/s (median) | runs | p99 ms (median) | requests answered | rows counted |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, on in (("watched", "on"), ("unwatched", "off")):
        figures = summary[name]
        lines.append(
            f"| {name} | {on} | {figures['rps_median']:.0f} | {figures['rps_runs']} | {figures['p99_ms_median']:.1f} "
            f"| {figures['served']} | {figures['counted']} |"
        )
    lines += [
        "",
        f"**Ratio on/off, the median of the rounds' paired ratios: {ratio:.3f}** ({(1 - ratio) * 100:+.1f}% fewer "
        f"requests/s with monitoring on; target at most 5%; each round's: {[round(r, 3) for r in paired]}). "
        "Rows the watched model counted less requests wrk saw answered: "
        f"{summary['watched']['counted'] - served['watched']} (requests in flight when a wrk run stops are scored "
        f"and counted but not seen: between 0 and {args.clients} per run); the unwatched model counted "
        f"{summary['unwatched']['counted']} rows.",
        "",
        f"In this process, on the same Redis (alternated, medians of 6 rounds of 3,000): parsing and scoring a "
        f"single-row body takes {in_process['us_on']:.1f} us with the row counted and {in_process['us_off']:.1f} us "
        f"without ({(in_process['us_on'] / in_process['us_off'] - 1) * 100:+.1f}%); the counting thread bins 1,000 "
        f"queued rows in {in_process['drain_1000_ms']:.2f} ms and adds them to Redis in "
        f"{in_process['flush_ms']:.2f} ms.",
        "",
    ]
    report = "\n".join(lines)
    print(report)
    print(json.dumps({**summary, "paired": paired, "in_process": in_process}))
    if args.write:
        RESULTS.write_text(report)


if __name__ == "__main__":
    main()
