"""Ten stability fits as jobs on two workers, against the same fits one after another (issue 38; issue 39's target:
at most 0.6x).

A path job with ``stability_resamples=10`` runs each half-sample fit as a job of its own (kind ``stability_fit``) and
measures the stability of its rules on theirs once they have ended. Each repeat runs the same job (same table,
settings and seed, hence the same halves and rules) side by side:
- on a service with ONE worker: the ten fits run one after another; the sum of the fit jobs' run times (started ->
  finished) is "the fits one after another", what the job spent on them when it ran them itself;
- on a service with TWO workers: the fits spread over both.
The ratio reported is (two workers: the first fit's start to the last fit's end) / (one worker: the fits' summed run
times), and beside it the ratio of the two jobs' end-to-end times (the path and the queue hops included in both).

``--threads N`` runs every worker with FIRE_NUM_THREADS=N (default: numba's, every core: one worker's parallel kernels
already take the machine's cores, so on a machine of two cores a second worker has none of its own).

Usage: python bench/stability_cells.py [--rows 3000] [--fits 10] [--repeats 2] [--threads N]
       [--out bench/results/stability_cells.md]
Writes only under fresh key prefixes and queue names, and removes them at the end.
"""

import argparse
import os
import statistics
import time
from pathlib import Path

import pandas as pd
from service import ELEVATORS, Service  # bench/service.py: the service under test, on its own prefix and queue

FOREST = {"n_estimators": 300, "max_depth": 4, "max_features": "sqrt", "random_state": 0}
PATH = {"n_lambdas": 100, "max_rules": 30, "patience": None, "validation": {"fraction": 0.2, "seed": 0}}


def _warm_up(service: Service, workers: int, csv: bytes, body: dict) -> None:
    """Until every worker has compiled (or loaded) the solver, then a small job of the same kind on another table, so
    that no worker's first job pays for its imports inside the timed one."""
    deadline = time.monotonic() + 300
    while service.http.get("/readyz").json()["workers"] < workers:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{workers} workers did not all become ready")
        time.sleep(0.5)
    small = service.upload(b"\n".join(csv.splitlines()[:301]), "Goal")
    service.run_job({**body, "dataset_id": small["id"], "stability_resamples": 2 * workers})


def stability_job(redis_url: str, workers: int, csv: bytes, body: dict, env: dict) -> dict:
    """One path job with stability fits on a fresh service with ``workers`` workers (``env``: more of their
    environment): its seconds end to end, its fits' summed run seconds and their span, and what it measured."""
    service = Service(redis_url, workers=workers, env=env)
    try:
        _warm_up(service, workers, csv, body)
        dataset = service.upload(csv, "Goal")
        job, seconds = service.run_job({"dataset_id": dataset["id"], **body})
        fits = [service.http.get(f"/v1/jobs/{fit}").json() for fit in job["stability_fits"]]
        result = service.http.get(f"/v1/jobs/{job['id']}/result").json()
    finally:
        service.close()
    assert all(fit["status"] == "succeeded" and fit["kind"] == "stability_fit" for fit in fits)
    return {
        "end_to_end": seconds,
        "fits_one_after_another": sum(fit["finished_at"] - fit["started_at"] for fit in fits),
        "fits_span": max(fit["finished_at"] for fit in fits) - min(fit["started_at"] for fit in fits),
        "own": job["finished_at"] - job["started_at"],
        "dice": result["stability"]["dice"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--redis", default=os.environ.get("FIRE_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument("--rows", type=int, default=3000, help="first rows of elevators used")
    parser.add_argument("--fits", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None, help="FIRE_NUM_THREADS of every worker")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "stability_cells.md")
    args = parser.parse_args()

    csv = pd.read_csv(ELEVATORS).head(args.rows).to_csv(index=False).encode()
    body = {"forest": FOREST, **PATH, "stability_resamples": args.fits}
    env = {} if args.threads is None else {"FIRE_NUM_THREADS": str(args.threads)}
    runs: dict[int, list[dict]] = {1: [], 2: []}
    for _ in range(args.repeats):
        for workers in (1, 2):  # side by side, alternating, so a load change on the machine hits both
            runs[workers].append(stability_job(args.redis, workers, csv, body, env))
    one, two = runs[1], runs[2]
    assert len({run["dice"] for run in one + two}) == 1, "the same job measured different stabilities"

    median = lambda rows, name: statistics.median(row[name] for row in rows)  # noqa: E731
    sequential = median(one, "fits_one_after_another")
    ratio = median(two, "fits_span") / sequential
    lines = [
        f"# {args.fits} stability fits as jobs: two workers against the fits one after another",
        "",
        f"`python bench/stability_cells.py --rows {args.rows} --fits {args.fits} --repeats {args.repeats}"
        + ("" if args.threads is None else f" --threads {args.threads}")
        + f"` ({os.cpu_count()} cores, shared with other processes while it ran, load average "
        f"{os.getloadavg()[0]:.1f} at the end; medians of {args.repeats} runs; FIRE_NUM_THREADS "
        f"{args.threads or 'unset: every core'}).",
        f"Table: the first {args.rows} rows of elevators (target Goal). A path job ({PATH['n_lambdas']} λ, 20% held "
        f"out) whose {args.fits} half-sample fits each train their own forest ({FOREST['n_estimators']} trees of "
        f"depth {FOREST['max_depth']}) and fit a path on their half; the job then fits its own path and measures "
        f"the stability of its rules on the fits' (Dice {one[0]['dice']:.3f} in every run).",
        "",
        "| figure | seconds |",
        "|---|---|",
        f"| one worker: the {args.fits} fit jobs' run times, summed (the fits one after another) | {sequential:.2f} |",
        f"| one worker: the job end to end | {median(one, 'end_to_end'):.2f} |",
        f"| two workers: the first fit's start to the last fit's end | {median(two, 'fits_span'):.2f} |",
        f"| two workers: the job end to end | {median(two, 'end_to_end'):.2f} |",
        f"| the job's own run, its path and the measuring (two workers) | {median(two, 'own'):.2f} |",
        "",
        f"Two workers' fits / the fits one after another: **{ratio:.2f}x** (target ≤ 0.6x: "
        f"{'met' if ratio <= 0.6 else 'missed'}). "
        f"Two workers / one worker, both end to end: {median(two, 'end_to_end') / median(one, 'end_to_end'):.2f}x.",
        "",
        "Per run (one worker: end to end / fits summed; two workers: end to end / fits' span): "
        + "; ".join(
            f"{a['end_to_end']:.2f} / {a['fits_one_after_another']:.2f}; {b['end_to_end']:.2f} / {b['fits_span']:.2f}"
            for a, b in zip(one, two)
        )
        + ".",
        "",
    ]
    report = "\n".join(lines)
    print(report)
    args.out.write_text(report)


if __name__ == "__main__":
    main()
