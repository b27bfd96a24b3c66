"""Before/after comparison of the FIRE solver: the same path fits with two source trees, side by side in one run.

For a change that should leave the solver's behaviour and speed alone (a refactor). The leaf matrices of a
few representative configurations of ``bench/solver.py`` (250-tree random forests on wind and elevators,
100-step paths, L1 / MCP / MCP+fusion, greedy and cyclic selection) are built once, with the reference
tree's code. Then one worker process per tree imports ``solver`` from its own tree (PYTHONPATH) and fits
the paths it is sent, the first fit of each configuration preceded by an untimed short path so that numba
compilation (or cache loading) stays out of the timings. Every repetition sends every configuration to
both workers back to back, which one first alternating, so both see the same load of a shared machine.
Per configuration it reports the after/before time ratio (median of the per-repetition ratios) and whether
both trees found the same paths: max relative objective difference per step, equal rule counts and equal
passes per step.

Usage (the reference as a git worktree; any folder holding a ``solver`` package will do):
    git worktree add /tmp/solver-before HEAD
    .venv/bin/python bench/compare_solver.py --before /tmp/solver-before [--after .] [--repeats 3] \\
        [--data wind elevators] [--datasets-dir ../shared/datasets] [--out bench/results/gbcd_refactor.md]
        [--setting NAME=VALUE ...] [--after-setting NAME=VALUE ...]
"""

import os
import sys
from pathlib import Path

# bench/solver.py would shadow the solver package: keep this folder off sys.path (workers import `solver`
# from PYTHONPATH, the tree under test)
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.append(str(_HERE.parent))  # last, for bench.machine: `solver` comes from PYTHONPATH or --before first
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import datetime  # noqa: E402
import gzip  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from bench.machine import cpu_model  # noqa: E402

DATASETS = _HERE.parent.parent / "shared" / "datasets"
RESULT = "result: "  # marks the worker's answer lines on its stdout
GAMMA = 1.1
PENALTIES = {"L1": ("l1", 0.0), "MCP": ("mcp", 0.0), "MCP+fusion": ("mcp", 0.5)}
CELLS = (("wind", 3), ("wind", 7), ("elevators", 3), ("elevators", 7))
# cyclic selection is slow: checked on the smallest cell only, on shorter paths
CYCLIC_CELLS = (("wind", 3),)
CYCLIC_N_LAMBDAS = 20


def configs(n_lambdas, names, selections):
    """Every path fit to compare on the datasets ``names``: (cell, penalty label, block selection, lambdas)."""
    greedy = [
        (f"{data}-d{depth}", label, "greedy", n_lambdas)
        for data, depth in CELLS
        if data in names
        for label in PENALTIES
    ]
    cyclic = [
        (f"{data}-d{depth}", label, "cyclic", min(n_lambdas, CYCLIC_N_LAMBDAS))
        for data, depth in CYCLIC_CELLS
        if data in names
        for label in PENALTIES
    ]
    return [config for config in greedy + cyclic if config[2] in selections]


# ---------------------------------------------------------------------------------------------- worker
def fit(matrices, config, n_lambdas, settings):
    from solver import fit_path

    cell, label, selection, _ = config
    matrix, y = matrices[cell]
    penalty, fusion_ratio = PENALTIES[label]
    return fit_path(
        matrix,
        y,
        penalty=penalty,
        gamma=GAMMA,
        mcp_scaling="block",
        fusion_ratio=fusion_ratio,
        n_lambdas=n_lambdas,
        lambda_min_ratio=1e-3,
        block_selection=selection,
        **settings,
    )


def worker(data_dir, settings):
    """Serve path fits with the `solver` of PYTHONPATH: a config (JSON line) in, a result (JSON line) out.

    The first request of a config first runs a short path of it, untimed: numba compiles (or loads its
    cache) there, not in the timed fit.
    """
    import solver
    from solver import LeafMatrix

    matrices, warm = {}, set()
    for line in sys.stdin:
        config = tuple(json.loads(line))
        cell = config[0]
        if cell not in matrices:
            with np.load(Path(data_dir) / f"{cell}.npz") as saved:
                matrices[cell] = LeafMatrix(saved["leaves"], saved["values"], saved["offsets"]), saved["y"]
        if config not in warm:
            fit(matrices, config, 3, settings)
            warm.add(config)
        started, cpu = time.perf_counter(), time.process_time()
        result = fit(matrices, config, config[3], settings)
        record = dict(
            solver=solver.__file__,
            seconds=time.perf_counter() - started,
            cpu=time.process_time() - cpu,
            objectives=[s.objective for s in result.steps],
            rules=[s.n_rules for s in result.steps],
            passes=[s.n_iter for s in result.steps],
            converged=sum(s.converged for s in result.steps),
        )
        print(RESULT + json.dumps(record), flush=True)


