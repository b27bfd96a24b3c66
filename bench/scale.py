"""Issue 20's scaling targets side by side in one run: rows, cores, peak memory, and the fused tail.

Every configuration runs in its own fresh Python subprocess (this file with ``--child``), so its thread count and
its peak memory are its own. The child runs with FIRE_NUM_THREADS=k (the library sets numba's thread count from
it; OMP/OPENBLAS/MKL_NUM_THREADS=k as well, NUMBA_NUM_THREADS removed so that nothing caps it), builds its data,
warms the kernels in-process on a few rows, times the measured calls and prints one JSON line; the parent collects
them. One tiny warm-up child runs first so that numba's compilation lands in its on-disk cache, not in a timing.

1. Rows and cores: make_friedman1(n_samples=n, n_features=10, noise=1.0, random_state=0), y standardized; one
   RandomForestRegressor(500 trees, max_depth 5, max_features='sqrt', random_state=0) fitted in the parent on the
   first 20,000 rows of the largest size and handed to the children as its fire-forest JSON document
   (TreeEnsemble.to_dict / from_dict). Per child: seconds of solver.leaf_matrix(forest, X) and of
   solver.fit_path(matrix, y, max_rules=50) (library defaults otherwise), steps, rules at the last step, stop
   reason, peak RSS (getrusage ru_maxrss of the child). Sizes 1e5 and 1e6, threads 1 and 2 by default.
2. Fused tail: wind (all 6,574 rows, y standardized), RandomForestRegressor(250 trees, max_depth 3,
   max_features='sqrt', random_state=0); full 100-step paths fit_path(matrix, y, max_rules=None, n_lambdas=100,
   fusion_ratio=f) for f in 0 (MCP alone), 0.5 and 1, one thread: seconds, passes (sum of PathStep.n_iter),
   steps not converged, ratio to MCP alone.

Targets (issue 20): 1e6 rows to 50 rules <= 90 s with the leaf matrix; time(1e6) / time(1e5) <= 12 at the same
thread count; 2 threads >= 1.6x 1 thread at 1e6 rows; peak memory <= 4 GiB at 1e6 rows; the fused path
(fusion 1) <= 2x MCP alone.

Usage: python bench/scale.py [--quick] [--sizes 100000 1000000] [--threads 1 2 4 8 16] [--skip-rows]
       [--skip-tail] [--repeats 1] [--out-dir bench/results]
--quick: sizes 20,000 and 50,000, forests of 100 trees (rows) and 50 trees (tail); under 2 minutes.
Reads ../shared/datasets (benchmarks only). Writes scale.md and scale.json in --out-dir.
"""

import os
import sys
from pathlib import Path

# bench/solver.py would shadow the `solver` package: keep bench/ off sys.path, the repository on it
REPO = Path(__file__).resolve().parents[1]
sys.path[:] = [str(REPO)] + [p for p in sys.path if Path(p or ".").resolve() not in (REPO / "bench", REPO)]

import argparse  # noqa: E402
import datetime  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import shlex  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402

import numpy as np  # noqa: E402

from bench.machine import cpu_model, gib, git, memory_bytes, status_bytes  # noqa: E402

SHARED = REPO.parent / "shared" / "datasets"
MARKER = "SCALE_RESULT "
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

ROWS_TREES, ROWS_DEPTH, ROWS_FIT = 500, 5, 20_000
MAX_RULES = 50
TAIL_TABLE, TAIL_TREES, TAIL_DEPTH, TAIL_LAMBDAS = "wind", 250, 3, 100
FUSIONS = (0.0, 0.5, 1.0)

TARGET_SECONDS = 90.0  # 1e6 rows to 50 rules, leaf matrix included
TARGET_ROW_RATIO = 12.0  # time(1e6) / time(1e5)
TARGET_SPEEDUP = 1.6  # 2 threads against 1, at 1e6 rows
TARGET_PEAK = 4 * 2**30  # bytes, at 1e6 rows
TARGET_FUSED = 2.0  # fusion 1 against MCP alone
BIG, SMALL = 1_000_000, 100_000


# ---------------------------------------------------------------------------------------------- helpers
def friedman(n):
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(n_samples=n, n_features=10, noise=1.0, random_state=0)
    return X, (y - y.mean()) / y.std()


