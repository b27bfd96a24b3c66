"""Issue 37, items 4 to 6, in a real browser: a cross-validated path on scikit-learn's diabetes table (5 folds, the
one standard error rule, linear terms on, half-sample fits) as a person sees it.

- The chart shows why its step was chosen: the threshold one standard error above the lowest mean, the lowest-mean
  step and the chosen step each drawn where their dots are, steps drawn one per x (no zig-zag), the terms along the
  top where each step's dots are, no two labels on top of each other; a sentence gives the numbers, checked against
  the job's steps recomputed here.
- Counts say terms, rules and linear terms apart (headline, step table, step facts, jobs list), checked against an
  independent count of the step's rules (a rule has conditions, a linear term none).
- Progress names every phase (folds, stability fits, refit, stability) and the timings card each phase's time,
  checked against the jobs' own recorded timestamps.

Screenshots at 1280x800 and 400 px wide under test-artifacts/cv-dashboard/.
"""

import re
from itertools import combinations, pairwise

import pytest

from tests.support.browser import new_page, shoot, sign_in
from tests.support.data import ABALONE

FOLDS, FITS = 5, 2
# a forest large enough that every phase (folds, refit, each stability fit) outlasts the page's 0.25 s of polling
JOB = {
    "forest": {"n_estimators": 300, "max_depth": 4, "max_features": 1.0, "random_state": 0},
    "n_lambdas": 60,
    "max_rules": 40,
    "patience": None,  # on to the budget: linear terms come first on this table, then rules beside them
    "cv_folds": FOLDS,
    "selection": "1se",
    "validation": {"seed": 0},
    "stability_resamples": FITS,
}
NUMBER = r"(-?[\d.]+(?:e[+-]?\d+)?)"
DURATION = re.compile(r"^([\d.]+) (ms|s)$")


def terms_text(record: dict) -> str:
    """The counts as the dashboard words them (chart.js termsText)."""

    def counted(count: int, noun: str) -> str:
        return f"{count:,} {noun}{'' if count == 1 else 's'}"

    if record.get("n_rules") is None or record.get("n_linear") is None:
        return counted(record["n_terms"], "term")
    if not record["n_linear"]:
        return counted(record["n_rules"], "rule")
    return (
        f"{counted(record['n_terms'], 'term')}: {counted(record['n_rules'], 'rule')}, "
        f"{counted(record['n_linear'], 'linear term')}"
    )


def record_progress_texts(page) -> None:
    """Keep every text the page shows in a progress field, in order, in window.progressSeen."""
    page.evaluate("""() => {
        window.progressSeen = [];
        const note = () => {
            for (const element of document.querySelectorAll("[data-field=progress]")) {
                if (window.progressSeen.at(-1) !== element.textContent) window.progressSeen.push(element.textContent);
            }
        };
        note();
        new MutationObserver(note).observe(document.body, { subtree: true, childList: true, characterData: true });
    }""")


def seconds_shown(text: str) -> float:
    value, unit = DURATION.match(text).groups()
    return float(value) / (1000 if unit == "ms" else 1)


def chart_texts(chart) -> list[dict]:
    """Every text of the chart with its box (the page's own layout)."""
    return chart.evaluate("""svg => [...svg.querySelectorAll("text")].filter(t => t.textContent).map(t => {
        const box = t.getBoundingClientRect();
        return { text: t.textContent, x: box.x, y: box.y, width: box.width, height: box.height };
    })""")


def assert_no_label_overlaps(chart) -> None:
    texts = chart_texts(chart)
    for a, b in combinations(texts, 2):
        apart = (
            a["x"] + a["width"] <= b["x"] + 0.5
            or b["x"] + b["width"] <= a["x"] + 0.5
            or a["y"] + a["height"] <= b["y"] + 0.5
            or b["y"] + b["height"] <= a["y"] + 0.5
        )
        assert apart, f"chart labels overlap: {a} and {b}"


def dot_x(chart, step: int) -> float:
    return float(chart.locator(f"circle.dot-validation[data-step='{step}']").get_attribute("cx"))