class Worker:
    """A worker process on one source tree."""

    def __init__(self, tree, data_dir, settings):
        self.tree = Path(tree).resolve()
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--worker", data_dir, "--fit-settings", json.dumps(settings)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=dict(os.environ, PYTHONPATH=str(self.tree)),
        )

    def fit(self, config):
        self.process.stdin.write(json.dumps(config) + "\n")
        self.process.stdin.flush()
        for line in self.process.stdout:
            if line.startswith(RESULT):
                record = json.loads(line[len(RESULT) :])
                if not Path(record["solver"]).resolve().is_relative_to(self.tree):
                    raise RuntimeError(f"the worker for {self.tree} imported {record['solver']}")
                return record
        raise RuntimeError(f"the worker for {self.tree} died (exit status {self.process.wait()})")

    def close(self):
        self.process.stdin.close()
        self.process.wait()


# ---------------------------------------------------------------------------------------------- driver
def training_rows(path):
    """bench/solver.py's training split: 66 % of the rows (seed 0), y standardised."""
    with gzip.open(path, "rt") as fh:
        data = np.loadtxt(fh, delimiter=",", skiprows=1)
    train = np.random.default_rng(0).permutation(len(data))[: int(round(0.66 * len(data)))]
    X, y = data[train, :-1], data[train, -1]
    return X, (y - y.mean()) / y.std()


def build_matrices(before, out_dir, cells, datasets_dir):
    """Leaf matrices of the ``cells`` (config names), built with the reference tree's code (the same input for
    both trees)."""
    sys.path.insert(0, str(before))
    from sklearn.ensemble import RandomForestRegressor

    from solver import TreeEnsemble, leaf_matrix

    sizes = {}
    for data, depth in sorted(set(CELLS) | set(CYCLIC_CELLS)):
        if f"{data}-d{depth}" not in cells:
            continue
        X, y = training_rows(Path(datasets_dir) / f"{data}.csv.gz")
        forest = RandomForestRegressor(
            n_estimators=250, max_depth=depth, max_features="sqrt", random_state=0, n_jobs=1
        ).fit(X, y)
        matrix = leaf_matrix(TreeEnsemble.from_sklearn(forest), X)
        np.savez(
            Path(out_dir) / f"{data}-d{depth}.npz",
            leaves=matrix.leaves,
            values=matrix.values,
            offsets=matrix.offsets,
            y=y,
        )
        sizes[f"{data}-d{depth}"] = matrix.shape
    return sizes


