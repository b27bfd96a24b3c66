"""Forms, messages, rules and API docs where a person sees them, in Debian's chromium against the API served over
HTTP with a real worker: the job form shows every fault of a submission at once, each at its field, the rest in
words; the validation-dataset picker offers only tables with the training table's columns and says why not the
others; a PNG renamed .csv is refused before any column is offered; a 0/1 column's rules read "smoker is 1"; /docs
and /redoc draw every operation with every request outside the machine refused, and no dashboard view asks for
anything outside. Screenshots under test-artifacts/forms/."""

import re
from urllib.parse import urlparse

import pandas as pd
import pytest

from tests.support.browser import Served, new_page, shoot, sign_in
from tests.support.synthetic import png_image, smokers_table

pytestmark = pytest.mark.integration

FOLDER = "forms"
# words of programs (the list), as whole words
PROGRAM_WORDS = re.compile(r"\b(None|null|True|False|422|dict|list)\b|Input should be|Value error|Unprocessable")
VIEWS = ["/dashboard/jobs", "/dashboard/jobs/new", "/dashboard/datasets", "/dashboard/forests", "/dashboard/models"]


@pytest.fixture(scope="module")
def served():
    with Served(n_workers=1) as running:
        yield running


def upload(served, frame: pd.DataFrame, name: str) -> dict:
    response = served.api.post(
        "/v1/datasets?target=y", files={"file": (name, frame.to_csv(index=False).encode(), "text/csv")}
    )
    assert response.status_code in (200, 201), response.text
    return response.json()


@pytest.fixture(scope="module")
def tables(served):
    """The smokers table, a twin of its columns (validation rows), and one without the column insured."""
    training, twin = smokers_table(400, seed=0), smokers_table(200, seed=1)
    return {
        "training": upload(served, training, "smokers.csv"),
        "twin": upload(served, twin, "smokers-later.csv"),
        "other": upload(served, twin.drop(columns="insured"), "smokers-no-insured.csv"),
    }


def refuse_outside(page) -> list[str]:
    """Abort every request of ``page`` to a host outside this machine; the list of their URLs, as they come."""
    refused: list[str] = []

    def handle(route):
        url = route.request.url
        if urlparse(url).hostname in ("127.0.0.1", "localhost"):
            route.continue_()
        else:
            refused.append(url)
            route.abort()

    page.route("**/*", handle)
    return refused


def operations(served) -> int:
    document = served.api.get("/openapi.json").json()
    return sum(1 for methods in document["paths"].values() for method in methods if method != "parameters")


def test_the_api_docs_draw_every_operation_without_the_internet(served, browser):
    errors: list[str] = []
    page = new_page(browser, errors)
    refused = refuse_outside(page)
    count = operations(served)
    page.goto(f"{served.base_url}/docs")
    page.wait_for_selector(".opblock", timeout=30_000)
    assert page.locator(".opblock").count() == count
    assert "FIRE rule extraction" in page.inner_text(".info")
    shoot(page, FOLDER, "swagger-offline")
    page.goto(f"{served.base_url}/redoc")
    page.wait_for_selector("[data-section-id^='operation/']", timeout=30_000)
    sections = page.eval_on_selector_all(
        "[data-section-id^='operation/']", "nodes => nodes.map(n => n.dataset.sectionId)"
    )  # an operation's section in the middle column (the menu's entries are tag/.../operation/...)
    assert len(set(sections)) == count
    shoot(page, FOLDER, "redoc-offline")
    assert refused == [] and errors == []


def test_no_dashboard_view_asks_for_anything_outside(served, browser):
    errors: list[str] = []
    page = new_page(browser, errors)
    refused = refuse_outside(page)
    sign_in(page, served.base_url, VIEWS[0])
    for view in VIEWS:
        page.goto(f"{served.base_url}{view}")
        page.wait_for_load_state("networkidle")
        assert page.locator("h1").inner_text(), view
    assert refused == [] and errors == []


def test_the_job_form_shows_every_fault_at_once_at_its_field(served, browser, tables):
    from playwright.sync_api import expect

    errors: list[str] = []
    page = new_page(browser, errors)
    sign_in(page, served.base_url, f"/dashboard/jobs/new?dataset={tables['training']['id']}")
    expect(page.get_by_role("button", name="Submit job")).to_be_visible()
    page.get_by_label("Depth", exact=True).fill("0")
    page.get_by_label("Features tried per split").fill("abc")
    page.get_by_label("γ (MCP concavity)").fill("0.5")
    page.get_by_label("λ steps").fill("0")
    page.get_by_role("button", name="Submit job").click()
    problem = page.locator(".problem")
    expect(problem).to_contain_text("Please check: 4 fields of the request need a change. Each is shown at its field")
    shown = {
        name: page.locator(f"[data-field='{name}'] + .field-error").inner_text()
        for name in ("forest.max_depth", "forest.max_features", "gamma", "n_lambdas")
    }
    assert shown == {
        "forest.max_depth": "must be an integer >= 1, got 0 (use a value it allows)",
        "forest.max_features": "must be a fraction in (0, 1], a whole number >= 1, 'sqrt', 'log2' or empty, "
        'not the text "abc" (use one of those forms)',
        "gamma": "must be a number > 1 (block MCP scaling), got 0.5 (use a value it allows)",
        "n_lambdas": "must be an integer >= 1, got 0 (use a value it allows)",
    }
    assert page.locator(".field-error").count() == 4 and problem.locator("li").count() == 0  # none said twice
    assert page.locator("[aria-invalid=true]").count() == 4
    form_text = page.inner_text("form")
    assert not PROGRAM_WORDS.search(form_text), PROGRAM_WORDS.search(form_text)
    shoot(page, FOLDER, "job-form-faults")
    assert errors == []


