"""The report of bench/scoring_load.py: its markdown (the paced and saturating tables, the target's verdict) and the
summary lines of both phases."""

from scoring_load_runners import ALIAS, N_BODIES, NAME

TARGET_P99_MS = 50.0
PACED_MIN_ACHIEVED = 0.9  # a paced run meets the target only at >= 90% of the offered requests/s


def ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def whole(value: float | None) -> str:
    """locust's percentiles: whole milliseconds."""
    return "n/a" if value is None else f"{value:.0f}"


def paced_verdict(row: dict) -> str:
    paced = row["paced"]
    if paced["target_met"] is None:
        return "(calibration)"
    if row["server"] == "MLflow":
        return "(baseline)"
    if paced["target_met"]:
        return "yes"
    reasons = []
    if paced["p99_ms"] is None or paced["p99_ms"] >= TARGET_P99_MS:
        reasons.append("no p99" if paced["p99_ms"] is None else f"p99 {paced['p99_ms'] - TARGET_P99_MS:+.0f} ms")
    if paced["failures"]:
        reasons.append(f"{paced['failures']} failures")
    if paced["requests_per_s"] < PACED_MIN_ACHIEVED * paced["offered_per_s"]:
        reasons.append(f"{paced['requests_per_s']:.0f} of {paced['offered_per_s']:.0f} req/s")
    return f"**no** ({', '.join(reasons)})"


def cores_range(rows: list[dict], phase: str, key: str) -> str:
    values = [row[phase][key] for row in rows if phase in row and row[phase].get(key) is not None]
    return f"{min(values):.2f}-{max(values):.2f}" if values else "?"