def tree_version(tree):
    """The tree's git HEAD and uncommitted solver files where it is a checkout, and a digest of its solver."""
    digest = hashlib.md5(b"".join(p.read_bytes() for p in sorted(Path(tree, "solver").glob("*.py")))).hexdigest()
    text = f"`{tree}`: md5 of solver/*.py {digest[:8]}"
    git = ["git", "-C", str(tree)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        dirty = subprocess.run([*git, "status", "--porcelain", "--", "solver"], capture_output=True, text=True)
        changed = " ".join(line.split()[-1] for line in dirty.stdout.splitlines()) or "none"
        text += f", HEAD {head.stdout.strip()}, uncommitted solver files: {changed}"
    return text


def summarize(config_list, records, sizes):
    """One table row per config from ``records[tree][k]``, the list of that config's results over repetitions."""
    rows = []
    for k, config in enumerate(config_list):
        old, new = records["before"][k], records["after"][k]
        f_old, f_new = np.array(old[0]["objectives"]), np.array(new[0]["objectives"])
        same_length = f_old.shape == f_new.shape
        rows.append(
            dict(
                config=config,
                R=sizes[config[0]][1],
                steps=f"{len(f_old)}/{len(f_new)}",
                old=float(np.median([o["seconds"] for o in old])),
                new=float(np.median([n["seconds"] for n in new])),
                ratios=[n["seconds"] / o["seconds"] for o, n in zip(old, new)],
                cpu_ratio=float(np.median([n["cpu"] / o["cpu"] for o, n in zip(old, new)])),
                objective=float(np.max(np.abs(f_new - f_old) / np.abs(f_old))) if same_length else float("nan"),
                rules=same_length and old[0]["rules"] == new[0]["rules"],
                passes=same_length and old[0]["passes"] == new[0]["passes"],
                converged=f"{old[0]['converged']}/{new[0]['converged']}",
                # the solver is deterministic: every repetition of a tree must find the same path
                repeatable=all(r["objectives"] == old[0]["objectives"] for r in old)
                and all(r["objectives"] == new[0]["objectives"] for r in new),
            )
        )
    return rows


def yes_no(flag):
    return "yes" if flag else "**no**"


def report(rows, args, trees, seconds, load_at_start):
    out = [
        "# Solver before/after comparison (`bench/compare_solver.py`)\n",
        f"- date: {datetime.datetime.now().isoformat(timespec='seconds')}",
        f"- command: `python {' '.join(sys.argv)}` (python: {sys.executable})",
        f"- machine: {platform.node()}, {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"numpy {np.__version__}; one thread per library; load average (1 min) {load_at_start:.1f} at the start, "
        f"{os.getloadavg()[0]:.1f} at the end",
        f"- before: {trees[0]}",
        f"- after: {trees[1]}",
        f"- fit_path keywords pinned: both {args.setting or 'none'}, after only {args.after_setting or 'none'}",
        f"- total wall time: {seconds / 60:.1f} min\n",
        f"Paths of {args.n_lambdas} λ (at most {CYCLIC_N_LAMBDAS} with cyclic selection) from λ_max to 1e-3·λ_max, "
        f"tol 1e-4 (fit_path's default), MCP γ = {GAMMA} with the block scaling, fusion λ_f = 0.5·λ_s; 250-tree "
        "random forests as in bench/solver.py. Each tree has "
        "one worker process; a config's first fit in a worker is preceded by an untimed short path (numba "
        f"compilation). {args.repeats} repetitions of every config, before and after back to back, which one "
        "first alternating. Ratio = after/before wall seconds of the whole path: median of the per-repetition "
        "ratios (all of them listed), and the median ratio of CPU seconds (less sensitive to other jobs). "
        "Objective: max over steps of |F_after − F_before| / |F_before|. Rules, passes: equal at every step. "
        "Steps and converged: before/after. Repeatable: each tree found the identical path in every "
        "repetition.\n",
        "| data | R | penalty | selection | steps | before (s) | after (s) | after/before | per repetition | "
        "CPU after/before | max rel. objective diff | rules equal | passes equal | converged | repeatable |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cell, label, selection, _ = r["config"]
        out.append(
            f"| {cell} | {r['R']:,} | {label} | {selection} | {r['steps']} | {r['old']:.2f} | {r['new']:.2f} | "
            f"{np.median(r['ratios']):.3f} | {', '.join(f'{x:.2f}' for x in r['ratios'])} | "
            f"{r['cpu_ratio']:.3f} | {r['objective']:.1e} | {yes_no(r['rules'])} | {yes_no(r['passes'])} | "
            f"{r['converged']} | {yes_no(r['repeatable'])} |"
        )
    total_old = sum(r["old"] for r in rows)
    total_new = sum(r["new"] for r in rows)
    out.append(
        f"\nAll paths (sums of the medians): before {total_old:.1f} s, after {total_new:.1f} s, ratio "
        f"{total_new / total_old:.3f}; median of the per-config ratios "
        f"{np.median([np.median(r['ratios']) for r in rows]):.3f}."
    )
    return "\n".join(out) + "\n"


def keywords(items):
    """``NAME=VALUE`` command-line items as fit_path keywords, VALUE parsed as JSON."""
    return {name: json.loads(value) for name, value in (item.split("=", 1) for item in items)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", type=Path, help="source tree of the reference solver")
    parser.add_argument("--after", type=Path, default=_HERE.parent, help="source tree of the changed solver")
    parser.add_argument("--data", nargs="+", default=["wind", "elevators"], help="datasets of the cells to compare")
    parser.add_argument("--datasets-dir", type=Path, default=DATASETS, help="where <name>.csv.gz are")
    parser.add_argument("--selections", nargs="+", default=["greedy", "cyclic"], help="block selections to compare")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n-lambdas", type=int, default=100)
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a further fit_path keyword for both trees, VALUE as JSON "
        "(e.g. scaling='\"leaf_value\"'): pins a setting whose default differs between the trees",
    )
    parser.add_argument(
        "--after-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a fit_path keyword for the after tree only: a setting the before tree does not know, "
        "pinned to the before tree's behaviour (e.g. min_support=1)",
    )
    parser.add_argument("--out", help="write the markdown table here")
    parser.add_argument("--worker", metavar="DATA_DIR", help=argparse.SUPPRESS)
    parser.add_argument("--fit-settings", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, json.loads(args.fit_settings))
        return
    if args.before is None:
        parser.error("--before is required")

    started, load_at_start = time.perf_counter(), os.getloadavg()[0]
    config_list = configs(args.n_lambdas, args.data, args.selections)
    records = {"before": [[] for _ in config_list], "after": [[] for _ in config_list]}
    with tempfile.TemporaryDirectory() as data_dir:
        sizes = build_matrices(args.before, data_dir, {config[0] for config in config_list}, args.datasets_dir)
        print(f"[{time.perf_counter() - started:6.1f}s] matrices built", flush=True)
        settings = {"before": keywords(args.setting)}
        settings["after"] = {**settings["before"], **keywords(args.after_setting)}
        workers = {name: Worker(getattr(args, name), data_dir, settings[name]) for name in records}
        for rep in range(args.repeats):
            for k, config in enumerate(config_list):
                order = ("before", "after") if (rep + k) % 2 == 0 else ("after", "before")
                for name in order:
                    records[name][k].append(workers[name].fit(config))
                before, after = records["before"][k][-1], records["after"][k][-1]
                print(
                    f"[{time.perf_counter() - started:6.1f}s] repetition {rep + 1} {config}: "
                    f"before {before['seconds']:.2f}s after {after['seconds']:.2f}s",
                    flush=True,
                )
        for each in workers.values():
            each.close()
    rows = summarize(config_list, records, sizes)
    text = report(
        rows, args, (tree_version(args.before), tree_version(args.after)), time.perf_counter() - started, load_at_start
    )
    if args.out:
        Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