def check_the_chart(chart, steps: list[dict], cv: dict, selected: int, threshold: float) -> None:
    """The chart as drawn at the page's width: lines where their steps' dots are, no zig-zag, terms along the top
    at their steps, every tick the step under it, no two labels overlapping."""
    for marker, step in ((".cv-min-step", cv["best_min"]), (".cv-1se-step", cv["best_1se"])):
        line = chart.locator(f"line{marker}")
        assert line.count() == 1
        assert float(line.get_attribute("x1")) == pytest.approx(dot_x(chart, step), abs=0.01)
        assert ("chosen" in line.get_attribute("class").split()) == (step == selected)
    if cv["best_min"] != cv["best_1se"]:  # the two choices stand apart, each visible
        assert abs(dot_x(chart, cv["best_min"]) - dot_x(chart, cv["best_1se"])) >= 4
    label = chart.locator(".cv-threshold text").text_content()
    assert float(re.search(rf"= {NUMBER}$", label).group(1)) == pytest.approx(threshold, rel=6e-4)

    validation = chart.locator("polyline.series-validation").get_attribute("points").split()
    xs = [float(point.split(",")[0]) for point in validation]
    assert len(xs) == len(steps) and all(a < b for a, b in pairwise(xs))  # one x per step, left to right

    at_x = {round(dot_x(chart, step["index"]), 2): step for step in steps}
    counts = chart.locator(".top-axis g[data-count]")
    assert counts.count() >= 2
    for k in range(counts.count()):
        count = counts.nth(k)
        x = float(count.locator("line").get_attribute("x1"))
        assert count.locator("text").text_content() == str(at_x[round(x, 2)]["n_terms"])
    ticks = chart.locator("g.axis > text[text-anchor='middle']")  # the bottom axis: step numbers and its title
    for k in range(ticks.count()):
        tick = ticks.nth(k)
        if tick.text_content().isdigit():
            assert float(tick.get_attribute("x")) == pytest.approx(dot_x(chart, int(tick.text_content())), abs=0.01)
    assert_no_label_overlaps(chart)


