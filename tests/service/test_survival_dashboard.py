"""The dashboard's survival and amount tasks in a real browser (Debian's headless chromium through Playwright) against
the API served over HTTP with real workers: a WHAS500 table uploaded from the form as survival (its time and event
columns picked from the file's own columns), a Cox job submitted from the form and chosen by the C-index, its
path chart on the C-index, its Survival card (the validation rows' Kaplan–Meier step line beside the model's mean
curve) and its rules as hazard factors, then the model promoted from it; and an amount table with an exposure column
uploaded from the form, whose Tweedie job (the power offered for Tweedie only) reads its rules as factors of the mean.

Screenshots at 1280x800 and 400 px wide are saved under test-artifacts/survival-dashboard/.
"""

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.support.browser import SIZES, sign_in
from tests.support.browser import shoot as shoot_in

pytestmark = pytest.mark.integration

# a small forest and a short path: the job ends in seconds
JOB_SETTINGS = {"Trees": "20", "Depth": "3", "Rule budget (most terms)": "10", "λ steps": "25"}


def shoot(page, name: str) -> None:
    shoot_in(page, "survival-dashboard", name)


def whas500_csv(path: Path) -> Path:
    """scikit-survival's WHAS500 (500 rows) with its 0/1 columns as numbers, the follow-up days and the death flag."""
    from sksurv.datasets import load_whas500

    X, y = load_whas500()
    table = X.apply(lambda column: column.astype(float))
    table["days"] = y["lenfol"]
    table["died"] = y["fstat"].astype(int)
    table.to_csv(path, index=False)
    return path


def claims_csv(path: Path, n: int = 400) -> Path:
    """Claim amounts with many zeros over an exposure (years insured): older drivers in the city claim more; a prior
    (an offset: the log of last year's relative rate, known per policy)."""
    rng = np.random.default_rng(7)
    age = rng.uniform(18, 80, n)
    city = rng.integers(0, 2, n)
    years = rng.uniform(0.2, 2.0, n)
    mean = years * np.exp(0.4 + 0.8 * city + 0.02 * (age - 50))
    claims = rng.poisson(mean * 0.4)
    amount = np.where(claims > 0, rng.gamma(2.0, mean / 0.8), 0.0)
    prior = 0.1 * rng.normal(size=n)
    pd.DataFrame({"age": age, "city": city, "years": years, "prior": prior, "amount": amount}).to_csv(path, index=False)
    return path


def upload(page, file: Path, task: str, target: str, **columns: str) -> str:
    """Upload ``file`` from the form as ``task`` with ``target`` and the other columns named (label: column);
    returns the new dataset's id."""
    from playwright.sync_api import expect

    page.get_by_label("Table file").set_input_files(str(file))
    page.get_by_label("Task").select_option(task)
    target_picker = page.locator("select[data-field='target']")
    expect(target_picker).to_be_enabled()
    target_picker.select_option(target)
    for label, column in columns.items():
        page.get_by_label(label).select_option(column)
    page.get_by_role("button", name="Upload").click()
    page.wait_for_url(re.compile(r".*/dashboard/datasets/ds_\w+$"))
    return page.url.rsplit("/", 1)[1]


def submit_from_form(page, settings: dict, choices: dict) -> str:
    """Fill the job form's fields (label: text) and drop-downs (label: option), rules only (no linear terms, so that
    the selected step's terms are rules), submit, wait for success."""
    from playwright.sync_api import expect

    page.get_by_label("Linear terms", exact=True).uncheck()
    for label, value in settings.items():
        page.get_by_label(label, exact=True).fill(value)
    for label, value in choices.items():
        page.get_by_label(label, exact=True).select_option(value)
    page.get_by_role("button", name="Submit job").click()
    page.wait_for_url(re.compile(r".*/dashboard/jobs/job_\w+$"))
    expect(page.locator("#view dd[data-field='status']")).to_have_text("succeeded", timeout=120_000)
    return page.url.rsplit("/", 1)[1]


