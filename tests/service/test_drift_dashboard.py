"""The model page's Drift card in a real browser (Debian's headless chromium through Playwright) against the API served
over HTTP with real workers: a model promoted from a short abalone path shows the empty state (how rows get counted)
until it scores 400 rows whose Shell_weight is shifted past the training table's top decile; then the card names
Shell_weight as flagged, with its bins, the rules table and the charts over time; a PSI threshold of 100 set from the
card's form unflags it, and a PSI of -1 is refused with the message beside its field.

Screenshots of the card are saved under test-artifacts/drift/.
"""

import re
import time
import uuid

import pytest

from tests.support.browser import API_KEY, ARTIFACTS, SIZES, shoot
from tests.support.data import ABALONE, abalone_frame
from tests.support.jobs import SMALL_FOREST

pytestmark = pytest.mark.integration


def wait_for(api, job_id: str, timeout: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        job = api.get(f"/v1/jobs/{job_id}").json()
        if job["status"] == "succeeded":
            return job
        assert job["status"] in ("queued", "running"), job
        assert time.monotonic() < deadline, f"job {job_id} still {job['status']}"
        time.sleep(0.2)


def promoted_model(api) -> dict:
    """A model promoted from a short path on a small abalone forest (as tests/service/test_drift.py's)."""
    upload = api.post("/v1/datasets?target=rings", content=ABALONE.read_bytes(), headers={"Content-Type": "text/csv"})
    assert upload.status_code in (200, 201), upload.text
    dataset_id = upload.json()["id"]
    forest = api.post("/v1/forests/train", json={"dataset_id": dataset_id, **SMALL_FOREST})
    assert forest.status_code == 202, forest.text
    forest_id = wait_for(api, forest.json()["id"])["summary"]["forest_id"]
    path = {"dataset_id": dataset_id, "forest_id": forest_id, "n_lambdas": 10, "max_rules": 10}
    job = api.post("/v1/jobs", json=path)
    assert job.status_code == 202, job.text
    wait_for(api, job.json()["id"])
    model = api.post("/v1/models", json={"job_id": job.json()["id"], "name": f"drift-{uuid.uuid4().hex[:8]}"})
    assert model.status_code == 201, model.text
    return model.json()


def shoot_card(page, name: str) -> None:
    """The Drift card at 1280 px and 400 px wide (test-artifacts/drift/), the page without a horizontal scroll bar."""
    shoot(page, "drift", name, element="#drift")


def test_the_drift_card_flags_a_shifted_column_and_its_thresholds_are_set_from_the_card(served, browser):
    from playwright.sync_api import expect

    api = served.api
    model = promoted_model(api)
    page = browser.new_page(viewport=SIZES["1280"])
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{served.base_url}/dashboard/models/{model['id']}")
    page.get_by_label("API key").fill(API_KEY)
    page.get_by_role("button", name="Use", exact=True).click()

    # before any row is counted: how rows get counted
    card = page.locator("#drift")
    empty = card.locator("#drift-empty")
    expect(empty).to_contain_text("No scored row counted in the last 24 hours")
    expect(page.locator("dd[data-field='drift']")).to_have_text("no row counted in the last day")
    for way in ("/predict", "/invocations", "Open Inference Protocol", "batch jobs"):
        expect(empty).to_contain_text(way)
    shoot_card(page, "drift-empty")

    # 400 rows scored with Shell_weight past the training table's top decile, counted and flushed to Redis
    shifted = abalone_frame().drop(columns=["rings"]).iloc[:400].copy()
    shifted["Shell_weight"] = shifted["Shell_weight"] * 2 + 1.0
    scored = api.post(
        f"/v1/models/{model['id']}/predict",
        json={"dataframe_split": {"columns": list(shifted.columns), "data": shifted.values.tolist()}},
    )
    assert scored.status_code == 200, scored.text
    deadline = time.monotonic() + 20
    while True:  # the monitor's thread may hold a drained batch for a moment: flush until all 400 are there
        served.server.config.app.state.core.monitor.flush()
        report = api.get(f"/v1/models/{model['id']}/drift").json()
        if report["rows"] == 400:
            break
        assert time.monotonic() < deadline, report["rows"]
        time.sleep(0.2)
    assert "Shell_weight" in report["drifted_columns"]

    page.reload()  # the model document's flags of the last day, in the Model card
    expect(page.locator("dd[data-field='drift']")).to_contain_text("Shell_weight")
    page.locator("#view .columns").first.screenshot(path=ARTIFACTS / "drift" / "drift-model-facts-1280.png")
    card.get_by_role("button", name="Refresh").click()
    headline = card.locator("#drift-headline")
    expect(headline).to_contain_text("400 rows counted in the last 24 hours")
    expect(card.locator(".drift-findings")).to_contain_text("Shell_weight: PSI")
    shell = card.locator("table.data tr[data-column='Shell_weight']")
    expect(shell.locator(".tag.flagged")).to_have_text("flagged")
    # the rules table: every rule with its conditions in words and its rates as percents
    rule_rows = card.locator("table.data tr[data-rule]")
    assert rule_rows.count() == len(report["rules"])
    first = rule_rows.first.locator("td").all_inner_texts()
    assert re.fullmatch(r"r\d+", first[0]) and first[1].startswith("if ")
    assert re.fullmatch(r"[\d.]+%", first[2]) and re.fullmatch(r"[\d.]+%", first[3]), first
    for text in card.locator("table.data td.num").all_inner_texts():
        assert not re.search(r"\d\.\d{5,}", text), f"a raw float: {text}"
    # the charts: the rules' ratios and the columns' PSI over time, each with its threshold drawn
    for chart in ("#drift-rules-chart", "#drift-columns-chart"):
        expect(card.locator(f"{chart} svg path.line").first).to_be_attached()
        expect(card.locator(f"{chart} svg .threshold line").first).to_be_attached()
        assert card.locator(f"{chart} svg circle").count() >= 1
    expect(card.locator("#drift-columns-chart svg [data-series='Shell_weight'] path")).to_have_count(1)
    # the flagged column's bins: training share against these rows' share, all 400 in the top decile
    bins = card.locator("figure.bins[data-column='Shell_weight'] li")
    top = report["columns"][[c["column"] for c in report["columns"]].index("Shell_weight")]["bins"][-2]
    expect(bins.filter(has_text=top)).to_contain_text("→ 100%")
    shoot_card(page, "drift-card")

    # batch rows only: none yet, the empty state again
    card.get_by_label("Rows", exact=True).select_option("batch")
    expect(card.locator("#drift-empty")).to_contain_text("(batch jobs)")
    card.get_by_label("Rows", exact=True).select_option("")
    expect(shell.locator(".tag.flagged")).to_have_count(1)
    # the last 7 days (hourly windows) and the last hour (minute windows) count the same 400 rows
    for label, words in (("last 7 days", "the last 7 days"), ("last hour", "the last hour")):
        card.get_by_label("Range", exact=True).select_option(label=label)
        expect(headline).to_contain_text(f"400 rows counted in {words}")
        expect(card.locator("#drift-columns-chart figcaption")).to_contain_text("one point per")
    shoot_card(page, "drift-card-last-hour")

    # a PSI threshold of 100 from the form: saved, and Shell_weight is no longer flagged
    form = card.get_by_role("form", name="Drift thresholds")
    form.get_by_label("PSI", exact=True).fill("100")
    form.get_by_role("button", name="Save thresholds").click()
    expect(form.locator(".notice")).to_contain_text("saved")
    expect(shell).to_be_visible()
    expect(shell.locator(".tag.flagged")).to_have_count(0)
    assert api.get(f"/v1/models/{model['id']}/monitoring").json()["psi"] == 100

    # a PSI of -1 is refused: the message beside the field, the threshold kept
    form.get_by_label("PSI", exact=True).fill("-1")
    form.get_by_role("button", name="Save thresholds").click()
    psi_input = form.get_by_label("PSI", exact=True)
    expect(psi_input).to_have_attribute("aria-invalid", "true")
    expect(form.locator(".field-error")).to_contain_text("must be a number > 0, not -1")
    expect(form.get_by_role("alert")).to_be_visible()
    form.screenshot(path=ARTIFACTS / "drift" / "drift-thresholds-422-1280.png")
    assert api.get(f"/v1/models/{model['id']}/monitoring").json()["psi"] == 100
    assert not errors, errors