def test_a_cross_validated_path_shows_why_its_step_was_chosen_with_honest_counts_and_progress(served, browser):
    from playwright.sync_api import expect
    from sklearn.datasets import load_diabetes

    errors: list[str] = []
    page = new_page(browser, errors)
    base, api = served.base_url, served.api
    table = load_diabetes(as_frame=True).frame.to_csv(index=False).encode()
    dataset = api.post("/v1/datasets?target=target", content=table, headers={"Content-Type": "text/csv"}).json()
    sign_in(page, base, "/dashboard/jobs")
    submitted = api.post("/v1/jobs", json={"dataset_id": dataset["id"], **JOB})
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["id"]
    page.goto(f"{base}/dashboard/jobs/{job_id}")
    record_progress_texts(page)
    expect(page.locator("#view dd[data-field='status']")).to_have_text("succeeded", timeout=600_000)

    # progress named every phase as it went: folds as they ended, the stability fits (each a job, run beside the
    # folds: counted while the job waits for them, issue 38), the refit's steps, the stability measured
    seen = page.evaluate("window.progressSeen")
    # (the refit, a fraction of a second here, may pass between two of the page's reads: tests/service/
    # test_job_progress.py follows every progress write)
    folds = [int(m.group(1)) for m in (re.match(rf"folds: (\d) of {FOLDS} finished$", t) for t in seen) if m]
    fits = [int(m.group(1)) for m in (re.match(rf"stability: (\d) of {FITS} half-sample fits$", t) for t in seen) if m]
    assert folds and folds == sorted(folds) and fits == sorted(fits) and all(0 <= f <= FITS for f in fits), seen
    phases = [text.split(":")[0] for text in seen if ":" in text]
    order = [phase for k, phase in enumerate(phases) if k == 0 or phase != phases[k - 1]]
    named = " ".join(phase for phase in order if phase in ("folds", "refit", "stability"))
    assert re.fullmatch(r"folds( stability)?( refit)?( stability)?", named), seen

    job = api.get(f"/v1/jobs/{job_id}").json()
    result = api.get(f"/v1/jobs/{job_id}/result").json()
    cells = [api.get(f"/v1/jobs/{cell}").json() for cell in job["cells"]]
    fit_cells = [api.get(f"/v1/jobs/{fit}").json() for fit in job["stability_fits"]]
    assert len(fit_cells) == FITS and {fit["kind"] for fit in fit_cells} == {"stability_fit"}
    steps, cv, selected = result["steps"], result["cv"], result["selected"]

    # the timings are the records' own timestamps: the parent's work began with its first cell (a fold or a fit)
    timings = job["timings"]
    ended = cells + fit_cells
    first, last = min(c["started_at"] for c in ended), max(c["finished_at"] for c in ended)
    assert timings["queue_wait"] == pytest.approx(first - job["created_at"], abs=1e-6)
    assert timings["cells"] == pytest.approx(last - first, abs=1e-6)
    assert timings["wait_after_cells"] == pytest.approx(job["started_at"] - last, abs=1e-6)
    assert timings["total"] == pytest.approx(job["finished_at"] - job["created_at"], abs=1e-6)
    assert timings["refit"] + timings["stability"] + timings["rules"] <= job["finished_at"] - job["started_at"]
    for cell in cells:  # each fold waited in the queue from its submission to its start
        assert cell["timings"]["queue_wait"] == pytest.approx(cell["started_at"] - cell["queued_at"], abs=1e-6)
    card = page.locator("section.card", has=page.get_by_role("heading", name="Timings", exact=True))
    for field, words in {
        "queue_wait": "queue wait (before the job started)",
        "cells": "cells (first cell's start to last cell's end)",
        "wait_after_cells": "wait for a worker after the cells",
        "refit": "refit on every row",
        "stability": "stability fits",
        "total": "total (submission to end)",
    }.items():
        shown = card.locator(f"dd[data-field='timing-{field}']")
        expect(shown.locator("xpath=preceding-sibling::dt")).to_have_text(words)
        assert seconds_shown(shown.inner_text()) == pytest.approx(timings[field], rel=6e-3, abs=6e-4)

    # the choice, recomputed from the steps: within the budget, the lowest mean loss and one standard error above it
    within = [step for step in steps if step["n_terms"] <= JOB["max_rules"]]
    lowest = min(within, key=lambda step: step["val_loss"])
    threshold = lowest["val_loss"] + lowest["val_loss_se"]
    rule = next(step for step in within if step["val_loss"] <= threshold)
    assert (cv["best_min"], cv["best_1se"], selected) == (lowest["index"], rule["index"], rule["index"])
    sentence = page.locator("#cv-choice").inner_text()
    found = re.search(
        rf"the lowest mean validation MSE is {NUMBER} ± {NUMBER} \(one standard error over {FOLDS} folds\) at step "
        rf"(\d+) \((.+?)\); one standard error above it is {NUMBER}; the (sparsest|first) step under that line is "
        rf"step (\d+) \((.+?)\), chosen by the one standard error rule\.$",
        sentence,
    )
    assert found, sentence
    assert float(found.group(1)) == pytest.approx(lowest["val_loss"], rel=6e-4)
    assert float(found.group(2)) == pytest.approx(lowest["val_loss_se"], rel=6e-4)
    assert (int(found.group(3)), found.group(4)) == (lowest["index"], terms_text(lowest))
    assert float(found.group(5)) == pytest.approx(threshold, rel=6e-4)
    assert (int(found.group(7)), found.group(8)) == (rule["index"], terms_text(rule))
    sparsest = all(step["n_terms"] >= rule["n_terms"] for step in within if step["val_loss"] <= threshold)
    assert found.group(6) == ("sparsest" if sparsest else "first")

    chart = page.locator(".chart svg[role=slider]")
    expect(chart.locator("title")).to_contain_text("MSE by step, terms along the top")
    check_the_chart(chart, steps, cv, selected, threshold)

    # counts: every step's terms are its rules and linear terms, counted again from the terms of its rules answer (a
    # rule has conditions, each selected rule one member of the rule that says its conditions; a linear term none)
    for step in steps:
        answer = api.get(f"/v1/jobs/{job_id}/steps/{step['index']}/rules").json()["rules"]
        with_conditions = [rule for rule in answer["rules"] if rule["conditions"]]
        assert len(with_conditions) == len(answer["rules"])
        assert step["n_rules"] == sum(len(rule["members"]) for rule in with_conditions)
        assert (
            step["n_linear"] == len(answer.get("linear", [])) and step["n_terms"] == step["n_rules"] + step["n_linear"]
        )
    assert any(step["n_rules"] and step["n_linear"] for step in steps)  # steps with both kinds of term
    rules = api.get(f"/v1/jobs/{job_id}/steps/{selected}/rules").json()
    linear = rules["rules"].get("linear", [])
    assert rules["n_linear"] == len(linear) > 0 and rules["n_terms"] == steps[selected]["n_terms"] <= JOB["max_rules"]
    summary = job["summary"]
    assert (summary["n_terms"], summary["n_rules"], summary["n_linear"]) == (
        rules["n_terms"],
        rules["n_rules"],
        rules["n_linear"],
    )
    expect(page.locator("#selected-summary")).to_contain_text(f"Selected step {selected} ({terms_text(summary)}): ")
    for field in ("n_terms", "n_rules", "n_linear"):
        expect(page.locator(f"#step-facts dd[data-field='{field}']")).to_have_text(f"{rules[field]:,}")
    expect(page.locator("#rules-title")).to_have_text(f"Rules ({len(rules['rules']['rules'])})")
    expect(page.locator("#linear-title")).to_have_text(f"Linear terms ({len(linear)})")
    expect(page.locator("dd[data-field='max_rules']")).to_have_text(
        f"at most {JOB['max_rules']} terms (rules + linear terms)"
    )
    # issue 39: the folds' Dice index beside the cross-validation; with half-sample fits, the tables show theirs
    expect(page.locator("dd[data-field='cv-stability']")).to_have_text(
        f"Dice {cv['stability']['dice'][selected]:.3g} between the {FOLDS} folds' rules at the selected step"
    )
    expect(page.locator("#rule-stability")).to_be_visible()
    expect(page.locator("#rule-fold-stability")).to_have_count(0)
    expect(page.locator("#linear-terms th", has_text=f"Selected in (of {FITS} half-sample fits)")).to_have_count(1)
    page.get_by_text(f"Every step ({len(steps)})").click()
    row = page.locator(f"tr[data-step='{selected}']")
    for header, field in (("Terms", "n_terms"), ("Rules", "n_rules"), ("Linear terms", "n_linear")):
        expect(row.locator(f"td[data-label='{header}']")).to_have_text(f"{steps[selected][field]:,}")
    shoot(page, "cv-dashboard", "cv-job")
    for width in ("400",):  # the chart drawn narrow keeps its lines at their steps and its labels apart
        page.set_viewport_size({"width": int(width), "height": 800})
        page.wait_for_timeout(400)
        check_the_chart(chart, steps, cv, selected, threshold)
    page.set_viewport_size({"width": 1280, "height": 800})

    page.goto(f"{base}/dashboard/jobs")
    expect(page.locator(f"tr[data-job='{job_id}']")).to_contain_text(f"at {terms_text(summary)}")
    shoot(page, "cv-dashboard", "jobs")
    assert errors == []


