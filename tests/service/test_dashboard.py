"""The dashboard in a real browser (Debian's headless chromium through Playwright) against the API served
over HTTP with real workers and an API key: upload a dataset, submit a job and watch its progress, open the
path chart, click a step and read its rules and trees, promote it, predict one row from the form; then a
seven-class job (rules per class, log loss, AUC and accuracy, probabilities per class) and a count job (deviance,
MAE, rate factors).

The assertions compare what the page shows with what the API answers. Screenshots at 1280x800 and 400 px
wide are saved under test-artifacts/dashboard/.
"""

import itertools
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from solver import PathSpec
from solver.encoding import ColumnSpec, TableEncoding
from solver.rule_text import RuleWording, column_groups
from solver.rule_types import Condition
from tests.support.browser import API_KEY, SIZES
from tests.support.browser import shoot as shoot_in
from tests.support.data import ABALONE, ELEVATORS, FIRST_ABALONE_ROW
from tests.support.synthetic import GRADES, grades_table, visits_table

pytestmark = pytest.mark.integration

# a job that runs for a few seconds, so that its progress arrives step by step
JOB_SETTINGS = {"Trees": "800", "Depth": "4", "Rule budget (most terms)": "40", "λ steps": "200"}
ROW = FIRST_ABALONE_ROW


def shoot(page, name: str) -> None:
    shoot_in(page, "dashboard", name)


def fact(page, field: str, scope: str = "#step-facts") -> str:
    return page.locator(f"{scope} dd[data-field='{field}']").inner_text()


def promote(page, name: str, button=re.compile(r"Promote step \d+ to a model")) -> str:
    """Promote the step on screen to model ``name`` through its dialog (``button``: the confirming button's name);
    returns the new model's id from the page it lands on."""
    page.get_by_text("Promote this step to a model").click()
    page.get_by_label("Model name").fill(name)
    page.get_by_role("button", name=button).click()
    page.wait_for_url(re.compile(r".*/dashboard/models/mdl_\w+$"))
    return page.url.rsplit("/", 1)[1]


def fill_row(page, row: dict) -> None:
    """Type ``row`` into the model page's prediction form, opening its fold of the columns the model does not use."""
    from playwright.sync_api import expect

    expect(page.get_by_role("button", name="Predict")).to_be_visible()  # the form is drawn
    folded = page.locator("details.unused-columns:not([open]) > summary")
    if folded.count():
        folded.click()
    for column, value in row.items():
        control = page.get_by_label(column, exact=True)
        if control.evaluate("element => element.tagName") == "SELECT":
            control.select_option(str(value))
        else:
            control.fill(str(value))


def record_progress_texts(page) -> None:
    """Keep every text the page shows in a progress field, in order, in window.progressSeen."""
    page.evaluate("""() => {
        window.progressSeen = [];
        new MutationObserver(() => {
            for (const element of document.querySelectorAll("[data-field=progress]")) {
                if (window.progressSeen.at(-1) !== element.textContent) window.progressSeen.push(element.textContent);
            }
        }).observe(document.body, { subtree: true, childList: true, characterData: true });
    }""")