def test_the_validation_picker_offers_only_tables_with_the_training_columns(served, browser, tables):
    from playwright.sync_api import expect

    errors: list[str] = []
    page = new_page(browser, errors)
    sign_in(page, served.base_url, f"/dashboard/jobs/new?dataset={tables['training']['id']}")
    page.get_by_label("another dataset").check()
    picker = page.get_by_label("Validation dataset")
    expect(picker).to_be_visible()
    options = {
        option["value"]: (option["text"], option["disabled"])
        for option in picker.locator("option").evaluate_all(
            "nodes => nodes.map(n => ({value: n.value, text: n.textContent, disabled: n.disabled}))"
        )
    }
    assert options[tables["training"]["id"]] == (
        "smokers.csv (target y, 400 rows) — not offered: it is the training dataset",
        True,
    )
    assert options[tables["other"]["id"]] == (
        "smokers-no-insured.csv (target y, 200 rows) — not offered: it lacks insured",
        True,
    )
    assert options[tables["twin"]["id"]] == ("smokers-later.csv (target y, 200 rows)", False)
    expect(picker).to_have_value(tables["twin"]["id"])
    expect(page.locator("[role=status]", has_text="Not offered:")).to_have_text(
        "Not offered: smokers-no-insured.csv (it lacks insured)."
    )
    shoot(page, FOLDER, "validation-picker")
    # what the picker offers, the API takes: a path on the training table validated on the twin is queued
    body = {"dataset_id": tables["training"]["id"], "forest": {"n_estimators": 5, "max_depth": 2}, "n_lambdas": 3}
    response = served.api.post("/v1/jobs", json={**body, "validation": {"dataset_id": tables["twin"]["id"]}})
    assert response.status_code == 202, response.text
    served.wait_for_job(response.json()["id"])
    refused = served.api.post("/v1/jobs", json={**body, "validation": {"dataset_id": tables["other"]["id"]}})
    assert refused.status_code == 422 and "insured" in refused.json()["errors"][0]["message"]
    assert errors == []


def test_a_png_renamed_csv_is_refused_before_any_column_is_offered(served, browser, tmp_path):
    from playwright.sync_api import expect

    errors: list[str] = []
    page = new_page(browser, errors)
    sign_in(page, served.base_url, "/dashboard/datasets")
    image = tmp_path / "chart.csv"
    image.write_bytes(png_image())
    page.get_by_label("Table file").set_input_files(str(image))
    expect(page.locator(".problem")).to_have_text(
        "This file is not a table: it holds a PNG image, not the text of a CSV or JSON table. Choose a CSV (gzipped "
        "too), Parquet or JSON file."
    )
    target = page.get_by_label("Target column")
    assert not [text for text in target.locator("option").all_inner_texts() if "PNG" in text]
    shoot(page, FOLDER, "png-refused")
    assert errors == []


def test_the_rules_of_a_0_1_column_read_as_its_value(served, browser, tables):
    from playwright.sync_api import expect

    body = {
        "dataset_id": tables["training"]["id"],
        "forest": {"n_estimators": 40, "max_depth": 2},
        "max_rules": 12,
        "linear_terms": False,
    }
    response = served.api.post("/v1/jobs", json=body)
    assert response.status_code == 202, response.text
    job = served.wait_for_job(response.json()["id"])
    assert job["status"] == "succeeded", job
    selected = served.api.get(f"/v1/jobs/{job['id']}/result").json()["selected"]
    rules = served.api.get(f"/v1/jobs/{job['id']}/steps/{selected}/rules").json()
    said = set(re.findall(r"\b(?:smoker|sex|insured) is \d\b", rules["text"]))
    assert said, rules["text"]
    errors: list[str] = []
    page = new_page(browser, errors)
    sign_in(page, served.base_url, "/dashboard/jobs")
    page.goto(f"{served.base_url}/dashboard/jobs/{job['id']}/steps/{selected}")
    expect(page.locator("ul.conditions").first).to_be_visible()
    shown = page.inner_text("main")
    assert set(re.findall(r"\b(?:smoker|sex|insured) is \d\b", shown)) == said
    assert not re.search(r"\b(smoker|sex|insured) (>|≤|<=)|< (smoker|sex|insured)\b", shown)
    shoot(page, FOLDER, "binary-rules")
    assert errors == []