def markdown(report: dict) -> str:
    s = report["settings"]
    paced_run = s["paced"]
    offered = s["clients"] * 1000 / s["pace_ms"]
    calibration = next((r for r in report["routes"] if "skipped" not in r and r["method"] == "GET"), None)
    lines = [
        "# Single-row scoring under load: every FIRE scoring route beside MLflow's scoring server",
        "",
        f"`{report['command']}` ({report['date']}, commit {report['commit']}).",
        "",
        f"Every route in two phases, each request one row, cycling through {N_BODIES} abalone rows: saturating "
        f"(wrk, {s['clients']} clients that never pause)"
        + (
            f", then paced (locust, {s['clients']} clients each sending a request every {s['pace_ms']:g} ms)."
            if paced_run
            else " only (the paced phase was not run: --no-paced)."
        )
        + f" Both servers run on this machine ({report['machine']['cpus']} cores, shared with the load tool) with "
        f"{s['api_processes']} uvicorn process(es) each (the service's FIRE_API_WORKERS, `mlflow models serve "
        f"--workers`), both logging at warning level. Load average (1 min) before the first run "
        f"{report['machine']['loadavg_start'][0]:g}, after the last {report['machine']['loadavg_end'][0]:g}; "
        f"each run's is in the JSON.",
        "",
        f"- FIRE: `fire-rules serve` on Redis (fresh key prefix), model `{NAME}` v1 (alias `{ALIAS}`): "
        f"{report['fire_model']}.",
        f"- MLflow: `mlflow models serve --env-manager local` of {report['mlflow_model']}. Without a server, one "
        f"row costs {report['mlflow_model_in_process_ms'].get('sklearn_pipeline_predict', float('nan')):.1f} ms in "
        f"the pipeline's predict and "
        f"{report['mlflow_model_in_process_ms'].get('mlflow_pyfunc_predict', float('nan')):.1f} ms in MLflow's pyfunc "
        f"predict (median, in the benchmark's process, before the load).",
        "",
    ]
    ping = (
        f" (here even MLflow's empty `GET /ping` has a p99 of {calibration['saturating']['p99_ms']:.0f} ms at "
        f"{calibration['saturating']['requests_per_s']:.0f} req/s)"
        if calibration and calibration.get("saturating")
        else ""
    )
    little = (
        f"In the saturating phase the clients never pause, so by Little's law the mean latency is clients / "
        f"throughput whatever a request costs: p99 < {TARGET_P99_MS:g} ms with {s['clients']} such clients needs "
        f"well over {s['clients'] * 1000 / TARGET_P99_MS:,.0f} requests/s from cores that also run the load "
        f"tool{ping}; that phase measures throughput and queueing, and its p99s are shown as measured, not judged "
        f"against the target."
    )
    if paced_run:
        lines += [
            f"**Target** (issue 19): single-row scoring p99 < {TARGET_P99_MS:g} ms and no errors with "
            f"{s['clients']} clients on every scoring route, measured with a standard load tool. **It is checked on "
            f"the paced phase**: {s['clients']} clients each sending one row every {s['pace_ms']:g} ms "
            f"({offered:,.0f} requests/s offered in all), which is how internal apps call a model. " + little,
            "",
            f"## Paced phase (the target): {s['clients']} clients, one request each every {s['pace_ms']:g} ms (locust)",
            "",
            f"locust {report['versions'].get('locust', '?')} headless, {s['clients']} `FastHttpUser`s started at once "
            f"(`-u {s['clients']} -r {s['clients']}`), each at a random phase of its period, then "
            f"`constant_throughput({1000 / s['pace_ms']:g})` (a request every {s['pace_ms']:g} ms, the next one at "
            f"once when a request took longer), {s['paced_seconds']:g} s per route, 5 s timeout, after the "
            f"saturating phase (so warm). A route meets the target with p99 < {TARGET_P99_MS:g} ms, no failures and "
            f"at least {PACED_MIN_ACHIEVED:.0%} of the offered {offered:,.0f} requests/s achieved. A server slower "
            f"than the offered rate falls behind and its clients then wait on it as wrk's do: its achieved "
            f"requests/s and latency show it as it is. Percentiles as locust keeps them (whole ms under 100 ms, "
            f"two significant digits above), from the 'Aggregated' row of its `_stats.csv` table (written once "
            f"more at the test's stop: locust's own file, rewritten each second, misses the last one); "
            f"'1 client p50' as in the saturating table. locust itself used "
            f"{cores_range(report['routes'], 'paced', 'locust_cores')} of a core per run (its start included).",
            "",
            "| server | route | body | 1 client p50 ms | offered req/s | achieved req/s | p50 ms | p90 ms | p99 ms "
            "| max ms | failures | target met? |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for row in report["routes"]:
            if "skipped" in row:
                lines.append(
                    f"| {row['server']} | {row['route']} | {row['body']} | not run: {row['skipped']} | | | | | | | | |"
                )
                continue
            paced = row["paced"]
            lines.append(
                f"| {row['server']} | `{row['route']}` | {row['body']} | {ms(row['single_client_p50_ms'])} "
                f"| {paced['offered_per_s']:.0f} | {paced['requests_per_s']:.0f} | {whole(paced['p50_ms'])} "
                f"| {whole(paced['p90_ms'])} | {whole(paced['p99_ms'])} | {ms(paced['max_ms'])} | {paced['failures']} "
                f"| {paced_verdict(row)} |"
            )
        lines += ["", report["summary_paced"], ""]
    else:
        lines += [
            f"Target (issue 19): single-row scoring p99 < {TARGET_P99_MS:g} ms and no errors with {s['clients']} "
            f"clients on every scoring route. It applies to paced clients, and the paced phase was not run "
            f"(--no-paced): the target is not checked here. " + little,
            "",
        ]
    lines += [
        f"## Saturating phase: {s['clients']} clients that never pause (wrk): throughput and queueing",
        "",
        f"wrk, {s['clients']} connections, {s['threads']} threads, {s['seconds']:g} s per route after a "
        f"{s['warmup']:g} s warm-up whose figures are dropped, 5 s timeout. '1 client p50': the median of "
        f"{s['single_client_repeats']} requests per route from one client before the load (the routes in turn), "
        f"the cost of a request without queueing. wrk itself used "
        f"{cores_range(report['routes'], 'saturating', 'wrk_cores')} of a core per run.",
        "",
        f"| server | route | body | 1 client p50 ms | requests/s | p50 ms | p90 ms | p99 ms | errors "
        f"| p99 < {TARGET_P99_MS:g} ms? |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["routes"]:
        if "skipped" in row:
            lines.append(
                f"| {row['server']} | {row['route']} | {row['body']} | not run: {row['skipped']} | | | | | | |"
            )
            continue
        sat = row["saturating"]
        if sat["p99_under_target"] is None:
            under = "(calibration)"
        elif row["server"] == "MLflow":
            under = "(baseline)"
        else:
            under = "yes" if sat["p99_under_target"] else f"no ({sat['p99_ms'] - TARGET_P99_MS:+.1f} ms)"
        lines.append(
            f"| {row['server']} | `{row['route']}` | {row['body']} | {ms(row['single_client_p50_ms'])} "
            f"| {sat['requests_per_s']:.0f} "
            f"| {ms(sat['p50_ms'])} | {ms(sat['p90_ms'])} | {ms(sat['p99_ms'])} | {sat['errors']} | {under} |"
        )
    lines += ["", report["summary_saturating"], ""]
    return "\n".join(lines)


def side_by_side(results: list[dict]) -> list[tuple[dict, dict]]:
    """(FIRE row, MLflow row) per body MLflow takes: FIRE's /invocations of that body, else its first route."""
    fire = [row for row in results if row["server"] == "FIRE" and "skipped" not in row]
    pairs = []
    for body in ("dataframe_split", "csv", "dataframe_records"):
        ours = next(
            (r for r in fire if r["body"] == body and "invocations" in r["route"]),
            next((r for r in fire if r["body"] == body), None),
        )
        theirs = next(
            (r for r in results if r["server"] == "MLflow" and r["body"] == body and "skipped" not in r), None
        )
        if ours and theirs:
            pairs.append((ours, theirs))
    return pairs


def not_run(results: list[dict]) -> str:
    skipped = [row for row in results if "skipped" in row]
    if not skipped:
        return ""
    return " Not run: " + "; ".join(f"{row['route']} ({row['skipped']})" for row in skipped) + "."


def summarize_paced(results: list[dict], offered: float) -> str:
    fire = [row for row in results if row["server"] == "FIRE" and "skipped" not in row]
    met = [row for row in fire if row["paced"]["target_met"]]
    text = f"Paced, FIRE routes meeting the target: {len(met)}/{len(fire)}"
    if fire:
        worst = max(fire, key=lambda row: row["paced"]["p99_ms"] if row["paced"]["p99_ms"] is not None else 1e9)
        text += (
            f" (worst p99 {whole(worst['paced']['p99_ms'])} ms: {worst['route']}, {worst['body']}; "
            f"{sum(row['paced']['failures'] for row in fire)} failures in all)"
        )
    text += "."
    pairs = [
        f"{ours['body']}: FIRE `{ours['route'].split(' ')[1]}` {ours['paced']['requests_per_s']:.0f} req/s, p50 "
        f"{whole(ours['paced']['p50_ms'])} ms, p99 {whole(ours['paced']['p99_ms'])} ms, {ours['paced']['failures']} "
        f"failures; MLflow {theirs['paced']['requests_per_s']:.0f} req/s, p50 {whole(theirs['paced']['p50_ms'])} ms, "
        f"p99 {whole(theirs['paced']['p99_ms'])} ms, {theirs['paced']['failures']} failures"
        for ours, theirs in side_by_side(results)
    ]
    if pairs:
        text += f" Side by side at {offered:,.0f} req/s offered, " + "; ".join(pairs) + "."
    calibration = next((r for r in results if "skipped" not in r and r["method"] == "GET"), None)
    if calibration:
        paced = calibration["paced"]
        text += (
            f" Calibration: MLflow's `GET /ping` (no model, no body) {paced['requests_per_s']:.0f} req/s, p50 "
            f"{whole(paced['p50_ms'])} ms, p99 {whole(paced['p99_ms'])} ms at the same pace."
        )
    return text + not_run(results)


def summarize_saturating(results: list[dict]) -> str:
    fire = [row for row in results if row["server"] == "FIRE" and "skipped" not in row]
    under = [row for row in fire if row["saturating"]["p99_under_target"]]
    text = f"Saturating, FIRE routes with p99 < {TARGET_P99_MS:g} ms: {len(under)}/{len(fire)}"
    if fire:
        worst = max(fire, key=lambda row: row["saturating"]["p99_ms"])
        text += f" (worst p99 {worst['saturating']['p99_ms']:.1f} ms: {worst['route']}, {worst['body']})"
    text += "."
    pairs = [
        f"{ours['body']}: FIRE `{ours['route'].split(' ')[1]}` {ours['saturating']['requests_per_s']:.0f} req/s, p99 "
        f"{ours['saturating']['p99_ms']:.1f} ms; MLflow {theirs['saturating']['requests_per_s']:.0f} req/s, p99 "
        f"{theirs['saturating']['p99_ms']:.1f} ms "
        f"({ours['saturating']['requests_per_s'] / theirs['saturating']['requests_per_s']:.1f}x the throughput)"
        for ours, theirs in side_by_side(results)
    ]
    if pairs:
        text += " Side by side, " + "; ".join(pairs) + "."
    calibration = next((r for r in results if "skipped" not in r and r["method"] == "GET"), None)
    if calibration:
        sat = calibration["saturating"]
        text += (
            f" Calibration: MLflow's uvicorn answering `GET /ping` (no model, no body) {sat['requests_per_s']:.0f} "
            f"req/s, p50 {sat['p50_ms']:.1f} ms, p99 {sat['p99_ms']:.1f} ms under the same load."
        )
    return text + not_run(results)