def abalone_cv_job(served, page, n_lambdas: int, max_rules: int) -> tuple[str, dict]:
    """(job id, result) of a 3-fold cross-validated job on abalone (20 trees of depth 3), its page open in ``page``
    once it succeeded."""
    from playwright.sync_api import expect

    base, api = served.base_url, served.api
    dataset = api.post(
        "/v1/datasets?target=rings", content=ABALONE.read_bytes(), headers={"Content-Type": "application/gzip"}
    ).json()
    body = {
        "dataset_id": dataset["id"],
        "forest": {"n_estimators": 20, "max_depth": 3, "random_state": 0},
        "n_lambdas": n_lambdas,
        "max_rules": max_rules,
        "cv_folds": 3,
        "validation": {"seed": 0},
    }
    submitted = api.post("/v1/jobs", json=body)
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["id"]
    sign_in(page, base, "/dashboard/jobs")
    page.goto(f"{base}/dashboard/jobs/{job_id}")
    expect(page.locator("#view dd[data-field='status']")).to_have_text("succeeded", timeout=120_000)
    result = api.get(f"/v1/jobs/{job_id}/result").json()
    return job_id, result


def test_a_cross_validated_step_without_half_sample_fits_shows_how_often_each_fold_selected_its_rules(served, browser):
    """Issue 39, item 3: with no stability_resamples, the job page gives the folds' Dice index at the selected step,
    and the rule and linear-term tables how often the folds' paths selected each term there, as the API says (the
    API's numbers are the library's: tests/service/test_cross_validation.py)."""
    from playwright.sync_api import expect

    errors: list[str] = []
    page = new_page(browser, errors)
    api = served.api
    job_id, result = abalone_cv_job(served, page, n_lambdas=20, max_rules=10)
    selected, measured = result["selected"], result["cv"]["stability"]
    assert result["stability"] is None and len(measured["dice"]) == len(result["steps"])
    expect(page.locator("dd[data-field='cv']")).to_contain_text("3-fold cross-validation")
    expect(page.locator("dd[data-field='cv-stability']")).to_have_text(
        f"Dice {measured['dice'][selected]:.3g} between the 3 folds' rules at the selected step"
    )
    expect(page.locator("dd[data-field='stability']")).to_have_count(0)

    rules = api.get(f"/v1/jobs/{job_id}/steps/{selected}/rules").json()
    assert rules["stability"] is None and rules["fold_stability"]["frequencies"] == measured["frequencies"][selected]
    dice = f"{measured['dice'][selected]:.3g}"
    expect(page.locator("#rule-fold-stability")).to_contain_text(
        f"Rule stability over the 3 folds: their paths at this step share a Dice index of {dice} "
    )
    expect(page.locator("#rule-stability")).to_have_count(0)
    frequencies = measured["frequencies"][selected]
    n_rules = len(rules["rules"]["rules"])
    assert n_rules and any(0 < f < 1 for f in frequencies)  # the figures tell folds apart here
    table = page.locator("#step table.data").first
    expect(table.locator("th", has_text="Selected in (of 3 folds)")).to_have_count(1)
    for position, rule in enumerate(rules["rules"]["rules"]):
        shown = page.locator(f"#step tr[data-rule='{rule['id']}'] .frequency")
        expect(shown).to_have_text(f"{round(100 * frequencies[position])}%")
        expect(shown).to_have_attribute(
            "title", f"selected by {round(3 * frequencies[position])} of 3 folds' paths at this step"
        )
    for position, term in enumerate(rules["rules"].get("linear", [])):
        shown = page.locator(f"#linear-terms tr[data-linear='{term['id']}'] .frequency")
        expect(shown).to_have_text(f"{round(100 * frequencies[n_rules + position])}%")
    page.get_by_text(f"Every step ({len(result['steps'])})").click()
    for step in result["steps"]:  # each step's Dice index of the folds' rule sets
        cell = page.locator(f"tr[data-step='{step['index']}'] td[data-label=\"Folds' Dice\"]")
        expect(cell).to_have_text(f"{measured['dice'][step['index']]:.3g}")
        se = page.locator(f"tr[data-step='{step['index']}'] td[data-label='Validation MSE standard error']")
        expect(se).to_have_text(f"{step['val_loss_se']:.5g}")  # the folds' standard error, in words a person reads
    shoot(page, "cv-dashboard", "fold-stability")
    assert errors == []