def test_the_whole_product_from_the_browser(served, browser):
    from playwright.sync_api import expect

    page = browser.new_page(viewport=SIZES["1280"])
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    base, api = served.base_url, served.api

    # the key, entered once for the tab
    page.goto(f"{base}/dashboard/datasets")
    page.get_by_label("API key").fill(API_KEY)
    page.get_by_role("button", name="Use", exact=True).click()

    # upload: the target is picked from the file's own columns
    page.get_by_label("Table file").set_input_files(str(ABALONE))
    target = page.get_by_label("Target column")
    expect(target).to_be_enabled()
    target.select_option("rings")
    page.get_by_role("button", name="Upload").click()
    page.wait_for_url(re.compile(r".*/dashboard/datasets/ds_\w+$"))
    dataset_id = page.url.rsplit("/", 1)[1]
    dataset = api.get(f"/v1/datasets/{dataset_id}").json()
    assert dataset["target"] == "rings" and dataset["n_rows"] == 4177
    expect(page.get_by_role("heading", name="Target: rings")).to_be_visible()
    expect(page.locator("tr", has_text="Sex").first).to_contain_text("categorical")
    shoot(page, "dataset")

    # submit a job with a forest trained for it, and watch its progress arrive
    page.get_by_role("link", name="Run a job on this dataset").click()
    expect(page.get_by_label("Training dataset")).to_have_value(dataset_id)
    for label, value in JOB_SETTINGS.items():
        page.get_by_label(label, exact=True).fill(value)
    page.get_by_text("Solver settings").click()
    page.get_by_label("Tolerance").fill("1e-8")  # a path long enough to report its progress on the way
    record_progress_texts(page)
    page.get_by_role("button", name="Submit job").click()
    page.wait_for_url(re.compile(r".*/dashboard/jobs/job_\w+$"))
    job_id = page.url.rsplit("/", 1)[1]
    expect(page.locator("#view dd[data-field='status']")).to_have_text("succeeded", timeout=90_000)
    # the path's steps arrive while it runs: how many the page sees depends on the machine's speed (the worker reports
    # at most every 0.1 s, the page's stream reads every 0.25 s), at least one before the job's summary
    seen = page.evaluate("window.progressSeen")
    path_steps = [text for text in seen if re.match(r"path: step \d+ of ≤200", text)]
    assert path_steps and seen.index(path_steps[0]) < len(seen) - 1, seen

    # the path chart, the selected step's facts as the API gives them
    result = api.get(f"/v1/jobs/{job_id}/result").json()
    steps, selected = result["steps"], result["selected"]
    chart = page.locator(".chart svg[role=slider]")
    expect(chart).to_be_visible()
    expect(page.locator("#step-title")).to_have_text(re.compile(rf"^Step {selected}\b"))
    assert fact(page, "n_rules") == str(steps[selected]["n_rules"])
    expect(page.locator("#step .tree-figure").first).to_be_visible()  # the page is laid out: the chart stays put

    # click a step with about half the rules: its rules and trees
    half = max(k for k, step in enumerate(steps) if 2 <= step["n_rules"] <= steps[selected]["n_rules"] // 2)
    chart.locator("circle.dot-validation").nth(half).click()
    page.wait_for_url(re.compile(rf".*/dashboard/jobs/{job_id}/steps/\d+$"))
    clicked = int(page.url.rsplit("/", 1)[1])
    assert steps[clicked]["n_rules"] == steps[half]["n_rules"]
    expect(page.locator("#step-title")).to_have_text(re.compile(rf"^Step {clicked}\b"))
    rules = api.get(f"/v1/jobs/{job_id}/steps/{clicked}/rules").json()
    assert fact(page, "n_rules") == str(rules["n_rules"])
    assert float(fact(page, "val_loss")) == pytest.approx(rules["val_loss"], rel=1e-5)
    # the rules table (leaves merged), then the linear terms' (linear terms are on by default)
    expect(page.locator("#step table.data tbody tr[data-rule]")).to_have_count(len(rules["rules"]["rules"]))
    linear = rules["rules"].get("linear", [])
    assert rules["n_linear"] == len(linear) and rules["n_rules"] == len(rules["rules"]["rules"])
    assert rules["n_terms"] == rules["n_rules"] + rules["n_linear"]
    expect(page.locator("#linear-terms table.data tbody tr[data-linear]")).to_have_count(len(linear))
    expect(page.locator("#step .tree-figure").first).to_be_visible()  # the trees load after the rules
    all_trees = page.get_by_role("button", name=re.compile("Draw all"))
    if all_trees.count():
        all_trees.click()
    trees = {member["tree"] for rule in rules["rules"]["rules"] for member in rule["members"]}
    expect(page.locator("#step .tree-figure")).to_have_count(len(trees))
    members = sum(len(rule["members"]) for rule in rules["rules"]["rules"])
    expect(page.locator("#step .tree .leaf.selected")).to_have_count(members)
    antecedents = page.locator("#step .tree .node.antecedent")
    assert antecedents.count() == rules["n_antecedents"]

    # the arrow keys walk the path too
    chart.focus()
    page.keyboard.press("ArrowRight")
    expect(page.locator("#step-title")).to_have_text(re.compile(rf"^Step {clicked + 1}\b"))
    page.keyboard.press("ArrowLeft")
    expect(page.locator("#step-title")).to_have_text(re.compile(rf"^Step {clicked}\b"))
    assert fact(page, "n_rules") == str(rules["n_rules"])
    expect(page.locator("#step .tree-figure").first).to_be_visible()
    shoot(page, "job-step")

    # promote the step, then score a row typed into the form
    model_id = promote(page, "abalone-dashboard", button=f"Promote step {clicked} to a model")
    model = api.get(f"/v1/models/{model_id}").json()
    assert model["provenance"]["step"] == clicked and model["n_rules"] == len(rules["rules"]["rules"])
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Model abalone-dashboard v{model['version']}")
    fill_row(page, ROW)
    page.get_by_role("button", name="Predict").click()
    expect(page.locator("#prediction")).to_be_visible()
    answer = api.post(f"/v1/models/{model_id}/predict?explain=true", json={"dataframe_records": [ROW]}).json()
    assert float(page.locator("#prediction").inner_text()) == pytest.approx(answer["predictions"][0], rel=1e-5)
    expect(page.locator("#score table.data tbody tr[data-rule]")).to_have_count(len(answer["explanations"][0]))
    scored_linear = (answer.get("linear_contributions") or [[]])[0]  # every linear term of the model, per row
    assert len(scored_linear) == len(model["ensemble"].get("linear", []))
    expect(page.locator("#score table.data tbody tr[data-linear]")).to_have_count(len(scored_linear))
    shoot(page, "model")

    # every view has its own URL: reloads and deep links show the same thing (the key kept for the tab)
    page.reload()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Model abalone-dashboard v{model['version']}")
    page.goto(f"{base}/dashboard/jobs/{job_id}/steps/{clicked}")
    expect(page.locator("#step-title")).to_have_text(re.compile(rf"^Step {clicked}\b"))
    assert fact(page, "n_rules") == str(rules["n_rules"])
    page.goto(f"{base}/dashboard/jobs")
    expect(page.locator(f"tr[data-job='{job_id}']")).to_contain_text("succeeded")
    shoot(page, "jobs")
    assert errors == []


MULTICLASS_FOREST = {"n_estimators": 20, "max_depth": 3, "max_features": "sqrt", "random_state": 0}
MULTICLASS_PATH = {"n_lambdas": 15, "max_rules": 10, "max_iter": 300}
GRADES_ROW = {"size": 8.5, "age": 40, "region": "north", "score": 0.3}


def test_a_multiclass_and_a_count_job_show_per_class_rules_and_their_metrics(served, browser, tmp_path):
    from playwright.sync_api import expect

    page = browser.new_page(viewport=SIZES["1280"])
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    base, api = served.base_url, served.api
    page.goto(f"{base}/dashboard/datasets")
    page.get_by_label("API key").fill(API_KEY)
    page.get_by_role("button", name="Use", exact=True).click()

    # a seven-class text target, detected as multiclass: its classes and their rows
    grades = tmp_path / "grades.csv"
    grades_table().to_csv(grades, index=False)
    page.get_by_label("Table file").set_input_files(str(grades))
    expect(page.get_by_label("Target column")).to_be_enabled()
    page.get_by_label("Target column").select_option("grade")
    page.get_by_role("button", name="Upload").click()
    page.wait_for_url(re.compile(r".*/dashboard/datasets/ds_\w+$"))
    dataset = api.get(f"/v1/datasets/{page.url.rsplit('/', 1)[1]}").json()
    assert dataset["task"] == "multiclass" and dataset["classes"] == GRADES
    expect(page.locator("dd[data-field='task']")).to_have_text("multiclass")
    expect(page.get_by_role("heading", name="Target: grade").locator("..").locator("tbody tr")).to_have_count(7)
    shoot(page, "multiclass-dataset")

    # the path: log loss, AUC and accuracy per step, in the table and the chart
    job = api.post("/v1/jobs", json={"dataset_id": dataset["id"], "forest": MULTICLASS_FOREST, **MULTICLASS_PATH})
    assert job.status_code == 202, job.text
    job_id = job.json()["id"]
    page.goto(f"{base}/dashboard/jobs/{job_id}")
    expect(page.locator("#view dd[data-field='status']")).to_have_text("succeeded", timeout=90_000)
    result = api.get(f"/v1/jobs/{job_id}/result").json()
    selected = result["steps"][result["selected"]]
    # the path and the selected step's rules are drawn once they have loaded
    expect(page.locator("#step-title")).to_have_text(re.compile(rf"^Step {result['selected']}\b"))
    expect(page.locator("#selected-summary")).to_contain_text(f"validation AUC {selected['val_auc']:.4g}"[:20])
    expect(page.locator("#selected-summary")).to_contain_text("Brier score")
    expect(page.locator("#selected-summary")).to_contain_text("log loss")
    expect(page.locator("dd[data-field='classes']")).to_have_text(", ".join(GRADES))
    headers = page.locator("details table.data thead th").all_text_contents()
    assert {
        "Train log loss",
        "Validation log loss",
        "Validation AUC",
        "Validation accuracy",
        "Validation Brier score",
    } <= set(headers), headers
    metric = page.locator(".chart").first.locator("..").get_by_label("Metric")
    assert metric.locator("option").all_inner_texts() == ["log loss", "AUC", "accuracy", "Brier score"]
    metric.select_option(label="AUC")
    expect(page.locator(".chart svg title").first).to_contain_text("AUC by step, terms along the top")
    expect(page.locator("#step-facts dd[data-field='val_auc']")).to_be_visible()

    # the selected step's rules: one column per class, the intercept per class
    rules = api.get(f"/v1/jobs/{job_id}/steps/{result['selected']}/rules").json()
    table = page.locator("#step table.data")
    assert table.locator("thead th").all_inner_texts()[2:9] == GRADES
    expect(table.locator("tbody tr[data-rule]")).to_have_count(len(rules["rules"]["rules"]))
    expect(page.locator("#linear-terms tbody tr[data-linear]")).to_have_count(len(rules["rules"].get("linear", [])))
    first = rules["rules"]["rules"][0]
    row = table.locator(f"tbody tr[data-rule='{first['id']}']")
    shown = [float(text) for text in row.locator("td.wide-only .class-amount").all_inner_texts()]
    assert shown == pytest.approx(first["contribution"], rel=5e-3, abs=5e-4)
    expect(page.locator("#intercept")).to_contain_text("A ")
    expect(page.locator("#step .tree .leaf.selected.per-class").first).to_be_visible()
    shoot(page, "multiclass-job-step")

    # promoted, a row scores to a class with a probability per class and the rules that fired
    model_id = promote(page, "grades-dashboard")
    fill_row(page, GRADES_ROW)
    page.get_by_role("button", name="Predict").click()
    answer = api.post(f"/v1/models/{model_id}/predict?explain=true", json={"dataframe_records": [GRADES_ROW]}).json()
    expect(page.locator("#prediction")).to_have_text(answer["predictions"][0])
    expect(page.locator("#probabilities li")).to_have_count(7)
    expect(page.locator("#probabilities li.predicted")).to_have_attribute("data-class", answer["predictions"][0])
    shown = page.locator(f"#probabilities li[data-class='{answer['predictions'][0]}'] .mono").inner_text()
    best = max(answer["probabilities"][0])
    assert float(shown) == pytest.approx(best, rel=1e-3)
    expect(page.locator("#score table.data tbody tr[data-rule]")).to_have_count(len(answer["explanations"][0]))
    scored_linear = (answer.get("linear_contributions") or [[]])[0]
    expect(page.locator("#score table.data tbody tr[data-linear]")).to_have_count(len(scored_linear))
    expect(page.locator("#model-metrics")).to_contain_text("validation log loss")
    shoot(page, "multiclass-model")

    # a count: the Poisson deviance and the MAE of the rate, rules as rate factors
    visits = visits_table().to_csv(index=False).encode()
    count = api.post("/v1/datasets?target=visits&task=count", content=visits, headers={"Content-Type": "text/csv"})
    assert count.status_code == 201, count.text
    job = api.post("/v1/jobs", json={"dataset_id": count.json()["id"], "forest": MULTICLASS_FOREST, **MULTICLASS_PATH})
    job_id = job.json()["id"]
    page.goto(f"{base}/dashboard/jobs/{job_id}")
    expect(page.locator("#view dd[data-field='status']")).to_have_text("succeeded", timeout=90_000)
    expect(page.locator("#step-title")).to_be_visible()
    expect(page.locator("#selected-summary")).to_contain_text("validation deviance")
    expect(page.locator("#selected-summary")).to_contain_text("MAE")
    headers = page.locator("details table.data thead th").all_text_contents()
    assert {"Validation deviance", "Validation MAE"} <= set(headers), headers
    assert page.locator("#step table.data thead th").all_inner_texts()[2:4] == ["Log rate", "Rate ×"]
    expect(page.locator("#intercept")).to_contain_text("base rate")
    shoot(page, "count-job-step")
    assert errors == []


def test_node_rules_and_linear_terms_from_the_form_to_a_scored_row(served, browser):
    """The form's candidate terms (issue 18): rules from every node capped at two conditions, linear terms; the
    step shows its linear terms and its longest rule, its trees outline the inner nodes that are rules, and a
    scored row shows what each linear term added."""
    from playwright.sync_api import expect

    page = browser.new_page(viewport=SIZES["1280"])
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    base, api = served.base_url, served.api
    uploaded = api.post(
        "/v1/datasets?target=rings", content=ABALONE.read_bytes(), headers={"Content-Type": "application/gzip"}
    )
    assert uploaded.status_code in (200, 201), uploaded.text
    dataset_id = uploaded.json()["id"]
    page.goto(f"{base}/dashboard/jobs/new?dataset={dataset_id}")
    page.get_by_label("API key").fill(API_KEY)
    page.get_by_role("button", name="Use", exact=True).click()

    # the three settings, with the API's defaults: PathSpec's, through the request schema
    request = api.get("/openapi.json").json()["components"]["schemas"]["PathJobRequest"]["properties"]
    defaults = PathSpec.defaults()
    assert request["candidates"].get("default") is defaults["candidates"] is None  # those that satisfy the cap
    assert request["linear_terms"]["default"] is defaults["linear_terms"]
    assert request["penalty"].get("default") is defaults["penalty"] is None  # the loss's own: mcp, or l1 for cox
    penalty = page.get_by_label("Penalty", exact=True)
    expect(penalty).to_have_value("")
    assert penalty.locator("option").all_inner_texts() == ["auto", "mcp", "l1"]
    candidates = page.get_by_label("Candidate rules", exact=True)
    expect(candidates).to_have_value("")
    assert candidates.locator("option").all_inner_texts() == ["auto", "leaves", "nodes"]
    longest = page.get_by_label("Longest rule (conditions)", exact=True)
    expect(longest).to_have_attribute("type", "number")
    expect(longest).to_have_value("")
    linear = page.get_by_label("Linear terms", exact=True)
    expect(linear).to_be_checked(checked=defaults["linear_terms"])
    longest.fill("2")  # candidates left on auto: every node, cut to two conditions
    linear.check()
    for label, value in {"Trees": "30", "λ steps": "20", "Rule budget (most terms)": "12"}.items():
        page.get_by_label(label, exact=True).fill(value)
    shoot(page, "terms-form")
    # (a click right after full-page screenshots does not reach the button in headless chromium: keys do)
    page.get_by_role("button", name="Submit job").focus()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/dashboard/jobs/job_\w+$"))
    job_id = page.url.rsplit("/", 1)[1]
    expect(page.locator("#view dd[data-field='status']")).to_have_text("succeeded", timeout=120_000)
    job = api.get(f"/v1/jobs/{job_id}").json()
    assert {name: job["spec"]["path"][name] for name in ("candidates", "max_rule_length", "linear_terms")} == {
        "candidates": "nodes",
        "max_rule_length": 2,
        "linear_terms": True,
    }

    # the selected step: its linear terms, its longest rule, the inner nodes its rules come from
    result = api.get(f"/v1/jobs/{job_id}/result").json()
    rules = api.get(f"/v1/jobs/{job_id}/steps/{result['selected']}/rules").json()
    assert rules["n_linear"] > 0 and 0 < rules["longest_rule"] <= 2
    expect(page.locator("#step-title")).to_have_text(re.compile(rf"^Step {result['selected']}\b"))
    assert fact(page, "n_linear") == str(rules["n_linear"])
    conditions = "condition" if rules["longest_rule"] == 1 else "conditions"
    assert fact(page, "longest_rule") == f"{rules['longest_rule']} {conditions}"
    expect(page.locator("#linear-title")).to_have_text(f"Linear terms ({rules['n_linear']})")
    linear_rows = page.locator("#linear-terms table.data tbody tr")
    expect(linear_rows).to_have_count(rules["n_linear"])
    first = rules["rules"]["linear"][0]
    expect(linear_rows.first).to_contain_text(first["feature"])
    expect(linear_rows.first).to_contain_text("[")
    expect(page.locator("#step .tree-figure").first).to_be_visible()
    inner = [m for rule in rules["rules"]["rules"] for m in rule["members"] if m.get("leaf") is None]
    assert inner  # depth-3 trees capped at two conditions: every rule is an inner node
    expect(page.locator("#step .tree .node.selected").first).to_be_visible()
    expect(page.locator("#step table.data").first).to_contain_text(f"node {inner[0]['node']}")
    shoot(page, "terms-job-step")

    # promoted, a row scores with the rules that fired and what each linear term added
    model_id = promote(page, "abalone-terms-dashboard")
    fill_row(page, ROW)
    page.get_by_role("button", name="Predict").click()
    answer = api.post(f"/v1/models/{model_id}/predict?explain=true", json={"dataframe_records": [ROW]}).json()
    expect(page.locator("#prediction")).to_be_visible()
    assert float(page.locator("#prediction").inner_text()) == pytest.approx(answer["predictions"][0], rel=1e-5)
    scored_terms = page.locator("#score table.data", has_text="Linear terms for this row").locator("tbody tr")
    expect(scored_terms).to_have_count(len(answer["linear_contributions"][0]))
    expect(page.locator("#score .breakdown")).to_contain_text("linear term")
    shoot(page, "terms-model")
    assert errors == []


def columns_by_use(model: dict) -> tuple[list[str], list[str]]:
    """The columns a model's rules and linear terms read, by importance (the table's order on ties), and the others."""
    owners = [c["name"] for c in model["columns"] for _ in (c["categories"] if c["kind"] == "categorical" else [0])]
    ensemble = model["ensemble"]
    terms = [c for rule in ensemble["rules"] for c in rule["conditions"]] + ensemble.get("linear", [])
    read = {owners[term["feature_index"]] for term in terms}
    used = sorted((c["name"] for c in model["columns"] if c["name"] in read), key=lambda c: -ensemble["importance"][c])
    return used, [c["name"] for c in model["columns"] if c["name"] not in read]


def test_a_regression_reads_in_r2_and_the_form_asks_for_the_columns_the_model_uses(served, browser):
    """Issue 19: a regression path's chart opens on R² and offers RMSE (the raw squared error of a target near 0.02
    reads as 4e-05); the summary, steps and lists say R² and RMSE; the model's form lists the columns its terms read,
    most important first, and folds the others, which a prediction leaves missing."""
    from playwright.sync_api import expect

    page = browser.new_page(viewport=SIZES["1280"])
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    base, api = served.base_url, served.api
    uploaded = api.post(
        "/v1/datasets?target=Goal", content=ELEVATORS.read_bytes(), headers={"Content-Type": "application/gzip"}
    )
    assert uploaded.status_code in (200, 201), uploaded.text
    job = api.post(
        "/v1/jobs", json={"dataset_id": uploaded.json()["id"], "forest": MULTICLASS_FOREST, **MULTICLASS_PATH}
    )
    assert job.status_code == 202, job.text
    job_id = job.json()["id"]
    page.goto(f"{base}/dashboard/datasets")
    page.get_by_label("API key").fill(API_KEY)
    page.get_by_role("button", name="Use", exact=True).click()
    page.goto(f"{base}/dashboard/jobs/{job_id}")
    expect(page.locator("#view dd[data-field='status']")).to_have_text("succeeded", timeout=90_000)
    result = api.get(f"/v1/jobs/{job_id}/result").json()
    steps, selected = result["steps"], result["steps"][result["selected"]]
    expect(page.locator("#step-title")).to_have_text(re.compile(rf"^Step {result['selected']}\b"))
    expect(page.locator("#selected-summary")).to_contain_text(f"validation R² {selected['val_r2']:.4g}"[:18])
    expect(page.locator("#selected-summary")).to_contain_text("RMSE")
    headers = page.locator("details table.data thead th").all_text_contents()
    assert {"Validation MSE", "Validation R²", "Validation RMSE", "Validation MAE"} <= set(headers), headers

    # the chart opens on R² (the selected step is its peak), RMSE one choice away
    metric = page.locator(".chart").first.locator("..").get_by_label("Metric")
    assert metric.locator("option").all_inner_texts() == ["MSE", "R²", "RMSE", "MAE"]
    expect(metric).to_have_value("r2")
    chart = page.locator(".chart svg[role=slider]")
    expect(chart.locator("title")).to_contain_text("R² by step, terms along the top")
    dots = chart.locator("circle.dot-validation")
    expect(dots).to_have_count(len(steps))

    def highest_dot(name):  # the step drawn highest: the largest value of the metric
        heights = [-float(dot.get_attribute("cy")) for dot in dots.all()]
        return steps[heights.index(max(heights))][name]

    assert highest_dot("val_r2") == max(step["val_r2"] for step in steps)
    page.screenshot(path="/tmp/dashboard-r2-chart.png", full_page=True)
    metric.select_option(label="RMSE")
    expect(chart.locator("title")).to_contain_text("RMSE by step, terms along the top")
    expect(page.locator(".legend").first).to_contain_text("validation RMSE")
    assert highest_dot("val_rmse") == max(step["val_rmse"] for step in steps)
    page.screenshot(path="/tmp/dashboard-rmse-chart.png", full_page=True)
    shoot(page, "regression-job")

    # the form: the columns the model reads, by importance, then the others folded and optional
    model_id = promote(page, "elevators-readable")
    model = api.get(f"/v1/models/{model_id}").json()
    used, unused = columns_by_use(model)
    assert used and unused, (used, unused)
    form = page.get_by_role("form", name="Score one row")
    expect(form.locator(":scope > .fields .field > label")).to_have_text(used)
    folded = form.locator("details.unused-columns")
    expect(folded).not_to_have_attribute("open", "")
    expect(folded.locator("summary")).to_have_text(f"{len(unused)} other columns the model does not use — optional")
    expect(folded.locator(".field > label")).to_have_text(unused)
    expect(page.get_by_label(unused[0], exact=True)).to_be_hidden()
    expect(page.locator("#model-metrics dd[data-field='val_r2']")).to_contain_text(
        f"{model['metrics']['val_r2']:.6g}"[:6]
    )
    page.screenshot(path="/tmp/dashboard-model-form.png", full_page=True)

    row = pd.read_csv(ELEVATORS).drop(columns="Goal").iloc[0].to_dict()
    for column in used:
        page.get_by_label(column, exact=True).fill(str(row[column]))
    page.get_by_role("button", name="Predict").click()
    expect(page.locator("#prediction")).to_be_visible()
    sent = {column: value if column in used else None for column, value in row.items()}  # as the form sends it
    answer = api.post(f"/v1/models/{model_id}/predict", json={"dataframe_records": [sent]}).json()
    whole = api.post(f"/v1/models/{model_id}/predict", json={"dataframe_records": [row]}).json()
    assert answer["predictions"][0] == pytest.approx(whole["predictions"][0], rel=1e-12)  # the others do not count
    assert float(page.locator("#prediction").inner_text()) == pytest.approx(answer["predictions"][0], rel=1e-5)
    page.screenshot(path="/tmp/dashboard-model-predicted.png", full_page=True)
    shoot(page, "regression-model")

    # serve it: an alias set, moved here again (nothing changes), shown with the addresses apps call; exports
    aliases = page.locator("#aliases")
    page.get_by_label("Alias", exact=True).fill("champion")
    page.get_by_role("button", name="Point at v1").click()
    expect(aliases.locator("table.data")).to_contain_text("champion")
    expect(aliases.locator("table.data")).to_contain_text("v1 (this one)")
    registered = api.get("/v1/registered-models/elevators-readable").json()
    assert registered["aliases"] == {"champion": 1}
    addresses = page.get_by_role("table", name="Scoring addresses")
    expect(addresses).to_contain_text("/v1/registered-models/elevators-readable/aliases/champion/invocations")
    expect(addresses).to_contain_text("/v2/models/elevators-readable/versions/champion/infer")
    expect(page.get_by_role("table", name="What happened to the name")).to_contain_text("champion set to v1")
    with page.expect_download() as downloaded:
        page.get_by_role("button", name="MLflow model (zip)").click()
    assert downloaded.value.suggested_filename == "elevators-readable-v1-mlflow.zip"
    assert Path(downloaded.value.path()).read_bytes()[:2] == b"PK"
    page.screenshot(path="/tmp/dashboard-model-serve.png", full_page=True)
    page.get_by_role("button", name="Remove alias champion").click()
    expect(page.get_by_role("table", name="What happened to the name")).to_contain_text("champion removed (was v1)")
    assert api.get("/v1/registered-models/elevators-readable").json()["aliases"] == {}
    page.get_by_label("Alias", exact=True).fill("latest")
    page.get_by_role("button", name="Point at v1").click()
    expect(page.locator(".field-error")).to_contain_text("not 'latest'")  # at the field; the banner says so
    expect(page.get_by_role("alert")).to_contain_text("This alias is not allowed. It is shown at its field.")
    page.get_by_label("Alias", exact=True).fill("champion")
    page.get_by_role("button", name="Point at v1").click()
    expect(aliases.locator("table.data")).to_contain_text("champion")

    # the lists say R² too, and the aliases
    page.goto(f"{base}/dashboard/models")
    expect(page.locator("table.data", has_text="elevators-readable")).to_contain_text(
        f"R² {selected['val_r2']:.4g}"[:7]
    )
    expect(page.locator("table.data", has_text="elevators-readable")).to_contain_text("champion")
    page.screenshot(path="/tmp/dashboard-models.png", full_page=True)
    page.goto(f"{base}/dashboard/jobs")
    expect(page.locator(f"tr[data-job='{job_id}']")).to_contain_text(f"R² {selected['val_r2']:.4g}"[:7])
    page.screenshot(path="/tmp/dashboard-jobs.png", full_page=True)
    assert errors == []


def test_a_cross_validated_job_with_stability_from_the_form(served, browser):
    """Issue 29 from the form: 3 folds chosen by the one-standard-error rule and 4 half-sample fits. The chart draws
    the folds' error bars and marks both choices; each rule and linear term shows how often the half fits selected
    it, as the API says; a rule on the text column Sex says its level once."""
    from playwright.sync_api import expect

    page = browser.new_page(viewport=SIZES["1280"])
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    base, api = served.base_url, served.api
    uploaded = api.post(
        "/v1/datasets?target=rings", content=ABALONE.read_bytes(), headers={"Content-Type": "application/gzip"}
    )
    dataset_id = uploaded.json()["id"]
    page.goto(f"{base}/dashboard/jobs/new?dataset={dataset_id}")
    page.get_by_label("API key").fill(API_KEY)
    page.get_by_role("button", name="Use", exact=True).click()
    one_se = page.locator("select[data-field='selection'] option[value='1se']")
    expect(one_se).to_be_disabled()  # the one-standard-error rule needs folds
    settings = {
        "Trees": "30",
        "λ steps": "20",
        "Rule budget (most terms)": "12",
        "Cross-validation folds": "3",
        "Stability: half-sample fits": "4",
    }
    for label, value in settings.items():
        page.get_by_label(label, exact=True).fill(value)
    page.get_by_label("Step chosen by", exact=True).select_option("1se")
    page.get_by_label("Split only at quantiles (bins)", exact=True).fill("10")
    # the API refuses a holdout beside cv_folds: the form hides the validation choice and says why
    expect(page.get_by_label("Holdout fraction", exact=True)).to_be_hidden()
    expect(page.get_by_text("cross-validation folds are set")).to_be_visible()
    shoot(page, "cv-form")
    page.get_by_role("button", name="Submit job").focus()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/dashboard/jobs/job_\w+$"))
    job_id = page.url.rsplit("/", 1)[1]
    expect(page.locator("#view dd[data-field='status']")).to_have_text("succeeded", timeout=240_000)
    job = api.get(f"/v1/jobs/{job_id}").json()
    assert job["spec"]["path"]["cv_folds"] == 3 and job["spec"]["path"]["selection"] == "1se"
    assert job["spec"]["stability_resamples"] == 4 and job["spec"]["recipe"]["params"]["threshold_bins"] == 10

    result = api.get(f"/v1/jobs/{job_id}/result").json()
    cv = result["cv"]
    assert result["selected"] == cv["best_1se"] <= cv["best_min"]
    expect(page.locator("dd[data-field='cv']")).to_contain_text("3-fold cross-validation")
    expect(page.locator("dd[data-field='stability']")).to_contain_text(f"{result['stability']['dice']:.3g}"[:4])
    chart = page.locator(".chart svg").first
    expect(chart.locator(".error-bars > g")).to_have_count(
        sum(1 for step in result["steps"] if step["val_loss_se"] is not None)
    )
    expect(chart.locator(".cv-1se-step")).to_have_count(1)
    expect(chart.locator(".cv-min-step")).to_have_count(1)
    expect(page.locator(".legend").first).to_contain_text("standard error (3 folds)")

    rules = api.get(f"/v1/jobs/{job_id}/steps/{result['selected']}/rules").json()
    frequencies = rules["stability"]["frequencies"]
    expect(page.locator("#rule-stability")).to_be_visible()
    rows = page.locator("#step table.data").first.locator("tbody tr")
    expect(rows).to_have_count(len(rules["rules"]["rules"]))
    for position, rule in enumerate(rules["rules"]["rules"]):
        row = page.locator(f"#step tr[data-rule='{rule['id']}']")
        expect(row.locator(".frequency")).to_have_text(f"{round(100 * frequencies[position])}%")
    n_rules = len(rules["rules"]["rules"])
    for position, term in enumerate(rules["rules"]["linear"]):
        row = page.locator(f"#linear-terms tr[data-linear='{term['id']}']")
        expect(row.locator(".frequency")).to_have_text(f"{round(100 * frequencies[n_rules + position])}%")
    for rule in rules["rules"]["rules"]:  # each rule says a level of Sex once: no "is not" beside an "is"
        text = page.locator(f"#step tr[data-rule='{rule['id']}'] ul.conditions").inner_text()
        assert not ("Sex is not" in text and re.search(r"Sex is [FIM]\b", text)), text
        assert text.count("Sex") <= 1, text
    shoot(page, "cv-job-step")

    fold_id = job["cells"][0]  # a fold's page: its path, and its step's rules are the parent's (no 422 shown)
    page.goto(f"{base}/dashboard/jobs/{fold_id}")
    expect(page.locator("dd[data-field='fold']")).to_have_text(f"fold 0 of {job_id}")
    expect(page.locator("#step-title")).to_contain_text("of fold 0")
    expect(page.locator(f"#step a[href^='/dashboard/jobs/{job_id}/steps/']")).to_have_count(1)
    expect(page.locator(".problem")).to_have_count(0)
    shoot(page, "cv-fold")
    assert errors == []


def test_level_conditions_read_as_the_library_words_them(served, browser):
    """Rules on the indicators of text columns in the dashboard's rules table: every single condition and pair at
    the trees' cut 0.5 or at cuts that every or no indicator passes, and rules on two text columns with a numeric
    bound between them. One line per column, in order of first use, and a text column's line is
    solver/rule_text.py's phrase for it ("is C", "not in {A, B} or missing"), "or missing" only where the column
    can be missing."""
    encoding = TableEncoding(
        [
            ColumnSpec("protocol", "categorical", ("A", "B", "C", "D", "E"), missing=True),
            ColumnSpec("size", "numeric", missing=True),
            ColumnSpec("grade", "categorical", ("x", "y", "z"), missing=False),
        ]
    )
    names = encoding.feature_names
    cuts = [("<=", 0.5), (">", 0.5), ("<=", 1.0), (">", -0.5), ("<=", -0.5)]
    levels = [
        Condition(name, j, operator, cut, missing=bool((j + k) % 2))  # the flag of a NaN indicator, which never is
        for j, name in enumerate(names)
        if name != "size"
        for k, (operator, cut) in enumerate(cuts)
    ]
    protocol = [c for c in levels if c.feature.startswith("protocol=")]
    grade = [c for c in levels if c.feature.startswith("grade=")]
    size = Condition("size", names.index("size"), ">", 2.5, missing=False)
    rng = np.random.default_rng(0)
    rules = [[c] for c in levels]
    at_half = [c for c in protocol if c.threshold == 0.5]  # the trees' cut: every pair of them
    rules += [list(pair) for pair in itertools.combinations(at_half, 2)]
    rules += [list(pair) for pair in itertools.combinations(grade, 2)]
    rules.append([c for c in grade if c.operator == "<=" and c.threshold == 0.5])  # no level: "grade is missing"
    rules += [
        [
            *(protocol[k] for k in rng.choice(len(protocol), 2, replace=False)),
            size,
            *(grade[k] for k in rng.choice(len(grade), 2, replace=False)),
        ]
        for _ in range(40)
    ]
    wording = RuleWording(encoding)
    expected = [  # a text column's phrase, None for the numeric bound
        [wording.conjunction(group) if column.kind == "categorical" else None for column, group in groups]
        for groups in (column_groups(encoding, rule) for rule in rules)
    ]
    document = {
        "intercept": 0.0,
        "columns": encoding.to_dict(),
        "rules": [
            {
                "id": i,
                "conditions": [c.to_dict() for c in rule],
                "contribution": 0.0,
                "weight": 1.0,
                "value": 1.0,
                "support": 1,
                "members": [{"tree": 0, "leaf": i}],
            }
            for i, rule in enumerate(rules)
        ],
    }
    page = browser.new_page(viewport=SIZES["1280"])
    page.goto(f"{served.base_url}/dashboard/")
    shown = page.evaluate(
        """async ensemble => {
             const { rulesTable } = await import("/dashboard/assets/rules.js");
             const table = rulesTable(ensemble);
             return ensemble.rules.map(rule => [
               ...table.querySelectorAll(`tr[data-rule='${rule.id}'] ul.conditions li`)].map(line => line.textContent));
           }""",
        document,
    )
    phrases_seen = " | ".join(phrase for phrases in expected for phrase in phrases if phrase)
    for wording_kind in (
        "is any value",  # not "is not missing": a missing level's indicators are 0, as the other levels' are
        "is missing",
        "matches no value",
        " in {",
        "not in {",
        "is not ",
        "or missing",
    ):
        assert wording_kind in phrases_seen, wording_kind  # the cases reach every phrase of the library's
    assert len(shown) == len(rules)
    for rule, lines, phrases in zip(rules, shown, expected):
        assert len(lines) == len(phrases), (rule, lines, phrases)
        for i, (line, phrase) in enumerate(zip(lines, phrases)):
            assert line.startswith("and " if i else "if "), line
            text = line.split(" ", 1)[1]
            assert text == (phrase if phrase is not None else "size > 2.5"), (rule, lines, phrases)
    page.close()
