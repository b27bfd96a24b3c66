"""A K-fold cross-validated service job fanned out over two workers, against its folds' paths run one after another.

Issue 29's speed target: with two workers, a 5-fold job finishes in at most 0.6x the time of its five paths run one
after another. Each repeat runs the same job (same table, settings and seed, hence the same folds and rules) side by
side in one run:
- on a service with ONE worker: the folds run one after another, then the parent refits on every row; the sum of
  the fold jobs' run times (started -> finished) is "the five paths one after another";
- on a service with TWO workers: the folds spread over both, then the refit.
The ratio reported is (two-worker job, submission -> succeeded) / (one-worker folds' summed run times), and beside it
the ratio of the two jobs' end-to-end times (the refit and the queue hops included in both). Each fold trains its own
forest from the recipe (a forest of every row saw every fold), so a fold's job is a forest and a path.

Usage: python bench/cv_service.py [--rows 6000] [--folds 5] [--repeats 2] [--out bench/results/cv_service.md]
Writes only under fresh key prefixes and queue names, and removes them at the end.
"""

import argparse
import os
import statistics
import time
from pathlib import Path

import pandas as pd
from service import ELEVATORS, Service  # bench/service.py: the service under test, on its own prefix and queue

FOREST = {"n_estimators": 100, "max_depth": 4, "max_features": "sqrt", "random_state": 0}
PATH = {"n_lambdas": 60, "max_rules": 30, "patience": None, "selection": "1se"}


def cross_validated_job(redis_url: str, workers: int, csv: bytes, body: dict) -> dict:
    """One cross-validated job on a fresh service with ``workers`` workers: its seconds end to end, its folds'
    summed run seconds, and what it chose."""
    service = Service(redis_url, workers=workers)
    try:
        _warm_up(service, workers, csv, body)
        dataset = service.upload(csv, "Goal")
        job, seconds = service.run_job({"dataset_id": dataset["id"], **body})
        folds = [service.http.get(f"/v1/jobs/{cell}").json() for cell in job["cells"]]
        result = service.http.get(f"/v1/jobs/{job['id']}/result").json()
    finally:
        service.close()
    assert all(fold["status"] == "succeeded" for fold in folds)
    return {
        "end_to_end": seconds,
        "folds_one_after_another": sum(fold["finished_at"] - fold["started_at"] for fold in folds),
        "refit": job["finished_at"] - job["started_at"],
        "selected": result["selected"],
    }


def _warm_up(service: Service, workers: int, csv: bytes, body: dict) -> None:
    """Until every worker has compiled (or loaded) the solver, then a small job of the same kind on another table, so
    that no worker's first job pays for its imports inside the timed one."""
    deadline = time.monotonic() + 300
    while service.http.get("/readyz").json()["workers"] < workers:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{workers} workers did not all become ready")
        time.sleep(0.5)
    small = service.upload(b"\n".join(csv.splitlines()[:301]), "Goal")
    service.run_job({**body, "dataset_id": small["id"], "cv_folds": 2 * workers})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--redis", default=os.environ.get("FIRE_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument("--rows", type=int, default=6000, help="first rows of elevators used")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "cv_service.md")
    args = parser.parse_args()

    csv = pd.read_csv(ELEVATORS).head(args.rows).to_csv(index=False).encode()
    body = {"forest": FOREST, **PATH, "cv_folds": args.folds, "validation": {"seed": 0}}
    runs: dict[int, list[dict]] = {1: [], 2: []}
    for _ in range(args.repeats):
        for workers in (1, 2):  # side by side, alternating, so a load change on the machine hits both
            runs[workers].append(cross_validated_job(args.redis, workers, csv, body))
    one, two = runs[1], runs[2]
    assert len({run["selected"] for run in one + two}) == 1, "the same job chose different steps"

    median = lambda rows, name: statistics.median(row[name] for row in rows)  # noqa: E731
    sequential = median(one, "folds_one_after_another")
    ratio = median(two, "end_to_end") / sequential
    lines = [
        f"# {args.folds}-fold cross-validated service job: two workers against the folds one after another",
        "",
        f"`python bench/cv_service.py --rows {args.rows} --folds {args.folds} --repeats {args.repeats}` "
        f"({os.cpu_count()} cores, shared with other processes while it ran; medians of {args.repeats} runs).",
        f"Table: the first {args.rows} rows of elevators (target Goal). Each fold trains its own forest "
        f"({FOREST['n_estimators']} trees of depth {FOREST['max_depth']}) and fits a path of "
        f"{PATH['n_lambdas']} λ; the parent refits on every row.",
        "",
        "| figure | seconds |",
        "|---|---|",
        f"| one worker: the {args.folds} fold jobs' run times, summed (the paths one after another) | "
        f"{sequential:.2f} |",
        f"| one worker: the job end to end (folds, then the refit) | {median(one, 'end_to_end'):.2f} |",
        f"| two workers: the job end to end | {median(two, 'end_to_end'):.2f} |",
        f"| the parent's refit (two workers) | {median(two, 'refit'):.2f} |",
        "",
        f"Two workers / the folds one after another: **{ratio:.2f}x** (target ≤ 0.6x: "
        f"{'met' if ratio <= 0.6 else 'missed'}). "
        f"Two workers / one worker, both end to end: {median(two, 'end_to_end') / median(one, 'end_to_end'):.2f}x.",
        "",
        "Per run (one worker end to end / folds summed; two workers end to end): "
        + "; ".join(
            f"{a['end_to_end']:.2f} / {a['folds_one_after_another']:.2f}; {b['end_to_end']:.2f}"
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
