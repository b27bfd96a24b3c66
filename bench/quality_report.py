"""The report of ``bench/quality.py``: the summary of its records (medians of the test-error decreases, the rule
budget sweep, issue 18's targets), its markdown and its plot."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from bench.quality_methods import (
    BASELINES,
    BUDGETS,
    DATASETS,
    DEEP_SWEEP_METHODS,
    HEADLINE_BUDGET,
    INVESTIGATE_METHODS,
    REPO_ROOT,
    SWEEP_METHODS,
)
from solver.spec import READABLE

RESULTS_DIR = REPO_ROOT / "bench" / "results"
# (target, competitor, goal): the median test-error decrease of the defaults ("fire") under 15 terms; issue 18
# point 5 asks 45% vs the L1 path on the same forest, 30% vs imodels RuleFit, 24% vs GLRM with debiasing (the
# paper's median); the paper's 18% vs SIRUS and "the default no worse than MCP alone" stay as checks
TARGETS = (
    ("vs_l1", "l1", 0.45),
    ("vs_rulefit", "rulefit", 0.30),
    ("vs_sirus", "sirus", 0.18),
    ("vs_glrm", "glrm", 0.24),
    ("vs_mcp", "mcp", 0.0),
)
TARGET_LABELS = {
    "vs_l1": "L1 path (same forest)",
    "vs_rulefit": "imodels RuleFit",
    "vs_sirus": "SIRUS",
    "vs_glrm": "GLRM with debiasing",
    "vs_mcp": "MCP only (default no worse)",
}
CAP = ("fire_nodes_len2", "fire_nodes", 0.10)  # capped at 2 conditions vs uncapped: test error within 10%
NEAR_FOREST = (0.05, 6)  # the defaults within 5% of the full forest's test error on at least 6 tables
READABLE_GOAL = (0.30, 0.05, 5)  # >= 30% fewer antecedents than MCP at <= 5% more error, on >= 5 tables
COMPARISONS = ("l1", "rulefit", "sirus", "glrm", "mcp", "forest", "fire", "fire_leaves")
COLORS = {
    "fire": "tab:blue",
    "fire_leaves": "tab:cyan",
    "fire_nodes": "tab:purple",
    "fire_readable": "tab:green",
    "mcp": "tab:orange",
    "l1": "tab:red",
}
LABELS = {
    "fire": "FIRE defaults (leaves + linear terms; unit scaling, fusion 0.5 lambda_s, min_support 1%, polish)",
    "fire_leaves": "defaults without linear terms (the former defaults)",
    "fire_nodes": "defaults with rules from every node (uncapped) + linear terms",
    "fire_nodes_len2": "every node, max_rule_length=2, linear terms",
    "fire_nodes_len2_nolinear": "every node, max_rule_length=2, no linear terms",
    "fire_readable": f"FIRE readable (solver.spec.READABLE = {READABLE})",
    "mcp": "MCP only, as in the paper (leaves, leaf-value columns, no min_support, no polish, no linear terms)",
    "l1": "L1 path, same forest (RuleFit problem: leaves, no linear terms)",
    "rulefit": "imodels RuleFitRegressor",
    "sirus": "SIRUS (sirus package)",
    "glrm": "GLRM with debiasing (aix360)",
    "forest": "full forest",
    "fire_nodes_nolinear": "every node (uncapped), no linear terms",
    "fire_readable_r1": "readable setting with fusion 1 lambda_s",
    "fire_nodes_len1": "every node, max_rule_length=1 (stumps), linear terms",
}


# ----------------------------------------------------------------------------------------------------- summary


def _headline(rec, method):
    """Test MSE, terms, linear terms, antecedents, longest rule of ``method`` at the < 15 term budget on the
    depth-3 forest."""
    if method in BASELINES:
        r = rec[method]
        return {
            "test": r["test"],
            "rules": r["terms"],
            "linear": r.get("linear"),
            "antecedents": r["conditions"],
            "longest": r.get("longest"),
        }
    d3 = rec["depths"]["3"]
    if method == "forest":
        return {
            "test": d3["forest"]["test"],
            "rules": d3["forest"]["rules"],
            "linear": 0,
            "antecedents": None,
            "longest": None,
        }
    b = d3["methods"][method]["budgets"][str(HEADLINE_BUDGET)]
    return {k: b.get(k) for k in ("test", "rules", "linear", "antecedents", "longest")}


def _has(rec, method):
    return method == "forest" or method in rec or method in rec["depths"]["3"]["methods"]


def _decrease(fire, comp):
    return (comp - fire) / comp if comp > 0 else 0.0


def _stats(values):
    """median, quartiles and count of ``values`` (None where empty)."""
    if not values:
        return {"median": None, "q25": None, "q75": None, "n": 0}
    return {
        "median": float(np.median(values)),
        "q25": float(np.percentile(values, 25)),
        "q75": float(np.percentile(values, 75)),
        "n": len(values),
    }


def _tables_needed(count, n_tables):
    """``count`` of 7 tables, scaled to a run on fewer tables (smoke runs)."""
    return count if n_tables == len(DATASETS) else int(np.ceil(count * n_tables / len(DATASETS)))


def versus_mcp(records, datasets, method, pick):
    """``method`` against MCP alone on the same splits, at the step ``pick(record, method)`` selects: per table and
    over all pairs, the antecedent reduction 1 - a / a_mcp and the test-error change e / e_mcp - 1 (medians, IQR),
    and whether the table holds issue 18's point 3 (>= 30% fewer antecedents at <= 5% more error, medians over its
    splits)."""
    min_reduction, max_increase, _ = READABLE_GOAL
    per_table, all_red, all_err = {}, [], []
    for name in datasets:
        red, err, ants, ants_mcp = [], [], [], []
        for r in records:
            if r["dataset"] != name or not _has(r, method):
                continue
            a, b = pick(r, method), pick(r, "mcp")
            if a is None or b is None or not b["antecedents"]:
                continue
            red.append(1.0 - a["antecedents"] / b["antecedents"])
            err.append(a["test"] / b["test"] - 1.0)
            ants.append(a["antecedents"])
            ants_mcp.append(b["antecedents"])
        if not red:
            continue
        all_red += red
        all_err += err
        per_table[name] = {
            "pairs": len(red),
            "antecedents": float(np.mean(ants)),
            "antecedents_mcp": float(np.mean(ants_mcp)),
            "reduction": float(np.median(red)),
            "error_increase": float(np.median(err)),
            "holds": bool(np.median(red) >= min_reduction and np.median(err) <= max_increase),
        }
    return {
        "per_table": per_table,
        "reduction": _stats(all_red),
        "error_increase": _stats(all_err),
        "tables_holding": int(sum(v["holds"] for v in per_table.values())),
        "tables": len(per_table),
    }


def _pick_headline(rec, method):
    return _headline(rec, method)


def _pick_band(rec, method):
    return rec["depths"]["3"]["methods"][method]["band"]


def summarize(records, cfg):
    datasets = list(dict.fromkeys(r["dataset"] for r in records))
    depth3_methods = list(dict.fromkeys(m for r in records for m in r["depths"]["3"]["methods"]))
    headline_methods = depth3_methods + [m for m in BASELINES if any(m in r for r in records)] + ["forest"]
    per_dataset = {}
    for name in datasets:
        recs = [r for r in records if r["dataset"] == name]
        per_dataset[name] = {}
        for m in headline_methods:
            rows = [_headline(r, m) for r in recs if _has(r, m)]
            if not rows:
                continue

            def mean_of(key, rows=rows):
                values = [x[key] for x in rows if x.get(key) is not None]
                return float(np.mean(values)) if values else None

            longest = [x["longest"] for x in rows if x.get("longest") is not None]
            per_dataset[name][m] = {
                "test": float(np.mean([x["test"] for x in rows])),
                "test_median": float(np.median([x["test"] for x in rows])),
                "test_sd": float(np.std([x["test"] for x in rows])),
                "rules": float(np.mean([x["rules"] for x in rows])),
                "max_rules": int(max(x["rules"] for x in rows)),
                "linear": mean_of("linear"),
                "antecedents": mean_of("antecedents"),
                "longest": int(max(longest)) if longest else None,
                "splits": len(rows),
            }
    # median percent decrease of FIRE's error (and every depth-3 variant's) vs each competitor
    decreases = {}
    for fire_m in depth3_methods:
        decreases[fire_m] = {}
        for comp in COMPARISONS:
            vals = [
                _decrease(_headline(r, fire_m)["test"], _headline(r, comp)["test"])
                for r in records
                if _has(r, fire_m) and _has(r, comp)
            ]
            if comp == fire_m or not vals:
                continue
            decreases[fire_m][comp] = _stats(vals)
    # every FIRE variant against MCP alone: at the headline budget (issue 18's point 3) and, as before, at the best
    # validation step with 10..15 terms
    fused = [m for m in depth3_methods if m.startswith("fire")]
    vs_mcp = {m: versus_mcp(records, datasets, m, _pick_headline) for m in fused}
    band = {}
    for m in fused:
        v = versus_mcp(records, datasets, m, _pick_band)
        ants = [_pick_band(r, m)["antecedents"] for r in records if _has(r, m) and _pick_band(r, m)]
        band[m] = {
            "pairs": v["reduction"]["n"],
            "median_antecedent_reduction": v["reduction"]["median"],
            "median_error_increase": v["error_increase"]["median"],
            "mean_antecedents": float(np.mean(ants)) if ants else None,
        }
    mcp_band = [_pick_band(r, "mcp")["antecedents"] for r in records if _pick_band(r, "mcp")]
    band["mcp"] = {"mean_antecedents": float(np.mean(mcp_band)) if mcp_band else None}
    # capped at two conditions vs uncapped (every node, linear terms, the same budget)
    capped, uncapped, cap_goal = CAP
    cap_pairs = [
        (r["dataset"], _headline(r, capped)["test"] / _headline(r, uncapped)["test"] - 1.0)
        for r in records
        if _has(r, capped) and _has(r, uncapped)
    ]
    cap = {
        "change": _stats([v for _, v in cap_pairs]),
        "per_table": {name: float(np.median([v for n, v in cap_pairs if n == name])) for name in datasets},
    }
    # test error of each depth-3 method (< 15 terms) over the full forest's, per dataset (means over splits)
    near_forest_all = {
        m: {name: per_dataset[name][m]["test"] / per_dataset[name]["forest"]["test"] - 1.0 for name in datasets}
        for m in depth3_methods
        if all(m in per_dataset[name] for name in datasets)
    }
    near_forest = near_forest_all["fire"]
    # rule-budget sweep: per depth, method, budget: median over datasets x splits of test / forest test,
    # and median decrease vs L1 at that budget
    sweep = {}
    for depth in cfg.depths:
        sweep[str(depth)] = {}
        for m in SWEEP_METHODS if depth == 3 else DEEP_SWEEP_METHODS:
            if not all(m in r["depths"][str(depth)]["methods"] for r in records):
                continue  # a --render of records from before the method was swept
            sweep[str(depth)][m] = {}
            for budget in BUDGETS:
                rel, dec, rules, ants, linear, longest = [], [], [], [], [], []
                for r in records:
                    e = r["depths"][str(depth)]
                    b = e["methods"][m]["budgets"][str(budget)]
                    rel.append(b["test"] / e["forest"]["test"])
                    dec.append(_decrease(b["test"], e["methods"]["l1"]["budgets"][str(budget)]["test"]))
                    rules.append(b["rules"])
                    ants.append(b["antecedents"])
                    linear.append(b.get("linear", 0))
                    longest.append(b.get("longest", 0))
                sweep[str(depth)][m][str(budget)] = {
                    "rel_forest": float(np.median(rel)),
                    "dec_vs_l1": float(np.median(dec)),
                    "rules": float(np.mean(rules)),
                    "antecedents": float(np.mean(ants)),
                    "linear": float(np.mean(linear)),
                    "longest": float(np.max(longest)),
                }
    timing, candidate_timing = {}, {}
    for r in records:
        for depth, e in r["depths"].items():
            for m, v in e["methods"].items():
                if "same_as" in v:
                    continue
                timing.setdefault(f"{m} (depth {depth})", []).append(v["seconds"])
                candidate_timing.setdefault(f"{m} (depth {depth})", []).append(v.get("candidates_seconds", 0.0))
    nonconv = {
        m: int(sum(r["depths"]["3"]["methods"][m]["not_converged"] for r in records if _has(r, m)))
        for m in depth3_methods
    }
    fire_vs = decreases["fire"]
    readable = vs_mcp.get("fire_readable")
    min_reduction, max_increase, tables_goal = READABLE_GOAL
    tables_goal = _tables_needed(tables_goal, len(datasets))
    near_within, near_goal = NEAR_FOREST
    near_goal = _tables_needed(near_goal, len(datasets))
    near_count = int(sum(v <= near_within for v in near_forest.values()))
    targets = {
        name: {"value": fire_vs[comp]["median"], "goal": goal, "met": bool(fire_vs[comp]["median"] >= goal)}
        for name, comp, goal in TARGETS
        if comp in fire_vs
    }
    first = [
        _decrease(_headline(r, "fire")["test"], _headline(r, "glrm")["test"])
        for r in records
        if r["split"] == 0 and _has(r, "glrm")
    ]
    if "vs_glrm" in targets and first:  # earlier reports ran GLRM on the first split only
        targets["vs_glrm"]["first_split"] = float(np.median(first))
    targets.update(
        {
            # issue 18 point 3: the readable setting vs MCP alone at the same (< 15 term) budget, table by table
            "fusion_antecedents": {
                "reduction": readable["reduction"]["median"] if readable else None,
                "error_increase": readable["error_increase"]["median"] if readable else None,
                "tables_holding": readable["tables_holding"] if readable else 0,
                "tables_needed": tables_goal,
                "met": bool(
                    readable is not None
                    and readable["reduction"]["median"] is not None
                    and readable["reduction"]["median"] >= min_reduction
                    and readable["error_increase"]["median"] <= max_increase
                    and readable["tables_holding"] >= tables_goal
                ),
            },
            "near_forest": {
                "within": near_count,
                "of": len(near_forest),
                "needed": near_goal,
                "tolerance": near_within,
                "met": near_count >= near_goal,
            },
        }
    )
    cap["goal"] = cap_goal
    cap["met"] = bool(cap["change"]["median"] is not None and cap["change"]["median"] <= cap_goal)
    return {
        "datasets": datasets,
        "methods": headline_methods,
        "per_dataset": per_dataset,
        "decreases": decreases,
        "versus_mcp": vs_mcp,
        "band": band,
        "cap": cap,
        "near_forest": near_forest,
        "near_forest_all": near_forest_all,
        "sweep": sweep,
        "path_seconds": {m: float(np.mean(v)) for m, v in timing.items()},
        "candidate_seconds": {m: float(np.mean(v)) for m, v in candidate_timing.items()},
        "not_converged_steps": nonconv,
        "targets": targets,
    }


# ----------------------------------------------------------------------------------------------------- output


def _pct(x):
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _signed(x):
    return "n/a" if x is None else f"{100 * x:+.1f}%"


def _iqr(st):
    return f"[{_pct(st['q25'])}, {_pct(st['q75'])}]" if st["n"] else ""


def _met(flag):
    return "met" if flag else "**missed**"


def sweep_table(summary, key="rel_forest"):
    """ASCII table of the rule-budget sweep (median test MSE / full forest, or decrease vs L1)."""
    lines = []
    header = f"{'depth':>5} {'method':<16}" + "".join(f"{b:>9}" for b in BUDGETS)
    lines.append(header)
    lines.append("-" * len(header))
    for depth, methods in summary["sweep"].items():
        for m, row in methods.items():
            cells = "".join(f"{row[str(b)][key]:>9.3f}" for b in BUDGETS)
            lines.append(f"{depth:>5} {m:<16}{cells}")
    return "\n".join(lines)


Y_TICKS = (0.5, 0.7, 1, 1.5, 2, 3, 5, 8)


def plot_sweep(summary, path, n_trees=500):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, NullLocator

    depths = list(summary["sweep"])
    fig, axes = plt.subplots(1, len(depths), figsize=(4.6 * len(depths), 4.0), sharey=True, squeeze=False)
    values = [row[str(b)]["rel_forest"] for d in depths for row in summary["sweep"][d].values() for b in BUDGETS]
    ticks = [v for v in Y_TICKS if min(values, default=1) / 1.15 <= v <= max(values, default=1) * 1.15]
    for ax, depth in zip(axes[0], depths):
        for m, row in summary["sweep"][depth].items():
            ax.plot(BUDGETS, [row[str(b)]["rel_forest"] for b in BUDGETS], marker="o", label=m, color=COLORS.get(m))
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_xticks(BUDGETS)
        ax.set_xticklabels([str(b) for b in BUDGETS])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_yscale("log")
        ax.set_yticks(ticks)
        ax.set_yticklabels([f"{v:g}" for v in ticks])
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_minor_locator(NullLocator())
        ax.set_title(f"{n_trees} trees, depth {depth}")
        ax.set_xlabel("term budget (rules + linear terms)")
    axes[0][0].set_ylabel("median test MSE / full forest (log scale)")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def classification_target(path=RESULTS_DIR / "classification_quality.json"):
    """Issue 18's binary-table target from ``bench/classification.py --only quality``'s results, where present."""
    try:
        report = json.loads(Path(path).read_text())
        return dict(report["quality"]["targets"]["vs_l1"], splits=report.get("splits"))
    except (OSError, KeyError, ValueError, TypeError):
        return None


def _binary_detail(binary):
    """IQR, pairs and median antecedents of the binary-table target, where the results have them."""
    parts = []
    if binary.get("q25") is not None:
        parts.append(f"IQR [{_pct(binary['q25'])}, {_pct(binary['q75'])}], {binary.get('pairs')} pairs")
    ants = binary.get("antecedents") or {}
    if ants:
        parts.append("median antecedents " + ", ".join(f"{m} {v:g}" for m, v in ants.items()))
    return f" ({'; '.join(parts)})" if parts else ""


def render_markdown(report, plot_name="quality_budget.png", command="PYTHONPATH=. python bench/quality.py"):
    s, cfg = report["summary"], report["config"]
    t = s["targets"]
    out = []
    w = out.append
    w("# FIRE rule quality (issues 4, 9 and 18)\n")
    w(
        f"Generated by `{command}` in {report['seconds'] / 60:.1f} min on this 2-core machine (shared with other "
        f"jobs); solver at commit `{report.get('solver_version') or 'unknown'}`; {cfg['n_splits']} splits per "
        "dataset.\n"
    )
    glrm = [r["glrm"]["seconds"] for r in report.get("records", []) if "glrm" in r]
    glrm_seconds = f"{np.mean(glrm):.1f}" if glrm else "n/a"
    glrm_failed = [f"{r['dataset']} split {r['split']}" for r in report.get("records", []) if "glrm_error" in r]
    w("## Setup\n")
    w(f"- Datasets: {', '.join(s['datasets'])} (target = last column; abalone `Sex` one-hot).")
    w(
        f"- {cfg['n_splits']} seeded random splits each, train/validation/test 50/16/34; y standardized on "
        "train; all errors are test MSE on that scale."
    )
    w(
        f"- RandomForestRegressor({cfg['n_trees']} trees, max_features='sqrt', seeded, n_jobs={cfg['n_jobs']}), "
        f"depth 3 for the headline; depths {', '.join(map(str, cfg['depths']))} for the budget sweep."
    )
    w(
        "- Candidate terms: `solver.fitting.candidate_terms` with each method's settings (leaves or every node below "
        "the root, `max_rule_length`, linear terms of the numeric columns winsorized at the 2.5% quantiles of the "
        "training rows; abalone's one-hot `Sex` columns are no linear terms), the matrices from "
        "`Candidates.matrix`, antecedents and trees counted over the candidates (`Candidates.ancestors`, `.trees`)."
    )
    w(
        f"- Paths: `fit_path`, n_lambdas={cfg['n_lambdas']}, lambda_min_ratio=1e-3, tol={cfg['tol']}, early "
        f"stop once a step passes {cfg['path_rules']} terms; each method takes the step with the lowest "
        "validation MSE among steps with at most 14 terms (< 15; rules and linear terms both count), scored once "
        "on test."
    )
    w(
        f"- imodels RuleFitRegressor: {cfg['rulefit_trees']} trees of its own (tree_size 4, linear terms "
        f"included as RuleFit does), cv=False, max_rules in {list(cfg['rulefit_grid'])} chosen on validation "
        "among fits with at most 14 non-zero terms (rules + linear terms); its 'antecedents' are the summed "
        "conditions of its rules (no sharing), as for SIRUS and GLRM."
    )
    w(
        f"- SIRUS (`sirus` package, SirusRegressor): num_rules=14, {cfg.get('sirus_trees')} trees (its default "
        "grows trees until the rule set is stable, minutes per fit), rules aggregated by its non-negative ridge."
    )
    w(
        f"- GLRM with debiasing (aix360 LinearRuleRegression, debias=True, FeatureBinarizer with negations): "
        f"lambda0={cfg.get('glrm_lambda0')}, lambda1=lambda0/10, on the first "
        f"{min(cfg.get('glrm_splits', 1), cfg['n_splits'])} split(s) of each dataset and at most "
        f"{cfg.get('glrm_max_rows')} training rows ({glrm_seconds} s per fit in this run); its terms are rules and "
        "linear terms, and it may pass 14 terms (lambda0 is not tuned to the budget). A test value of a column with "
        "two values on those rows (which its binarizer takes for a binary column, and fails on a third value: "
        "elevators) takes the nearest of the two."
        + (f" It failed on {', '.join(glrm_failed)}: no GLRM pair there." if glrm_failed else "")
    )
    w(
        "- Terms = non-zero weights (rules + linear terms); linear = the linear terms among them; antecedents = "
        "distinct internal nodes the selected rules need (nodes of one path share theirs); longest = the most "
        "conditions of one selected rule.\n"
    )

    w(f"## Headline: issue 18's targets ({cfg['n_trees']} trees of depth 3, < 15 terms)\n")
    w("| target (issue 18) | goal | result | met |")
    w("|---|---|---|---|")
    labels = {
        "vs_rulefit": "FIRE defaults vs imodels RuleFit: median test-error decrease",
        "vs_glrm": "FIRE defaults vs GLRM with debiasing: median test-error decrease",
        "vs_l1": "FIRE defaults: median test-error decrease vs L1 path (same forest)",
    }
    for name in ("vs_rulefit", "vs_glrm", "vs_l1"):
        if name in t:
            st = s["decreases"]["fire"][{n: c for n, c, _ in TARGETS}[name]]
            first = t[name].get("first_split")
            first = "" if first is None or st["n"] <= len(s["datasets"]) else f"; first split only {_pct(first)}"
            w(
                f"| {labels[name]} (point 5) | >= {_pct(t[name]['goal'])} | {_pct(t[name]['value'])} "
                f"(IQR {_iqr(st)}, {st['n']} pairs{first}) | {_met(t[name]['met'])} |"
            )
    binary = classification_target()
    if binary is not None:
        w(
            f"| binary tables: median test log-loss decrease vs the L1-logistic path (point 5; "
            f"`bench/classification.py`, {binary.get('splits')} splits) | >= {_pct(binary['goal'])} | "
            f"{_pct(binary['value'])}{_binary_detail(binary)} | {_met(binary['met'])} |"
        )
    cap = s["cap"]
    w(
        f"| rules capped at 2 conditions (`{CAP[0]}`) vs uncapped (`{CAP[1]}`), same budget: median test-error "
        f"change (point 5) | <= +{_pct(cap['goal'])} | {_signed(cap['change']['median'])} (IQR {_iqr(cap['change'])}) "
        f"| {_met(cap['met'])} |"
    )
    nf = t["near_forest"]
    w(
        f"| < 15 terms (defaults) within {_pct(nf['tolerance'])} of the full depth-3 forest's test error (point 5) "
        f"| >= {nf['needed']} of {nf['of']} tables | {nf['within']} of {nf['of']} | {_met(nf['met'])} |"
    )
    fa = t["fusion_antecedents"]
    rd = s["versus_mcp"].get("fire_readable")
    if rd:
        w(
            f"| readable setting vs MCP alone: fewer antecedents at <= 5% more median test error (point 3) | "
            f">= 30% fewer, <= +5.0%, on >= {fa['tables_needed']} of {rd['tables']} tables | "
            f"{_pct(fa['reduction'])} fewer (IQR {_iqr(rd['reduction'])}), error {_signed(fa['error_increase'])} "
            f"(IQR {_iqr(rd['error_increase'])}); holds on {fa['tables_holding']} of {rd['tables']} | "
            f"{_met(fa['met'])} |"
        )
    for name in ("vs_sirus", "vs_mcp"):
        if name in t:
            w(
                f"| (check) FIRE defaults: median test-error decrease vs {TARGET_LABELS[name]} | "
                f">= {_pct(t[name]['goal'])} | {_pct(t[name]['value'])} | {_met(t[name]['met'])} |"
            )
    w("")
    if rd:
        w(f"### Readable setting (`solver.spec.READABLE` = `{READABLE}`) vs MCP alone, per table (< 15 terms)\n")
        w(
            "Medians over the table's splits of 1 - antecedents / MCP's and test error / MCP's - 1; a table holds "
            "with >= 30% fewer antecedents at <= +5% error.\n"
        )
        w("| dataset | splits | mean antecedents, readable / MCP | antecedent change | test-error change | holds |")
        w("|---|---|---|---|---|---|")
        for name, row in rd["per_table"].items():
            w(
                f"| {name} | {row['pairs']} | {row['antecedents']:.1f} / {row['antecedents_mcp']:.1f} | "
                f"{_signed(-row['reduction'])} | {_signed(row['error_increase'])} | {'yes' if row['holds'] else 'no'} |"
            )
        w(
            f"| all | {rd['reduction']['n']} | | {_signed(-rd['reduction']['median'])} "
            f"(IQR of the reduction {_iqr(rd['reduction'])}) | {_signed(rd['error_increase']['median'])} "
            f"(IQR {_iqr(rd['error_increase'])}) | {rd['tables_holding']} of {rd['tables']} |"
        )
        w("")
        w("The same comparison for every FIRE variant (all pairs; tables holding):\n")
        w("| method | pairs | antecedent reduction vs MCP [IQR] | test-error change vs MCP [IQR] | tables holding |")
        w("|---|---|---|---|---|")
        for m, v in s["versus_mcp"].items():
            w(
                f"| {m} | {v['reduction']['n']} | {_pct(v['reduction']['median'])} {_iqr(v['reduction'])} | "
                f"{_signed(v['error_increase']['median'])} {_iqr(v['error_increase'])} | "
                f"{v['tables_holding']} of {v['tables']} |"
            )
        w("")
    w(f"### Capped at 2 conditions vs uncapped, per table (`{CAP[0]}` / `{CAP[1]}` - 1, median over splits)\n")
    w("| " + " | ".join(cap["per_table"]) + " |")
    w("|" + "---|" * len(cap["per_table"]))
    w("| " + " | ".join(_signed(v) for v in cap["per_table"].values()) + " |")
    w("")
    w("### Test error over the full forest's - 1, per table (< 15 terms, means over splits)\n")
    names = list(s["datasets"])
    w("| method | " + " | ".join(names) + f" | within {_pct(nf['tolerance'])} |")
    w("|---|" + "---|" * (len(names) + 1))
    for m, row in s["near_forest_all"].items():
        within = sum(row[n] <= nf["tolerance"] for n in names)
        w(f"| {m} | " + " | ".join(_signed(row[n]) for n in names) + f" | {within} of {len(names)} |")
    w("")

    w(
        "## Median decrease of test error\n\n(err_comp - err_method) / err_comp over datasets x splits, < 15 "
        "terms (IQR in brackets):\n"
    )
    comps = [c for c in COMPARISONS if any(c in row for row in s["decreases"].values())]
    w("| method | pairs | " + " | ".join(f"vs {c}" for c in comps) + " |")
    w("|---|---|" + "---|" * len(comps))
    for m, row in s["decreases"].items():
        cells = [
            f"{_pct(row[c]['median'])} [{_pct(row[c]['q25'])}, {_pct(row[c]['q75'])}]" if c in row else "-"
            for c in comps
        ]
        w(
            f"| {m}: {LABELS.get(m, m)} | {row['l1']['n'] if 'l1' in row else row['fire']['n']} | "
            + " | ".join(cells)
            + " |"
        )
    w("")
    if any(m in s["decreases"] for m in INVESTIGATE_METHODS):
        w(
            f"(Methods in `INVESTIGATE_METHODS` ({', '.join(INVESTIGATE_METHODS)}) ran on the first "
            f"{cfg['investigate_splits']} splits of every dataset only; 'vs fire' compares with the defaults on the "
            "same splits.)\n"
        )

    w("## Per dataset: mean test MSE (standardized y), < 15 terms, depth 3\n")
    main_cols = [c for c in s["methods"] if c not in INVESTIGATE_METHODS]
    w("| dataset | " + " | ".join(main_cols) + " |")
    w("|---|" + "---|" * len(main_cols))
    for name in s["datasets"]:
        row = s["per_dataset"][name]
        w(f"| {name} | " + " | ".join(f"{row[c]['test']:.3f}" if c in row else "-" for c in main_cols) + " |")
    w("")
    w(
        "Beside each error: mean terms (max over splits) / mean linear terms / mean antecedents / longest rule "
        "(max over splits) at that step:\n"
    )
    cnt_cols = [c for c in main_cols if c != "forest"]
    w("| dataset | " + " | ".join(cnt_cols) + " |")
    w("|---|" + "---|" * len(cnt_cols))

    def fmt(v, digits=1):
        return "-" if v is None else f"{v:.{digits}f}"

    for name in s["datasets"]:
        row = s["per_dataset"][name]
        cells = []
        for c in cnt_cols:
            if c not in row:
                cells.append("-")
                continue
            r = row[c]
            cells.append(
                f"{r['rules']:.1f} ({r['max_rules']}) / {fmt(r['linear'])} / {fmt(r['antecedents'])} / "
                f"{'-' if r['longest'] is None else r['longest']}"
            )
        w(f"| {name} | " + " | ".join(cells) + " |")
    w("")

    w("## Fusion vs MCP only at the same size (best validation step with 10-15 terms, depth 3)\n")
    if s["band"]["mcp"]["mean_antecedents"] is not None:
        w(f"MCP only: {s['band']['mcp']['mean_antecedents']:.1f} antecedents on average.\n")
    w("| method | pairs | mean antecedents | median antecedent reduction vs MCP | median test-error change vs MCP |")
    w("|---|---|---|---|---|")
    for m, row in s["band"].items():
        if m == "mcp":
            continue
        ma = row["mean_antecedents"]
        w(
            f"| {m} | {row['pairs']} | {'-' if ma is None else f'{ma:.1f}'} | "
            f"{_pct(row['median_antecedent_reduction'])} | {_signed(row['median_error_increase'])} |"
        )
    w("")

    w(f"## Rule-budget sweep\n\n![budget sweep]({plot_name})\n")
    w("Median (datasets x splits) of test MSE / the same forest's test MSE at each term budget:\n")
    w("```\n" + sweep_table(s) + "\n```\n")
    w("Median percent decrease of test error versus the L1 path at the same budget (fractions):\n")
    w("```\n" + sweep_table(s, "dec_vs_l1") + "\n```\n")
    for key, caption in (
        ("rules", "Mean terms (rules + linear terms) of the selected step:"),
        ("linear", "Mean linear terms among them:"),
        ("antecedents", "Mean antecedents:"),
        ("longest", "Longest rule (most conditions, over all splits):"),
    ):
        w(f"{caption}\n")
        w("```\n" + sweep_table(s, key) + "\n```\n")

    w("## Path cost\n")
    w("| method | mean seconds per path | building its candidate matrices | steps not converged (depth 3) |")
    w("|---|---|---|---|")
    for m, sec in s["path_seconds"].items():
        base = m.split(" (depth")[0]
        nc = s["not_converged_steps"].get(base, "-") if m.endswith("(depth 3)") else "-"
        w(f"| {m} | {sec:.2f} | {s['candidate_seconds'].get(m, 0.0):.2f} | {nc} |")
    w("")
    extra = report.get("notes")
    if extra:
        w(extra)
    return "\n".join(out)
