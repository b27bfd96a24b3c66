"""The Poisson loss: the library's direct GBCD against a proximal-Newton (IRLS) outer loop, one run, side by side.

Direct (``solver.gbcd``, the library's): every leaf and fused-tree update minimises the exact Poisson loss of the
rows it touches (a sum of one exponential per leaf), so no curvature bound is needed. IRLS (the alternative the
issue names): at each outer step the weighted least-squares model of the loss at the current scores (weights
``s mu``, working response ``eta + (y - mu) / mu``) is solved by the library's squared-loss GBCD, warm-started, with
the same penalties (MCP's concavities fixed as the direct solver fixes them, at the intercept-only curvature), then
a halving line search on the true objective; outer steps stop when the objective improves by less than 1e-9
relative or after 100. Both run the same lambda grid (30 steps to 1e-2 lambda_max) on the same M (a 250-tree depth-3
random forest on nmes1988_visits and doctor_visits, unit-norm columns, min_support 1%), per penalty setting: time
and objective at each step (the objective of the same function, ``solver.gbcd.objective_value`` on the Poisson
problem).

    PYTHONPATH=. python bench/poisson_solvers.py
"""

from __future__ import annotations

import sys
import time
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestRegressor

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from solver import TableEncoding, TreeEnsemble, gbcd, leaf_matrix  # noqa: E402
from solver.losses import LOSSES, newton  # noqa: E402
from solver.path import lambda_grid  # noqa: E402
from solver.problem import Problem, State  # noqa: E402

DATA_DIR = REPO.parent / "shared" / "datasets" / "counts"
TABLES = ("nmes1988_visits", "doctor_visits")
SETTINGS = {"L1": ("l1", 0.0), "MCP": ("mcp", 0.0), "MCP + fusion 0.5": ("mcp", 0.5)}
N_STEPS, MIN_RATIO, TOL, MAX_ITER = 30, 1e-2, 1e-4, 10_000


def load(name):
    frame = pd.read_csv(DATA_DIR / f"{name}.csv.gz")
    features = frame.iloc[:, :-1]
    return TableEncoding.infer(features).encode_frame(features), frame.iloc[:, -1].to_numpy(dtype=np.float64)


def problems(X, y, penalty):
    forest = TreeEnsemble.from_sklearn(
        RandomForestRegressor(n_estimators=250, max_depth=3, max_features="sqrt", random_state=0).fit(X, y)
    )
    matrix = leaf_matrix(forest, X).without_small_leaves(int(np.ceil(0.01 * len(y))))
    unit, _ = matrix.unit_columns()
    return Problem.from_leaf_matrix(unit, y, np.ones(len(y)), "poisson", penalty, 1.1, "block")


def direct_path(problem, grid, ratio):
    state = State.initial(problem)
    rows = []
    for lam in grid:
        started = time.perf_counter()
        gbcd.solve_greedy(problem, state, lam, ratio * lam, TOL * grid[0], MAX_ITER, 3)
        rows.append((time.perf_counter() - started, gbcd.objective_value(problem, state, lam, ratio * lam)))
    return rows


def irls_path(problem, grid, ratio, certify=False):
    """Proximal Newton (``solver.losses.newton.newton_steps``) at each lambda; with ``certify``, then the direct
    GBCD until stationary on the Poisson objective (``solver.losses.newton.solve``, what L1 paths run)."""
    state = State.initial(problem)
    run = partial(
        newton.solve if certify else newton.newton_steps,
        loss=LOSSES["poisson"],
        inner_solve=gbcd.solve_greedy,
        objective=gbcd.objective_value,
    )
    rows = []
    for lam in grid:
        started = time.perf_counter()
        run(problem, state, lam, ratio * lam, TOL * grid[0], MAX_ITER, 3)
        rows.append((time.perf_counter() - started, gbcd.objective_value(problem, state, lam, ratio * lam)))
    return rows


def main():
    lines = [
        "# Poisson paths: direct GBCD (the library) vs proximal Newton (IRLS)",
        "",
        f"`PYTHONPATH=. python bench/poisson_solvers.py`, {time.strftime('%Y-%m-%d')}, this shared 2-core machine "
        "(seconds are loaded ones: compare within a row). Same M, same grid, same tolerance; objective ratio = "
        "IRLS / direct at each step (median and worst over the 30 steps).",
        "",
        "| table | penalty | direct s | IRLS s | IRLS / direct time | objective ratio median | worst | IRLS then "
        "direct until stationary s | / direct time | its worst objective ratio |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for table in TABLES:
        X, y = load(table)
        for label, (penalty, ratio) in SETTINGS.items():
            problem = problems(X, y, penalty)
            lambda_max = gbcd.lambda_max(problem, State.initial(problem))
            grid = lambda_grid(lambda_max, N_STEPS, MIN_RATIO)
            direct_path(problem, grid[:2], ratio)  # compile
            irls_path(problem, grid[:2], ratio)
            direct = direct_path(problem, grid, ratio)
            irls = irls_path(problem, grid, ratio)
            hybrid = irls_path(problem, grid, ratio, certify=True)
            t_direct, t_irls = sum(r[0] for r in direct), sum(r[0] for r in irls)
            t_hybrid = sum(r[0] for r in hybrid)
            hybrid_ratios = np.array([b[1] / a[1] for a, b in zip(direct, hybrid)])
            ratios = np.array([b[1] / a[1] for a, b in zip(direct, irls)])
            lines.append(
                f"| {table} | {label} | {t_direct:.2f} | {t_irls:.2f} | {t_irls / t_direct:.1f}x | "
                f"{np.median(ratios):.5f} | {ratios.max():.5f} | {t_hybrid:.2f} | {t_hybrid / t_direct:.1f}x | "
                f"{hybrid_ratios.max():.5f} |"
            )
            print(lines[-1], flush=True)
    out = REPO / "bench" / "results" / "poisson_solvers.md"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
