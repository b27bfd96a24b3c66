"""What counting rows for drift costs single-row scoring (a benchmark, not a test; issue 31's target: at most 5%
fewer requests per second with monitoring on than off, under wrk with 50 connections, in one run).

One service (`fire-rules serve`, one API process, one worker, on the Redis given, under a fresh key prefix): the
abalone path job of bench/scoring_load.py, its selected step promoted twice, as `watched` (monitoring on, the
default) and `unwatched` (``PUT /v1/models/{id}/monitoring {"enabled": false}``: its rows are dropped by the
counting thread, not binned nor written), each with the alias `champion`. Then rounds of wrk runs on the two
aliases' `/predict` in the order A B B A (so that drift in the machine's load falls on both alike), each cycling
through 512 single-row bodies. Reports each side's median requests/s and p99, their ratio, and checks that the
rows the watched model counted (GET /v1/models/{id}/drift) against the requests wrk saw answered: nothing lost
under load.

Usage: python bench/monitoring_overhead.py [--redis redis://127.0.0.1:6379/0] [--rounds 3] [--seconds 10]
       [--clients 50] [--threads 2] [--write]   (--write: bench/results/monitoring_overhead.md)
"""

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import pandas as pd
from scoring_load_runners import ALIAS, N_BODIES, Route, loadavg, prepare_fire, run_wrk, split_body, write_script
from service import ABALONE, Service

RESULTS = Path(__file__).resolve().parent / "results" / "monitoring_overhead.md"


def promote(service: Service, job_id: str, name: str) -> dict:
    model = service.http.post("/v1/models", json={"job_id": job_id, "name": name}).raise_for_status().json()
    service.http.put(f"/v1/registered-models/{name}/aliases/{ALIAS}", json={"version": 1}).raise_for_status()
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10)
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
    ratio = summary["watched"]["rps_median"] / summary["unwatched"]["rps_median"]
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
        f"**Ratio on/off: {ratio:.3f}** ({(1 - ratio) * 100:+.1f}% fewer requests/s with monitoring on; target at "
        f"most 5%). Rows the watched model counted less requests wrk saw answered: "
        f"{summary['watched']['counted'] - served['watched']} (requests in flight when a wrk run stops are scored "
        f"and counted but not seen: between 0 and {args.clients} per run); the unwatched model counted "
        f"{summary['unwatched']['counted']} rows.",
        "",
    ]
    report = "\n".join(lines)
    print(report)
    print(json.dumps(summary))
    if args.write:
        RESULTS.write_text(report)


if __name__ == "__main__":
    main()