def frontier_figures(chart) -> dict[int, dict]:
    """Every point the frontier chart draws, by step: its place and whether it is on the frontier."""
    points = chart.evaluate("""svg => [...svg.querySelectorAll("circle[data-step]")].map(c => ({
        step: Number(c.dataset.step), x: Number(c.getAttribute("cx")), y: Number(c.getAttribute("cy")),
        frontier: c.classList.contains("frontier-point") }))""")
    return {point["step"]: point for point in points}


def check_frontier_chart(chart, result: dict, across: str) -> None:
    """The chart's points are the steps within the budget, those on the frontier the API's, placed in the order of
    their Dice index (up) and of ``across`` (right), the selected step ringed; no two labels overlap."""
    steps, frontier, dice = result["steps"], result["cv"]["frontier"], result["cv"]["stability"]["dice"]
    budget = result["parameters"]["path"]["max_rules"]
    within = [s["index"] for s in steps if s["n_terms"] <= budget]
    drawn = frontier_figures(chart)
    assert sorted(drawn) == within
    assert sorted(k for k, point in drawn.items() if point["frontier"]) == [f["step"] for f in frontier]
    for a, b in combinations(within, 2):
        for value, axis, sign in ((dice[a] - dice[b], "y", -1), (steps[a][across] - steps[b][across], "x", 1)):
            placed = drawn[a][axis] - drawn[b][axis]
            assert (value == 0 and abs(placed) < 1e-6) or (value * placed * sign > 0), (a, b, axis)
    ring = chart.locator("circle.frontier-selected")
    assert (float(ring.get_attribute("cx")), float(ring.get_attribute("cy"))) == pytest.approx(
        (drawn[result["selected"]]["x"], drawn[result["selected"]]["y"]), abs=0.01
    )
    assert_no_label_overlaps(chart)


