"""Survival a person can read, in a real browser (Debian's headless chromium through Playwright) against the API served
over HTTP with real workers, on lifelines' recidivism table (rossi: 432 released prisoners followed 52 weeks, arrest
the event, prio a 0-18 count of prior convictions):

- the upload form preselects an event column only where the file's first rows hold 0/1 in it (rossi has six 0/1
  columns, none named like an event: none is guessed, and prio, its last column, never), and a column that is not
  0/1 is refused at the Event field with the fix "pick the event column";
- a Cox model of a step other than the job's selected one shows its own curves on the job's validation rows;
- the prediction form draws the row's survival curve S(t | x) to the last follow-up, its values those /predict
  answers at the same times; a time past the last follow-up is refused at the field that asked for it.

Screenshots at 1280x800 and 400 px wide go to test-artifacts/survival/.
"""

import re

import numpy as np
import pandas as pd
import pytest

from tests.support.browser import new_page, shoot, sign_in

pytestmark = pytest.mark.integration

FOLDER = "survival"
FEATURES = ["fin", "age", "race", "wexp", "mar", "paro", "prio"]


def rossi() -> pd.DataFrame:
    from lifelines.datasets import load_rossi

    return load_rossi()


def choose_file(page, path, task: str = "survival") -> None:
    from playwright.sync_api import expect

    page.get_by_label("Table file").set_input_files(str(path))
    page.get_by_label("Task").select_option(task)
    expect(page.locator("select[data-field='target']")).to_be_enabled()


def test_only_a_0_1_column_is_preselected_as_the_event_and_another_is_refused_at_the_field(served, browser, tmp_path):
    from playwright.sync_api import expect

    errors: list[str] = []
    page = new_page(browser, errors)
    sign_in(page, served.base_url, "/dashboard/datasets")
    table = rossi()
    path = tmp_path / "rossi.csv"
    table.to_csv(path, index=False)
    binary = [column for column in table.columns if table[column].isin([0, 1]).all()]
    assert binary == ["arrest", "fin", "race", "wexp", "mar", "paro"]

    # six 0/1 columns, none named like an event: none is chosen for the person (not prio, the last column)
    choose_file(page, path)
    event = page.get_by_label("Event column")
    expect(event).to_have_value("")
    expect(event.locator("option").first).to_have_text("choose the event column")
    expect(page.locator(f"#{event.get_attribute('id')}-help")).to_contain_text(
        f"Only 0/1 in the first rows: {', '.join(binary)}."
    )
    expect(page.locator("select[data-field='target']")).to_have_value("week")  # the time column, by its name
    shoot(page, FOLDER, "rossi-upload")

    # prio (a count) as the event: the 422 at the Event field, its message and fix those the API answers
    event.select_option("prio")
    page.get_by_role("button", name="Upload").click()
    expect(event).to_have_attribute("aria-invalid", "true")
    shown = page.locator(".field-error").filter(has_text="pick the event column")
    expect(shown).to_have_count(1)
    assert shown.get_attribute("id") == f"{event.get_attribute('id')}-error"
    answer = served.api.post(
        "/v1/datasets",
        files={"file": ("rossi.csv", path.read_bytes(), "text/csv")},
        data={"target": "week", "task": "survival", "event": "prio"},
    )
    assert answer.status_code == 422, answer.text
    (fault,) = answer.json()["errors"]
    assert fault["field"] == "body.event" and fault["fix"].startswith("pick the event column")
    assert "column 'prio' is not 0/1 or true/false: row 0 has 3" in fault["message"]
    assert shown.inner_text() == f"{fault['message']} ({fault['fix']})"
    shoot(page, FOLDER, "rossi-event-422")

    event.select_option("arrest")
    page.get_by_role("button", name="Upload").click()
    page.wait_for_url(re.compile(r".*/dashboard/datasets/ds_\w+$"))
    dataset = served.api.get(f"/v1/datasets/{page.url.rsplit('/', 1)[1]}").json()
    assert (dataset["target"], dataset["event"], dataset["n_rows"]) == ("week", "arrest", 432)

    # one 0/1 column: preselected; several with one named like an event: that one
    page.goto(f"{served.base_url}/dashboard/datasets")
    for columns, expected in (
        ({"time": [5, 8, 3], "flag": [1, 0, 1], "n": [0, 2, 7]}, "flag"),
        ({"time": [5, 8, 3], "sex": [1, 0, 1], "status": [0, 1, 1]}, "status"),
    ):
        other = tmp_path / f"{expected}.csv"
        pd.DataFrame(columns).to_csv(other, index=False)
        choose_file(page, other)
        expect(page.get_by_label("Event column")).to_have_value(expected)
    assert not errors, errors


def curve_values(page, selector: str) -> list[float]:
    """The values a polyline of the page's chart draws, read back through its plot frame (y = 1 at the top, 0 at the
    bottom)."""
    frame = page.locator(f"{selector} .plot-frame")
    top, height = float(frame.get_attribute("y")), float(frame.get_attribute("height"))
    points = page.locator(f"{selector} polyline.series-model").get_attribute("points").split()
    return [(top + height - float(point.split(",")[1])) / height for point in points]


