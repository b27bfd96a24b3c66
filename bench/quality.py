"""Rule quality of FIRE against the L1 path, imodels RuleFit, SIRUS, GLRM and the full forest (issues 4, 9 and 18).

Protocol (the paper's, sections 5-6 and its supplement):
- the seven datasets in ../shared/datasets (target = last column; abalone's categorical ``Sex`` one-hot);
- ``--splits`` repeated random train / validation / test splits (50 / 16 / 34, seeded), y standardized on
  the training split, every error a test MSE on that scale;
- a RandomForestRegressor of 500 trees, max_depth=3, max_features='sqrt' (seeded) for the headline
  comparison, plus depth 5 and 7 for the rule-budget sweep;
- every method tuned on the validation split (the step of its path with the lowest validation MSE within
  the budget; imodels' max_rules on a small grid) and scored once on test.

Every path's columns are the method's candidate terms (``solver.fitting.candidate_terms``: leaves or every node,
``max_rule_length``, linear terms of the numeric columns, the one-hot columns of a text column left out, as the
estimator and the service build them), and every error is reported with its terms (rules + linear terms), linear
terms, antecedents (distinct internal nodes of the selected rules) and longest rule (most conditions).

Methods on the depth-3 forest (all paths: n_lambdas=50, tol=1e-4, early stop at ``--path-rules`` terms),
``MAIN_METHODS``: the library's defaults (``fire``: leaves + linear terms), the former defaults without linear
terms (``fire_leaves``), rules from every node (``fire_nodes``), nodes capped at two conditions with linear terms
(``fire_nodes_len2``) and without (``fire_nodes_len2_nolinear``), the documented readable setting
(``fire_readable``, ``solver.spec.READABLE``), the paper's MCP only (``mcp``: leaf-value columns, no min_support, no
polish, no fusion, leaves, no linear terms) and the L1 path (``l1``, RuleFit's problem on the same forest); rule
learners with their own trees (``BASELINES``): imodels RuleFit, SIRUS (``sirus``), GLRM with debiasing
(``aix360``, on ``glrm_splits`` splits); and the full forest. ``INVESTIGATE_METHODS`` (first ``investigate_splits``
splits; ``--no-investigate`` skips them) try one more setting each. Issue 18's targets (point 5, and point 3:
the readable setting against MCP alone, per table) head the report.

Usage::

    PYTHONPATH=. python bench/quality.py            # full run, writes bench/results/quality.md and .png
    PYTHONPATH=. python bench/quality.py --quick    # 2 datasets, 1 split, 100 trees: under a minute
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# bench/ holds a solver.py (the speed benchmark): make sure "solver" is the package, not that script
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO_ROOT / "bench"]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.machine import solver_commit  # noqa: E402
from bench.quality_methods import QUICK_DATASETS, Config, load_dataset, run_split  # noqa: E402
from bench.quality_report import RESULTS_DIR, plot_sweep, render_markdown, summarize  # noqa: E402


def evaluate(cfg: Config, log=print):
    """All datasets x splits; returns the raw records plus the summary (see :func:`summarize`)."""
    started = time.perf_counter()
    solver_version = solver_commit()  # the solver is being tuned: record which one produced the numbers
    records = []
    for name in cfg.datasets:
        X, y, _, encoding = load_dataset(name, cfg.data_dir)
        for seed in range(cfg.n_splits):
            records.append(run_split(name, X, y, encoding, seed, cfg, log))
            log(f"{name} split {seed} done at {time.perf_counter() - started:.0f}s")
    report = {
        "config": {k: (str(v) if isinstance(v, Path) else v) for k, v in cfg.__dict__.items()},
        "records": records,
        "seconds": time.perf_counter() - started,
        "solver_version": solver_version,
    }
    report["summary"] = summarize(records, cfg)
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2 datasets, 1 split, 100 trees (under a minute)")
    parser.add_argument("--datasets", nargs="*", default=None)
    parser.add_argument("--splits", type=int, default=None)
    parser.add_argument("--trees", type=int, default=None)
    parser.add_argument("--depths", type=int, nargs="*", default=None, help="forest depths (3 must be one)")
    parser.add_argument("--n-jobs", type=int, default=None, help="forest training threads (default 2)")
    parser.add_argument("--no-investigate", action="store_true")
    parser.add_argument(
        "--out", default=None, help="markdown report (default bench/results/quality.md; --quick: a temporary directory)"
    )
    parser.add_argument("--json", default=None, help="also dump the raw records here")
    parser.add_argument("--notes", default=None, help="markdown file appended to the report")
    parser.add_argument(
        "--render", default=None, metavar="JSON", help="no evaluation: re-render the report and plot from a --json dump"
    )
    args = parser.parse_args(argv)

    cfg = Config()
    if args.quick:
        cfg = Config(
            datasets=QUICK_DATASETS, n_splits=1, n_trees=100, rulefit_trees=50, rulefit_grid=(5, 14), investigate=False
        )
    if args.datasets:
        cfg.datasets = tuple(args.datasets)
    if args.splits is not None:
        cfg.n_splits = args.splits
    if args.trees is not None:
        cfg.n_trees = args.trees
    if args.depths:
        cfg.depths = tuple(args.depths)
    if args.n_jobs is not None:
        cfg.n_jobs = args.n_jobs
    if args.no_investigate:
        cfg.investigate = False
    if args.out:
        out = Path(args.out)
    elif args.quick:  # smoke runs never overwrite the committed report
        out = Path(tempfile.gettempdir()) / "fire_quality_quick" / "quality.md"
    else:
        out = RESULTS_DIR / "quality.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    plot = out.with_name(out.stem + "_budget.png")  # quality.md -> quality_budget.png

    if args.render:
        report = json.loads(Path(args.render).read_text())
        report["summary"] = summarize(
            report["records"],
            Config(
                **{
                    k: (tuple(v) if isinstance(v, list) else v)
                    for k, v in report["config"].items()
                    if k in Config.__dataclass_fields__ and k != "data_dir"
                }
            ),
        )
    else:
        report = evaluate(cfg, log=lambda msg: print(msg, flush=True))
    if args.notes:
        report["notes"] = Path(args.notes).read_text()
    shown = [a for a in (argv if argv is not None else sys.argv[1:]) if not a.startswith("--json")]
    command = "PYTHONPATH=. python bench/quality.py" + "".join(f" {a}" for a in shown if a not in (args.json,))
    if args.render:
        command = report.get("command", command)
    report["command"] = command
    plot_sweep(report["summary"], plot, report["config"].get("n_trees", 500))
    out.write_text(render_markdown(report, plot.name, command))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=float))
    t = report["summary"]["targets"]
    print(json.dumps(t, indent=1, default=float))
    print(f"wrote {out} and {plot} in {report['seconds']:.0f}s")


if __name__ == "__main__":
    main()