def load_table(name):
    """(X, standardized y) of a shared table, text columns encoded as the library encodes them."""
    import pandas as pd

    from solver import TableEncoding

    frame = pd.read_csv(SHARED / f"{name}.csv.gz")
    target = frame.columns[-1]
    features = frame.drop(columns=target)
    X = TableEncoding.infer(features).encode_frame(features)
    y = frame[target].to_numpy(dtype=float)
    return np.asarray(X, dtype=np.float64), (y - y.mean()) / y.std()


def load_forest(path):
    from solver import TreeEnsemble

    with open(path) as fh:
        return TreeEnsemble.from_dict(json.load(fh))


# ---------------------------------------------------------------------------------------------- child
def threading_report():
    """numba's threading layer and thread count, after the run. ``layer_by_run``: the run itself had started
    numba's threads (a parallel kernel, or the library's set_num_threads); otherwise they are started here only
    to name the layer numba would pick."""
    import numba

    try:
        layer, by_run = numba.threading_layer(), True
    except ValueError:
        by_run = False
    threads = numba.get_num_threads()  # starts the threads if nothing did
    if not by_run:
        layer = numba.threading_layer()
    return {
        "threading_layer": layer,
        "layer_by_run": by_run,
        "numba_threads": threads,
        "numba_config_threads": numba.config.NUMBA_NUM_THREADS,
        "numba_version": numba.__version__,
    }


def child_rows(config):
    from solver import fit_path, leaf_matrix

    X, y = friedman(config["n"])
    forest = load_forest(config["forest"])
    # in-process warm-up on a few rows: kernels loaded from numba's cache (or compiled) outside the timings
    warm = min(2_000, len(y))
    fit_path(leaf_matrix(forest, X[:warm]), y[:warm], max_rules=5, n_lambdas=10)
    gc.collect()
    rss_before = status_bytes("VmRSS")
    started = time.perf_counter()
    matrix = leaf_matrix(forest, X)
    build = time.perf_counter() - started
    started = time.perf_counter()
    result = fit_path(matrix, y, max_rules=config["max_rules"])
    path = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    return {
        **path_figures(result, forest, build, path, peak),
        "total_s": build + path,
        "leaves_bytes": int(matrix.leaves.nbytes),
        "rss_before_bytes": rss_before,
    }


def child_tail(config):
    from solver import fit_path, leaf_matrix

    X, y = load_table(config["table"])
    forest = load_forest(config["forest"])
    settings = dict(max_rules=None, fusion_ratio=config["fusion"])
    fit_path(leaf_matrix(forest, X[:500]), y[:500], n_lambdas=5, **settings)  # in-process warm-up
    gc.collect()
    started = time.perf_counter()
    matrix = leaf_matrix(forest, X)
    build = time.perf_counter() - started
    started = time.perf_counter()
    result = fit_path(matrix, y, n_lambdas=config["n_lambdas"], **settings)
    path = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return path_figures(result, forest, build, path, peak)


def path_figures(result, forest, build, path, peak):
    """What every measured child reports of its path."""
    steps = result.steps
    return {
        "build_s": build,
        "path_s": path,
        "steps": len(steps),
        "rules": steps[-1].n_rules,
        "stop_reason": result.stop_reason,
        "nonconverged": sum(not s.converged for s in steps),
        "passes": sum(s.n_iter for s in steps),
        "slowest_step_s": max(s.seconds for s in steps),
        "R": int(forest.n_leaves),
        "peak_rss_bytes": peak,
    }


def child_warmup(config):
    """Compile (or load) every kernel the measured children use, on a few rows."""
    from solver import fit_path, leaf_matrix

    started = time.perf_counter()
    if config.get("rows_forest"):
        X, y = friedman(2_000)
        fit_path(leaf_matrix(load_forest(config["rows_forest"]), X), y, max_rules=10, n_lambdas=10)
    if config.get("tail_forest"):
        X, y = load_table(config["table"])
        matrix = leaf_matrix(load_forest(config["tail_forest"]), X[:500])
        for fusion in FUSIONS:
            fit_path(matrix, y[:500], max_rules=None, n_lambdas=5, fusion_ratio=fusion)
    return {"seconds": time.perf_counter() - started}


