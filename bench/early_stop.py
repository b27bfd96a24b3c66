"""A path that stops when it is done (PathSpec.patience) against the whole grid, on the service's default job
(no rule budget, the default 50 lambdas down to 1e-3 lambda_max) on elevators with a forest of 300 trees of depth 6
(issue 20: 110 s and 3,224 rules at the last step, the selected step at 78 of 100): time, steps, the selected step
and its rules, side by side in one run, the forest and leaf matrix shared.

Usage: python bench/early_stop.py [--tables elevators wind] [--out bench/results/early_stop.md]
Reads ../shared/datasets (benchmarks only).
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path[:] = [str(REPO)] + [p for p in sys.path if Path(p or ".").resolve() != REPO / "bench"]  # bench/solver.py

from solver import ForestSpec, PathSpec, TableEncoding, fit_rules  # noqa: E402
from solver.fitting import holdout_split  # noqa: E402

SHARED = REPO.parent / "shared" / "datasets"
FOREST = ForestSpec(n_estimators=300, max_depth=6)


def run(table: str) -> list[dict]:
    frame = pd.read_csv(SHARED / f"{table}.csv.gz")
    target = frame.columns[-1]
    encoding = TableEncoding.infer(frame.drop(columns=target))
    X, y = encoding.encode_frame(frame.drop(columns=target)), frame[target].to_numpy(dtype=float)
    train, val = holdout_split(len(y), PathSpec().validation_fraction, PathSpec().random_state)
    rows = []
    for patience in (None, PathSpec().patience):
        spec = PathSpec(patience=patience)
        started = time.perf_counter()
        fit = fit_rules(X[train], y[train], spec, forest=FOREST, X_val=X[val], y_val=y[val], encoding=encoding)
        seconds = time.perf_counter() - started
        steps, chosen = fit.path.steps, fit.path.steps[fit.selected]
        rows.append(
            {
                "table": table,
                "patience": patience,
                "seconds": seconds,
                "path_seconds": sum(step.seconds for step in steps),
                "steps": len(steps),
                "stop_reason": fit.path.stop_reason,
                "last_rules": steps[-1].n_rules,
                "selected": fit.selected,
                "selected_rules": chosen.n_rules,
                "selected_val_loss": chosen.val_loss,
                "rules_json": fit.rules.to_dict(),
            }
        )
    whole, stopped = rows
    stopped["same_selection"] = (
        stopped["selected"] == whole["selected"] and stopped["rules_json"] == whole["rules_json"]
    )
    return rows


def markdown(rows: list[dict]) -> str:
    lines = [
        "# A path that stops when it is done (issue 20, item 4)",
        "",
        "`python bench/early_stop.py`: the service's default path job (no rule budget, 50 lambdas to "
        "1e-3 lambda_max, MCP with fusion 0.5, linear terms) on a random forest of 300 trees of depth 6 fitted on the "
        "training rows (80%, seed 0), validation on the other 20%; `patience=None` (the whole grid) beside the "
        f"default patience {PathSpec().patience} in one run. Path seconds are the steps' own (no forest, no matrix).",
        "",
        "| table | patience | steps | stopped by | rules at the last step | path s | fit s | selected step | its rules "
        "| its validation loss | same selection and rules |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['table']} | {row['patience']} | {row['steps']} | {row['stop_reason']} | {row['last_rules']} | "
            f"{row['path_seconds']:.1f} | {row['seconds']:.1f} | {row['selected']} | {row['selected_rules']} | "
            f"{row['selected_val_loss']:.6g} | {row.get('same_selection', '—')} |"
        )
    for whole, stopped in zip(rows[::2], rows[1::2]):
        lines.append("")
        lines.append(
            f"{whole['table']}: the stopped path took {stopped['path_seconds'] / whole['path_seconds']:.0%} of the "
            f"whole grid's path time ({stopped['steps']} of {whole['steps']} steps), same selected step and rules: "
            f"{stopped['same_selection']}."
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", nargs="+", default=["elevators"])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "early_stop.md")
    args = parser.parse_args()
    np.seterr(all="ignore")
    rows = [row for table in args.tables for row in run(table)]
    text = markdown(rows)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