def expected_frontier_sentence(result: dict) -> tuple[str, list[float]]:
    """The sentence on the selected step's place, recomputed from the API's steps, Dice and frontier: its words as a
    pattern (its numbers as groups) and the numbers it should give."""
    steps, frontier, dice = result["steps"], result["cv"]["frontier"], result["cv"]["stability"]["dice"]
    k = result["selected"]
    chosen = steps[k]
    head = re.escape(f"The selected step {k} ({terms_text(chosen)})")
    on = next((f for f in frontier if f["step"] == k), None)
    if on is not None:
        stabler = sorted((f for f in frontier if f["dice"] > dice[k]), key=lambda f: (f["val_loss"], f["n_terms"]))
        if not stabler:
            most_stable = rf"{head} is on the frontier, and no step on it is more stable \(folds' Dice {NUMBER}\)\.$"
            return most_stable, [dice[k]]
        other = stabler[0]
        numbers = [other["dice"], dice[k], other["val_loss"], other["val_loss_se"], chosen["val_loss"]]
        numbers += [chosen["val_loss_se"], 100 * (other["val_loss"] / chosen["val_loss"] - 1)]
        return (
            rf"{head} is on the frontier: no step has as few terms, as low a mean validation MSE and as high a folds' "
            rf"Dice index together\. The most accurate step more stable than it is step {other['step']} "
            rf"\({re.escape(terms_text(other))}\): folds' Dice {NUMBER} against {NUMBER}, mean validation MSE "
            rf"{NUMBER} ± {NUMBER} against {NUMBER} ± {NUMBER} \(\+?{NUMBER}%\)\.$"
        ), numbers
    beating = [
        f for f in frontier if f["n_terms"] <= chosen["n_terms"] and f["val_loss"] <= chosen["val_loss"]
        and f["dice"] >= dice[k]
    ]  # fmt: skip
    other = min(beating, key=lambda f: (-f["dice"], f["val_loss"], f["n_terms"]))
    numbers = [other["dice"], dice[k], other["val_loss"], other["val_loss_se"], chosen["val_loss"]]
    numbers += [chosen["val_loss_se"], other["n_terms"], chosen["n_terms"]]
    return (
        rf"{head} is not on the frontier: step {other['step']} \({re.escape(terms_text(other))}\) is at least as good "
        rf"on all three, folds' Dice {NUMBER} against {NUMBER}, mean validation MSE {NUMBER} ± {NUMBER} against "
        rf"{NUMBER} ± {NUMBER}, {NUMBER} terms against {NUMBER}\.$"
    ), numbers