def test_a_cox_job_from_the_form_shows_its_c_index_survival_curves_and_hazard_factors(served, browser, tmp_path):
    from playwright.sync_api import expect

    page = browser.new_page(viewport=SIZES["1280"])
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    base, api = served.base_url, served.api
    sign_in(page, base, "/dashboard/datasets")

    # survival: the time column is the target, the event column is picked beside it; exposure is not offered
    page.get_by_label("Table file").set_input_files(str(whas500_csv(tmp_path / "whas500.csv")))
    page.get_by_label("Task").select_option("survival")
    expect(page.get_by_label("Event column")).to_be_visible()
    expect(page.get_by_label("Exposure column (optional)")).to_be_hidden()
    expect(page.get_by_label("Time column (target)")).to_be_enabled()
    shoot(page, "survival-upload")
    dataset_id = upload(page, tmp_path / "whas500.csv", "survival", "days", **{"Event column": "died"})
    dataset = api.get(f"/v1/datasets/{dataset_id}").json()
    assert (dataset["task"], dataset["target"], dataset["event"]) == ("survival", "days", "died")
    assert "died" not in [column["name"] for column in dataset["columns"]]
    expect(page.locator("dd[data-field='event']")).to_have_text("died")
    shoot(page, "survival-dataset")

    # the job form: Cox by the task, no Tweedie power, the C-index offered as the selection
    page.get_by_role("link", name="Run a job on this dataset").click()
    expect(page.get_by_label("Training dataset")).to_have_value(dataset_id)
    expect(page.get_by_label("Loss", exact=True)).to_contain_text("cox (the dataset's task, survival, decides)")
    expect(page.get_by_label("Tweedie power", exact=True)).to_be_hidden()
    expect(page.locator("select[data-field='selection'] option[value='cindex']")).to_be_enabled()
    expect(page.locator("select[data-field='selection'] option[value='auc']")).to_be_disabled()
    job_id = submit_from_form(page, JOB_SETTINGS, {"Step chosen by": "cindex"})
    job = api.get(f"/v1/jobs/{job_id}").json()
    result = api.get(f"/v1/jobs/{job_id}/result").json()
    assert job["spec"]["path"]["loss"] == "cox" and job["spec"]["path"]["selection"] == "cindex"

    # the path chart opens on the C-index, and the selected step's is in the summary
    expect(page.locator("#selected-summary")).to_contain_text("C-index")
    expect(page.locator("#view select[id$='-metric']").first).to_have_value("cindex")
    expect(page.locator(".chart svg title").first).to_contain_text("C-index")

    # the Survival card: the Kaplan–Meier step line and the model's mean curve, labelled axes and a legend
    card = page.locator("#survival")
    expect(card.locator("svg .curve")).to_have_count(2)
    expect(card.locator("svg path.series-km")).to_have_count(1)
    expect(card.locator("svg polyline.series-model")).to_have_count(1)
    model_points = card.locator("svg polyline.series-model").get_attribute("points")
    assert model_points.count(",") == len(result["survival"]["times"])
    axis = card.locator("svg .axis text").all_text_contents()
    assert "survival probability" in axis and "time (days)" in axis and "0" in axis and "1" in axis
    expect(card.locator(".legend li")).to_have_count(2)
    expect(card.locator(".legend")).to_contain_text("Kaplan–Meier")

    # the rules read as factors of the hazard
    rules = api.get(f"/v1/jobs/{job_id}/steps/{result['selected']}/rules").json()
    assert rules["rules"]["rules"], "the selected step has rules"
    headers = page.locator("#step table.data thead th").all_inner_texts()
    assert headers[2:4] == ["Log hazard ratio", "Hazard ×"], headers
    factors = page.locator("#step table.data tbody .factor").all_inner_texts()
    assert factors and all(re.fullmatch(r"×\d[\d.e+-]* hazard", text) for text in factors), factors
    shoot(page, "survival-job")

    # the model of the selected step: the same curves, its rules as hazard factors, a row's hazard ratio
    page.get_by_text("Promote this step to a model").click()
    page.get_by_label("Model name").fill("whas500-cox")
    page.get_by_role("button", name=re.compile(r"Promote step \d+ to a model")).click()
    page.wait_for_url(re.compile(r".*/dashboard/models/mdl_\w+$"))
    expect(page.locator("#survival svg .curve")).to_have_count(2)
    expect(page.locator("#view .factor").first).to_contain_text("hazard")
    page.get_by_role("button", name="Predict").click()
    expect(page.locator("#score")).to_contain_text("Predicted hazard ratio")
    shoot(page, "survival-model")
    assert not errors, errors


def test_an_amount_upload_with_exposure_and_offset_and_a_tweedie_job_from_the_form(served, browser, tmp_path):
    from playwright.sync_api import expect

    page = browser.new_page(viewport=SIZES["1280"])
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    base, api = served.base_url, served.api
    sign_in(page, base, "/dashboard/datasets")

    claims = claims_csv(tmp_path / "claims.csv")
    page.get_by_label("Table file").set_input_files(str(claims))
    page.get_by_label("Task").select_option("amount")
    expect(page.get_by_label("Event column")).to_be_hidden()
    expect(page.get_by_label("Exposure column (optional)")).to_have_value("")
    expect(page.get_by_label("Offset column (optional)")).to_have_value("")
    columns = {"Exposure column (optional)": "years", "Offset column (optional)": "prior"}
    dataset_id = upload(page, claims, "amount", "amount", **columns)
    dataset = api.get(f"/v1/datasets/{dataset_id}").json()
    assert (dataset["task"], dataset["exposure"], dataset["offset"]) == ("amount", "years", "prior")
    expect(page.locator("dd[data-field='exposure']")).to_have_text("years")
    expect(page.locator("dd[data-field='offset']")).to_have_text("prior")

    # the Tweedie power is offered for Tweedie only, the C-index not at all
    page.get_by_role("link", name="Run a job on this dataset").click()
    power = page.get_by_label("Tweedie power", exact=True)
    expect(power).to_be_visible()
    expect(power).to_have_value("1.5")
    expect(page.locator("select[data-field='selection'] option[value='cindex']")).to_be_disabled()
    page.get_by_label("Loss", exact=True).select_option("gamma")
    expect(power).to_be_hidden()
    page.get_by_label("Loss", exact=True).select_option("tweedie")
    shoot(page, "amount-form")
    job_id = submit_from_form(page, {**JOB_SETTINGS, "Tweedie power": "1.6"}, {})
    job = api.get(f"/v1/jobs/{job_id}").json()
    assert job["spec"]["path"]["loss"] == "tweedie" and job["spec"]["path"]["power"] == pytest.approx(1.6)
    expect(page.locator("#survival")).to_have_count(0)
    headers = page.locator("#step table.data thead th").all_inner_texts()
    assert headers[2:4] == ["Log mean", "Mean ×"], headers
    factors = page.locator("#step table.data tbody .factor").all_inner_texts()
    assert factors and all(re.fullmatch(r"×\d[\d.e+-]* mean", text) for text in factors), factors
    expect(page.locator("#intercept")).to_contain_text("base mean")
    shoot(page, "amount-job")
    assert not errors, errors