def child_main(text):
    config = json.loads(text)
    np.seterr(all="ignore")
    work = {"rows": child_rows, "tail": child_tail, "warmup": child_warmup}[config["kind"]]
    figures = work(config)
    figures |= threading_report()
    figures["fire_num_threads"] = os.environ.get("FIRE_NUM_THREADS")
    figures["load_average_after"] = os.getloadavg()[0]  # other jobs on the machine during the run
    print(MARKER + json.dumps(figures), flush=True)


# ---------------------------------------------------------------------------------------------- parent
def child_env(threads):
    env = os.environ.copy()
    env["FIRE_NUM_THREADS"] = str(threads)
    for name in THREAD_VARIABLES:
        env[name] = str(threads)
    env.pop("NUMBA_NUM_THREADS", None)
    return env


def run_child(config, threads, timeout):
    """The child's figures, or {'error': ...} when it failed or ran past ``timeout`` seconds."""
    command = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(config)]
    started = time.perf_counter()
    try:
        done = subprocess.run(
            command, env=child_env(threads), cwd=REPO, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {
            "error": f"timed out after {timeout:.0f} s",
            "timed_out": True,
            "timeout_s": timeout,
            "wall_s": time.perf_counter() - started,
        }
    wall = time.perf_counter() - started
    for line in done.stdout.splitlines():
        if line.startswith(MARKER):
            return json.loads(line[len(MARKER) :]) | {"wall_s": wall}
    tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
    return {"error": f"exit status {done.returncode}: " + " | ".join(tail), "wall_s": wall}


def fit_forest(X, y, n_trees, depth, path):
    """RandomForestRegressor(max_features='sqrt', random_state=0) as a fire-forest JSON file; the round trip is
    checked against scikit-learn's predictions."""
    from sklearn.ensemble import RandomForestRegressor

    from solver import TreeEnsemble

    rf = RandomForestRegressor(
        n_estimators=n_trees, max_depth=depth, max_features="sqrt", random_state=0, n_jobs=-1
    ).fit(X, y)
    document = TreeEnsemble.from_sklearn(rf).to_dict()
    Path(path).write_text(json.dumps(document))
    rows = X[:1000]
    gap = float(np.max(np.abs(load_forest(path).predict(rows) - rf.predict(rows))))
    if gap > 1e-6:
        raise RuntimeError(f"the forest's JSON round trip predicts {gap:.2e} away from scikit-learn")
    return rf


def machine():
    cpu = cpu_model(platform.processor() or "?")
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    import numba
    import sklearn

    return {
        "host": platform.node(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "memory_bytes": memory_bytes(),
        "load_average": list(os.getloadavg()),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "sklearn": sklearn.__version__,
    }


def solver_version():
    head, dirty = git("rev-parse", "--short", "HEAD"), git("status", "--porcelain", "--", "solver")
    if head is None or dirty is None:
        return "?"
    return f"HEAD {head or '?'}, solver/ {'with uncommitted changes' if dirty else 'clean'}"


def best_of(runs, key):
    """The fastest of a configuration's repeats (by ``key``), or its first failure when all failed."""
    good = [r for r in runs if "error" not in r]
    return min(good, key=lambda r: r[key]) if good else runs[0]


# ---------------------------------------------------------------------------------------------- targets
def target(name, status, figure):
    return {"target": name, "status": status, "figure": figure}


def rows_targets(rows, threads):
    """Each target of part 1 with its figure: met / missed / not measured."""
    found = {(r["n"], r["threads"]): r for r in rows if "error" not in r}
    sizes = sorted({r["n"] for r in rows})
    largest = sizes[-1] if sizes else None
    out = []

    name = f"{BIG:,} rows to {MAX_RULES} rules ≤ {TARGET_SECONDS:.0f} s, leaf matrix included"
    measured = [(k, found[(BIG, k)]) for k in threads if (BIG, k) in found]
    failed = [r for r in rows if r["n"] == BIG and "error" in r]
    for k, r in measured:
        ok = r["total_s"] <= TARGET_SECONDS
        out.append(
            target(
                f"{name} ({k} thread{'s' * (k > 1)})",
                "met" if ok else "missed",
                f"{r['total_s']:.1f} s (leaf matrix {r['build_s']:.1f} s + path {r['path_s']:.1f} s; "
                f"{r['rules']} rules, stop {r['stop_reason']})",
            )
        )
    for r in failed:  # a child past its timeout (far above the target) missed it; another failure measured nothing
        out.append(
            target(
                f"{name} ({r['threads']} thread{'s' * (r['threads'] > 1)})",
                "missed" if r.get("timed_out") and r["timeout_s"] > TARGET_SECONDS else "not measured",
                f"child failed: {r['error']}",
            )
        )
    if not measured and not failed:
        out.append(target(name, "not measured", f"no {BIG:,}-row run in this one"))

    name = f"time({BIG:,}) / time({SMALL:,}) ≤ {TARGET_ROW_RATIO:g} at the same thread count"
    pairs = [(k, found[(BIG, k)], found[(SMALL, k)]) for k in threads if (BIG, k) in found and (SMALL, k) in found]
    if pairs:
        for k, big, small in pairs:
            ratio = big["total_s"] / small["total_s"]
            out.append(
                target(
                    f"{name} ({k} thread{'s' * (k > 1)})",
                    "met" if ratio <= TARGET_ROW_RATIO else "missed",
                    f"{ratio:.2f} ({big['total_s']:.1f} s / {small['total_s']:.2f} s)",
                )
            )
    else:
        info = ""
        if len(sizes) >= 2:
            lo, hi = sizes[0], sizes[-1]
            ratios = [
                f"{k} thr. {found[(hi, k)]['total_s'] / found[(lo, k)]['total_s']:.2f}"
                for k in threads
                if (lo, k) in found and (hi, k) in found
            ]
            if ratios:
                info = f"; for information time({hi:,}) / time({lo:,}) (rows ×{hi / lo:g}): " + ", ".join(ratios)
        out.append(target(name, "not measured", f"needs {SMALL:,} and {BIG:,} rows{info}"))

    name = f"2 threads ≥ {TARGET_SPEEDUP:g}× 1 thread at {BIG:,} rows"
    if (BIG, 1) in found and (BIG, 2) in found:
        speedup = found[(BIG, 1)]["total_s"] / found[(BIG, 2)]["total_s"]
        more = ", ".join(
            f"{k} thr. {found[(BIG, 1)]['total_s'] / found[(BIG, k)]['total_s']:.2f}×"
            for k in threads
            if k > 2 and (BIG, k) in found
        )
        out.append(
            target(
                name,
                "met" if speedup >= TARGET_SPEEDUP else "missed",
                f"{speedup:.2f}×" + (f" (and {more})" if more else "") + threads_caveat(found, BIG, threads),
            )
        )
    else:
        info = ""
        if largest is not None and (largest, 1) in found and (largest, 2) in found:
            info = (
                f"; for information at {largest:,} rows: "
                f"{found[(largest, 1)]['total_s'] / found[(largest, 2)]['total_s']:.2f}×"
                + threads_caveat(found, largest, threads)
            )
        out.append(target(name, "not measured", f"needs 1 and 2 threads at {BIG:,} rows{info}"))

    name = f"peak memory ≤ {gib(TARGET_PEAK)} at {BIG:,} rows"
    for k, r in measured:
        out.append(
            target(
                f"{name} ({k} thread{'s' * (k > 1)})",
                "met" if r["peak_rss_bytes"] <= TARGET_PEAK else "missed",
                f"peak RSS {gib(r['peak_rss_bytes'])}",
            )
        )
    for r in failed:  # killed for memory shows as exit status -9; nothing measured
        out.append(
            target(
                f"{name} ({r['threads']} thread{'s' * (r['threads'] > 1)})",
                "not measured",
                f"child failed: {r['error']}",
            )
        )
    if not measured and not failed:
        info = ""
        if found:
            most = max(r["peak_rss_bytes"] for r in found.values())
            info = f"; at {largest:,} rows the most was {gib(most)}"
        out.append(target(name, "not measured", f"no {BIG:,}-row run in this one{info}"))
    return out


def threads_caveat(found, n, threads):
    """A warning where a child did not run with the threads it was given."""
    off = [
        f"{k} asked, numba ran {found[(n, k)]['numba_threads']}"
        for k in threads
        if (n, k) in found and found[(n, k)]["numba_threads"] != k
    ]
    return f" (caution: FIRE_NUM_THREADS not honoured: {'; '.join(off)})" if off else ""


def tail_targets(tail):
    name = f"fused path (fusion 1) ≤ {TARGET_FUSED:g}× MCP alone ({TAIL_LAMBDAS} steps, 1 thread)"
    found = {r["fusion"]: r for r in tail if "error" not in r}
    fused = next((r for r in tail if r["fusion"] == 1.0), None)
    if 0.0 in found and fused is not None and fused.get("timed_out"):
        mcp = found[0.0]
        overhead = mcp["wall_s"] - mcp["path_s"]  # the child's imports, data, warm-up, leaf matrix
        bound = (fused["timeout_s"] - overhead) / mcp["path_s"]
        return [
            target(
                name,
                "missed" if bound > TARGET_FUSED else "not measured",
                f"> {bound:.1f}× (fusion 1 {fused['error']}; its path ran at least "
                f"{fused['timeout_s'] - overhead:.0f} s against {mcp['path_s']:.2f} s)",
            )
        ]
    if 0.0 not in found or 1.0 not in found:
        return [target(name, "not measured", "a run failed or was skipped")]
    ratio = found[1.0]["path_s"] / found[0.0]["path_s"]
    return [
        target(
            name,
            "met" if ratio <= TARGET_FUSED else "missed",
            f"{ratio:.2f}× ({found[1.0]['path_s']:.2f} s / {found[0.0]['path_s']:.2f} s; passes "
            f"{found[1.0]['passes']:,} / {found[0.0]['passes']:,})",
        )
    ]


# ---------------------------------------------------------------------------------------------- report
def markdown(doc):
    m, cfg = doc["machine"], doc["config"]
    rows, tail = doc["rows"], doc["tail"]
    children = [r for r in [doc["warmup"], *doc["all_runs"]] if "threading_layer" in r]
    counted = Counter(
        r["threading_layer"] + ("" if r["layer_by_run"] else " (threads started after the run, to name it)")
        for r in children
    )
    layers_text = ", ".join(f"{layer} ({k} of {len(children)} children)" for layer, k in sorted(counted.items()))
    off = sorted(
        {
            (int(r["fire_num_threads"]), r["numba_threads"])
            for r in children
            if int(r["fire_num_threads"]) != r["numba_threads"]
        }
    )
    out = ["# Scaling of the FIRE solver: rows, cores, memory, fused tail (issue 20)", ""]
    if not doc["final"]:
        out += ["**Partial: the run was still going when this was written.**", ""]
    out += [
        f"- command: `{doc['command']}`",
        f"- date: {doc['date']}; wall time of the run {doc['wall_s'] / 60:.1f} min",
        f"- machine: {m['cpu']}, {m['cores']} cores ({m['usable_cores']} usable by this process), "
        f"{gib(m['memory_bytes'])} RAM, load average at start {m['load_average'][0]:.2f}; Python {m['python']}, "
        f"numpy {m['numpy']}, numba {m['numba']}, scikit-learn {m['sklearn']}; host {m['host']}",
        f"- solver code: {doc['solver_version']}",
        f"- numba threading layer: {layers_text or '?'}; thread counts asked (FIRE_NUM_THREADS): "
        f"{', '.join(map(str, cfg['threads']))} for the rows, 1 for the fused tail; numba's own count in each "
        "child is in the tables",
        "- each configuration in a fresh subprocess with FIRE_NUM_THREADS=k (and OMP/OPENBLAS/MKL_NUM_THREADS=k, "
        "NUMBA_NUM_THREADS unset); kernels compiled by a warm-up child first "
        f"({doc['warmup'].get('seconds', float('nan')):.1f} s) and loaded in each child on a few rows before its "
        "timings, so no timing includes compilation"
        + (f"; best of {cfg['repeats']} repeats (by total seconds)" if cfg["repeats"] > 1 else ""),
    ]
    if off:
        out.append(
            "- **caution: FIRE_NUM_THREADS was not honoured**: "
            + "; ".join(f"{asked} asked, numba ran {ran}" for asked, ran in off)
            + " (`numba.get_num_threads()` in the child after its run); the core scaling below is not a measure of "
            "threads"
        )
    if any(k > m["usable_cores"] for k in cfg["threads"]):
        out.append(f"- thread counts above the {m['usable_cores']} usable cores are oversubscribed")
    busy = [r["load_average_after"] for r in children if "load_average_after" in r]
    if max([m["load_average"][0], *busy]) > m["usable_cores"] - 0.5:
        out.append(
            f"- **the machine was busy**: 1-minute load average {m['load_average'][0]:.2f} at the start, up to "
            f"{max(busy, default=0):.2f} after a child, on {m['usable_cores']} usable cores: other jobs competed for "
            "the cores, most of all in the multi-thread runs (load in the tables)"
        )
    else:
        out.append("- the machine may be shared with other jobs: timings are noisy (1-minute load in the tables)")

    if not cfg["skip_rows"]:
        out += [
            "",
            f"## Rows and cores: make_friedman1 (10 features), {cfg['rows_trees']} trees of depth {ROWS_DEPTH} "
            f"fitted on {cfg['rows_fit']:,} rows, `fit_path(M, y, max_rules={MAX_RULES})`",
            "",
            "Seconds of `leaf_matrix(forest, X)` and of `fit_path` (library defaults: MCP, fusion 0.5, unit "
            "scaling, 50 λ to 1e-3·λ_max). Peak RSS: the child's `ru_maxrss` (whole process: imports, data, "
            "matrix, path); RSS before: the child's after imports, data and warm-up.",
            "",
            "| rows | threads (asked / numba) | layer | leaf matrix (s) | path (s) | total (s) | steps | rules (last) "
            "| stop | non-conv. | passes | slowest step (s) | leaf array | RSS before | peak RSS | load after |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            if "error" in r:
                out.append(f"| {r['n']:,} | {r['threads']} | failed: {r['error']} |" + " |" * 13)
                continue
            out.append(
                f"| {r['n']:,} | {r['threads']} / {r['numba_threads']} | {r['threading_layer']} | {r['build_s']:.2f} "
                f"| {r['path_s']:.2f} | {r['total_s']:.2f} | {r['steps']} | {r['rules']} | {r['stop_reason']} | "
                f"{r['nonconverged']} | {r['passes']:,} | {r['slowest_step_s']:.2f} | {gib(r['leaves_bytes'])} | "
                f"{gib(r['rss_before_bytes'])} | {gib(r['peak_rss_bytes'])} | {r['load_average_after']:.2f} |"
            )
        good = {(r["n"], r["threads"]): r for r in rows if "error" not in r}
        sizes = sorted({n for n, _ in good})
        threads = cfg["threads"]
        if len(sizes) >= 2:
            base = sizes[0]
            out += [
                "",
                f"Time against rows (total seconds / those at {base:,} rows, same thread count):",
                "",
                "| rows | rows ratio | " + " | ".join(f"{k} thr." for k in threads) + " |",
                "|---|---|" + "---|" * len(threads),
            ]
            for n in sizes:
                cells = [
                    f"{good[(n, k)]['total_s'] / good[(base, k)]['total_s']:.2f}"
                    if (n, k) in good and (base, k) in good
                    else "—"
                    for k in threads
                ]
                out.append(f"| {n:,} | {n / base:g} | " + " | ".join(cells) + " |")
        k0 = min(threads)
        if len(threads) >= 2:
            out += [
                "",
                f"Core scaling (total seconds at {k0} thread{'s' * (k0 > 1)} / at k threads, same rows; "
                "leaf matrix and path apart in parentheses):",
                "",
                "| rows | " + " | ".join(f"{k} thr." for k in threads) + " |",
                "|---|" + "---|" * len(threads),
            ]
            for n in sizes:
                cells = []
                for k in threads:
                    if (n, k) in good and (n, k0) in good:
                        a, b = good[(n, k0)], good[(n, k)]
                        cells.append(
                            f"{a['total_s'] / b['total_s']:.2f}× ({a['build_s'] / b['build_s']:.2f}, "
                            f"{a['path_s'] / b['path_s']:.2f})"
                        )
                    else:
                        cells.append("—")
                out.append(f"| {n:,} | " + " | ".join(cells) + " |")

    if not cfg["skip_tail"]:
        out += [
            "",
            f"## Fused tail: {TAIL_TABLE} (all rows, y standardized), {cfg['tail_trees']} trees of depth "
            f"{TAIL_DEPTH}, full {TAIL_LAMBDAS}-step paths, 1 thread",
            "",
            f"`fit_path(M, y, max_rules=None, n_lambdas={TAIL_LAMBDAS}, fusion_ratio=f)`, library defaults otherwise; "
            "passes: sum of `PathStep.n_iter`; ratio: path seconds / those of MCP alone (f = 0).",
            "",
            "| fusion ratio | rules R | leaf matrix (s) | path (s) | ratio to MCP | passes | passes ratio | steps | "
            "non-conv. | rules (last) | stop | slowest step (s) | peak RSS | load after |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        mcp = next((r for r in tail if r["fusion"] == 0.0 and "error" not in r), None)
        for r in tail:
            if "error" in r:
                out.append(f"| {r['fusion']:g} | failed: {r['error']} |" + " |" * 12)
                continue
            ratio = f"{r['path_s'] / mcp['path_s']:.2f}×" if mcp else "—"
            passes = f"{r['passes'] / mcp['passes']:.2f}×" if mcp and mcp["passes"] else "—"
            out.append(
                f"| {r['fusion']:g}{' (MCP alone)' if r['fusion'] == 0 else ''} | {r['R']:,} | {r['build_s']:.3f} | "
                f"{r['path_s']:.2f} | {ratio} | {r['passes']:,} | {passes} | {r['steps']} | {r['nonconverged']} | "
                f"{r['rules']} | {r['stop_reason']} | {r['slowest_step_s']:.2f} | {gib(r['peak_rss_bytes'])} | "
                f"{r['load_average_after']:.2f} |"
            )

    out += ["", "## Targets", ""]
    for t in doc["targets"]:
        status = {"met": "**met**", "missed": "**missed**"}.get(t["status"], t["status"])
        out.append(f"- {t['target']}: {t['figure']}: {status}")
    if cfg["quick"]:
        out += ["", "Quick run (`--quick`): smaller sizes and forests; the targets at 1e5/1e6 rows are not measured."]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------- main
def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sizes 20,000 and 50,000; 100 trees; tail of 50 trees")
    parser.add_argument("--sizes", nargs="+", type=int, default=None, help="rows (default 100000 1000000)")
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2], help="FIRE_NUM_THREADS values")
    parser.add_argument("--skip-rows", action="store_true", help="no rows / cores part")
    parser.add_argument("--skip-tail", action="store_true", help="no fused tail part")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each configuration; the fastest is reported")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds a child may run")
    parser.add_argument("--out-dir", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(args.child)
        return
    sizes = sorted(set(args.sizes or ([20_000, 50_000] if args.quick else [SMALL, BIG])))
    threads = sorted(set(args.threads))
    if min(threads) < 1 or min(sizes) < 1 or args.repeats < 1:
        parser.error("sizes, threads and repeats must be positive")
    config = {
        "quick": args.quick,
        "sizes": sizes,
        "threads": threads,
        "repeats": args.repeats,
        "skip_rows": args.skip_rows,
        "skip_tail": args.skip_tail,
        "rows_trees": 100 if args.quick else ROWS_TREES,
        "rows_depth": ROWS_DEPTH,
        "rows_fit": min(ROWS_FIT, max(sizes)),
        "max_rules": MAX_RULES,
        "tail_table": TAIL_TABLE,
        "tail_trees": 50 if args.quick else TAIL_TREES,
        "tail_depth": TAIL_DEPTH,
        "tail_lambdas": TAIL_LAMBDAS,
        "fusions": list(FUSIONS),
    }
    argv = [os.path.relpath(sys.argv[0], REPO) if os.path.isabs(sys.argv[0]) else sys.argv[0], *sys.argv[1:]]
    started = time.perf_counter()

    def log(message):
        print(f"[{time.perf_counter() - started:7.1f}s] {message}", flush=True)

    doc = {
        "command": "python " + " ".join(shlex.quote(a) for a in argv),
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": machine(),
        "solver_version": solver_version(),
        "config": config,
        "warmup": {},
        "rows": [],
        "tail": [],
        "all_runs": [],
        "targets": [],
        "final": False,
        "wall_s": 0.0,
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)

    def write(final=False):
        doc["final"] = final
        doc["wall_s"] = time.perf_counter() - started
        doc["targets"] = (rows_targets(doc["rows"], threads) if not args.skip_rows else []) + (
            tail_targets(doc["tail"]) if not args.skip_tail else []
        )
        (args.out_dir / "scale.json").write_text(json.dumps(doc, indent=1) + "\n")
        text = markdown(doc)
        (args.out_dir / "scale.md").write_text(text)
        return text

    with tempfile.TemporaryDirectory(prefix="fire-scale-") as tmp:
        rows_forest, tail_forest = Path(tmp) / "rows_forest.json", Path(tmp) / "tail_forest.json"
        if not args.skip_rows:
            X, y = friedman(max(sizes))
            fit_forest(X[: config["rows_fit"]], y[: config["rows_fit"]], config["rows_trees"], ROWS_DEPTH, rows_forest)
            del X, y
            gc.collect()
            log(f"rows forest: {config['rows_trees']} trees of depth {ROWS_DEPTH} on {config['rows_fit']:,} rows")
        if not args.skip_tail:
            X, y = load_table(TAIL_TABLE)
            fit_forest(X, y, config["tail_trees"], TAIL_DEPTH, tail_forest)
            log(f"tail forest: {config['tail_trees']} trees of depth {TAIL_DEPTH} on {TAIL_TABLE}'s {len(y):,} rows")

        warm = {"kind": "warmup", "table": TAIL_TABLE}
        warm |= {"rows_forest": str(rows_forest)} if not args.skip_rows else {}
        warm |= {"tail_forest": str(tail_forest)} if not args.skip_tail else {}
        doc["warmup"] = run_child(warm, max(threads), args.timeout)
        if "error" in doc["warmup"]:
            raise SystemExit(f"warm-up child failed: {doc['warmup']['error']}")
        log(f"warm-up child: {doc['warmup']['seconds']:.1f} s (layer {doc['warmup']['threading_layer']})")

        if not args.skip_rows:
            for n in sizes:
                for k in threads:
                    runs = []
                    for _ in range(args.repeats):
                        config_n = {"kind": "rows", "n": n, "forest": str(rows_forest), "max_rules": MAX_RULES}
                        run = run_child(config_n, k, args.timeout) | {"n": n, "threads": k}
                        runs.append(run)
                        doc["all_runs"].append(run | {"part": "rows"})
                        if "error" in run:
                            log(f"rows {n:,} threads {k}: FAILED {run['error']}")
                        else:
                            log(
                                f"rows {n:,} threads {k} (numba {run['numba_threads']}, {run['threading_layer']}): "
                                f"leaf matrix {run['build_s']:.2f} s + path {run['path_s']:.2f} s = "
                                f"{run['total_s']:.2f} s, {run['steps']} steps, {run['rules']} rules, "
                                f"stop {run['stop_reason']}, peak RSS {gib(run['peak_rss_bytes'])}"
                            )
                    doc["rows"].append(best_of(runs, "total_s"))
                    write()

        if not args.skip_tail:
            for fusion in FUSIONS:
                runs = []
                for _ in range(args.repeats):
                    config_f = {
                        "kind": "tail",
                        "table": TAIL_TABLE,
                        "forest": str(tail_forest),
                        "fusion": fusion,
                        "n_lambdas": TAIL_LAMBDAS,
                    }
                    run = run_child(config_f, 1, args.timeout) | {"fusion": fusion, "threads": 1}
                    runs.append(run)
                    doc["all_runs"].append(run | {"part": "tail"})
                    if "error" in run:
                        log(f"tail fusion {fusion:g}: FAILED {run['error']}")
                    else:
                        log(
                            f"tail fusion {fusion:g}: path {run['path_s']:.2f} s, {run['passes']:,} passes, "
                            f"{run['nonconverged']} not converged, {run['rules']} rules at the last step"
                        )
                doc["tail"].append(best_of(runs, "path_s"))
                write()

    print(write(final=True))
    log(f"wrote {args.out_dir / 'scale.md'} and {args.out_dir / 'scale.json'}")


if __name__ == "__main__":
    main()