def test_a_cox_model_of_any_step_shows_its_curves_and_a_row_s_curve_as_predict_answers_it(served, browser, tmp_path):
    from playwright.sync_api import expect

    api = served.api
    table = rossi()
    dataset = api.post(
        "/v1/datasets?target=week&task=survival&event=arrest",
        content=table.to_csv(index=False),
        headers={"Content-Type": "text/csv"},
    )
    assert dataset.status_code in (200, 201), dataset.text
    job = api.post(
        "/v1/jobs",
        json={
            "dataset_id": dataset.json()["id"],
            "forest": {"n_estimators": 30, "max_depth": 3, "random_state": 0},
            "n_lambdas": 25,
            "max_rules": 10,
            "linear_terms": False,
            "validation": {"fraction": 0.25, "seed": 0},
        },
    )
    assert job.status_code == 202, job.text
    assert served.wait_for_job(job.json()["id"])["status"] == "succeeded"
    result = api.get(f"/v1/jobs/{job.json()['id']}/result").json()
    survival = result["survival"]
    # a step other than the selected one, with rules, whose mean curve differs from the selected step's
    step = max(k for k, s in enumerate(result["steps"]) if s["n_rules"] and k != result["selected"])
    assert not np.allclose(survival["steps"][step], survival["model"])
    model = api.post("/v1/models", json={"job_id": job.json()["id"], "step": step, "name": "rossi-cox"}).json()
    assert model["provenance"]["step"] == step

    errors: list[str] = []
    page = new_page(browser, errors)
    sign_in(page, served.base_url, f"/dashboard/models/{model['id']}")
    card = page.locator("#survival")
    expect(card.locator("svg polyline.series-model")).to_have_count(1)
    expect(card).to_contain_text(f"step {step} of its job")
    np.testing.assert_allclose(curve_values(page, "#survival"), survival["steps"][step], rtol=0, atol=1e-9)

    # one row's curve: drawn from 0 to the last follow-up (week 52), its values /predict's at the same times
    row = table.iloc[0]
    expect(page.get_by_role("button", name="Predict")).to_be_visible()
    folded = page.locator("details.unused-columns:not([open]) > summary")  # the columns no rule reads
    if folded.count():
        folded.click()
    for column in FEATURES:
        page.get_by_label(column, exact=True).fill(str(row[column]))
    page.get_by_role("button", name="Predict").click()
    chart = page.locator("#row-survival")
    expect(chart.locator("svg path.series-row")).to_have_count(1)
    chart.get_by_text("The curve's values").click()
    cells = chart.locator("table.data tbody tr").evaluate_all(
        "rows => rows.map(row => [...row.cells].map(cell => cell.textContent))"
    )
    times = [float(time) for time, _ in cells]
    baseline = model["ensemble"]["baseline_hazard"]["times"]
    assert times == [0.0, *baseline] and times[-1] == table["week"].max() == 52
    assert chart.locator("svg path.series-row").get_attribute("data-points") == str(len(times))
    answer = api.post(
        f"/v1/models/{model['id']}/predict",
        json={"dataframe_records": [{column: float(row[column]) for column in FEATURES}], "params": {"times": times}},
    ).json()
    served_curve = answer["survival"][0]
    shown = [float(value) for _, value in cells]
    np.testing.assert_allclose(shown, served_curve, rtol=5e-6, atol=0)  # six significant digits
    median = next((t for t, s in zip(times, served_curve) if s <= 0.5), None)
    sentence = chart.locator("[data-field=median]").inner_text()
    if median is None:
        assert sentence.startswith("S(t | x) stays above 0.5 up to 52"), sentence
    else:
        assert f"by time {median:g}" in sentence, sentence
    shoot(page, FOLDER, "rossi-model")

    # a time past the last follow-up (week 80 of a 52-week study): refused at the field that asked for it
    rows = tmp_path / "rows.csv"
    table[FEATURES].to_csv(rows, index=False)
    page.get_by_label("File to score").set_input_files(str(rows))
    times_field = page.get_by_label("Survival at times")
    times_field.fill("30, 80")
    page.get_by_role("button", name="Score the file").click()
    expect(times_field).to_have_attribute("aria-invalid", "true")
    error = page.locator(f"#{times_field.get_attribute('id')}-error")
    expect(error).to_contain_text("survival time 80 is outside [0, 52]")
    expect(error).to_contain_text("ask for times from 0 to 52")
    refused = api.post(
        f"/v1/models/{model['id']}/predict",
        json={"dataframe_records": [{column: float(row[column]) for column in FEATURES}], "params": {"times": [80]}},
    )
    assert refused.status_code == 422 and refused.json()["errors"][0]["field"] == "body.params.times"
    shoot(page, FOLDER, "rossi-times-422")
    assert not errors, errors