def check_frontier_sentence(sentence: str, result: dict) -> None:
    pattern, numbers = expected_frontier_sentence(result)
    found = re.search(pattern, sentence)
    assert found, sentence
    assert len(found.groups()) == len(numbers)
    for text, number in zip(found.groups(), numbers, strict=True):  # each the number rounded where it is shown
        decimals = len(text.partition(".")[2])
        assert float(text) == pytest.approx(number, abs=0.5 * 10**-decimals + 1e-12), (text, number, sentence)


def test_a_cross_validated_job_draws_its_frontier_and_each_frontier_step_opens_its_step(served, browser):
    """Issue 39, item 4: the job page draws every step within the budget by its folds' Dice against its mean
    validation loss (or its terms), marks the API's frontier (the library's: tests/service/test_cross_validation.py),
    says where the selected step stands on it with the numbers recomputed here, and a click or Enter on a frontier
    point opens that step."""
    from playwright.sync_api import expect

    errors: list[str] = []
    page = new_page(browser, errors)
    base, api = served.base_url, served.api
    body = {"max_rules": 15}
    job_id, result = abalone_cv_job(served, page, n_lambdas=30, max_rules=body["max_rules"])
    frontier, dice = result["cv"]["frontier"], result["cv"]["stability"]["dice"]
    within = [s["index"] for s in result["steps"] if s["n_terms"] <= body["max_rules"]]
    assert 3 <= len(frontier) <= len(within) - 3  # steps on it and steps off it

    card = page.locator("#frontier")
    chart = card.locator(".chart svg")
    expect(card.locator("circle.frontier-point")).to_have_count(len(frontier))
    check_frontier_chart(chart, result, "val_loss")
    check_frontier_sentence(card.locator("#frontier-choice").inner_text(), result)
    # the sentence's other cases, the page's own module on this result with another step selected: the intercept
    # alone (the most stable: Dice 1) and a step off the frontier
    off = [k for k in within if k not in {f["step"] for f in frontier}]
    for selected in (0, off[0]):
        assert (selected in {f["step"] for f in frontier}) == (selected == 0) and dice[0] == 1
        told = page.evaluate(
            "async ([result, loss]) => (await import('/dashboard/assets/frontier.js')).frontierSentence(result, loss)",
            [{**result, "selected": selected}, api.get(f"/v1/jobs/{job_id}").json()["loss_info"]],
        )
        check_frontier_sentence(told, {**result, "selected": selected})
    shoot(page, "cv-dashboard", "frontier", "#frontier")
    page.set_viewport_size({"width": 400, "height": 800})
    page.wait_for_timeout(400)
    check_frontier_chart(chart, result, "val_loss")
    page.set_viewport_size({"width": 1280, "height": 800})
    card.get_by_label("Across").select_option("n_terms")
    check_frontier_chart(chart, result, "n_terms")
    shoot(page, "cv-dashboard", "frontier-terms", "#frontier")

    # a click on a frontier step other than the selected one opens it; Enter on another does too
    others = [f["step"] for f in frontier if f["step"] != result["selected"]]
    chart.locator(f"circle.frontier-point[data-step='{others[-1]}']").click()
    expect(page).to_have_url(f"{base}/dashboard/jobs/{job_id}/steps/{others[-1]}")
    expect(page.locator("#step-title")).to_have_text(f"Step {others[-1]}")
    chart = page.locator("#frontier .chart svg")
    chart.locator(f"circle.frontier-point[data-step='{others[0]}']").focus()
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{base}/dashboard/jobs/{job_id}/steps/{others[0]}")
    expect(page.locator("#step-title")).to_have_text(f"Step {others[0]}")
    assert errors == []
