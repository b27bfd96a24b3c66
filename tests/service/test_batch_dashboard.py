"""Batch scoring from the dashboard in a real browser (Debian's headless chromium through Playwright) against the API
served over HTTP with real workers: a CSV picked on a model's page is scored in chunk jobs, its progress shown in
rows and chunks as the batch document counts them, the result downloaded as Parquet and as CSV holding /predict's
predictions of the same rows; the batch job's own page shows its model, rows, chunks, time and downloads; a batch is
canceled from the model's page.

Screenshots at 1280x800 and 400 px wide go to test-artifacts/batch/.
"""

import re

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from tests.support.browser import Served, new_page, shoot, sign_in

pytestmark = pytest.mark.integration

FOLDER = "batch"
PROGRESS = re.compile(r"^([\d,]+) of ([\d,]+) rows · ([\d,]+) of ([\d,]+) chunks?( · [\d,]+ failed)?$")


def diabetes() -> pd.DataFrame:
    """scikit-learn's diabetes table (442 rows, 10 numeric columns) and its target."""
    from sklearn.datasets import load_diabetes

    return load_diabetes(as_frame=True).frame


@pytest.fixture(scope="module")
def model(served) -> dict:
    """A regression model of the diabetes table, promoted as 'diabetes' (a small forest, a short path)."""
    api = served.api
    dataset = api.post(
        "/v1/datasets?target=target", content=diabetes().to_csv(index=False), headers={"Content-Type": "text/csv"}
    )
    assert dataset.status_code in (200, 201), dataset.text
    job = api.post(
        "/v1/jobs",
        json={
            "dataset_id": dataset.json()["id"],
            "forest": {"n_estimators": 20, "max_depth": 3, "random_state": 0},
            "n_lambdas": 10,
            "max_rules": 8,
        },
    )
    assert job.status_code == 202, job.text
    assert served.wait_for_job(job.json()["id"])["status"] == "succeeded"
    promoted = api.post("/v1/models", json={"job_id": job.json()["id"], "name": "diabetes"})
    assert promoted.status_code == 201, promoted.text
    return promoted.json()


def features_csv(path, repeat: int = 1):
    """The diabetes features (repeated ``repeat`` times) with a key column, as CSV at ``path``: (path, frame)."""
    frame = pd.concat([diabetes().drop(columns="target")] * repeat, ignore_index=True)
    frame.insert(0, "key", [f"k{i}" for i in range(len(frame))])
    frame.to_csv(path, index=False)
    return path, frame


def predict(api, model: dict, frame: pd.DataFrame) -> np.ndarray:
    body = {"dataframe_split": {"columns": list(frame.columns), "data": frame.to_numpy().tolist()}}
    response = api.post(f"/v1/models/{model['id']}/predict", json=body)
    assert response.status_code == 200, response.text
    return np.array(response.json()["predictions"])


def counts(text: str) -> tuple[int, int, int, int]:
    """(rows done, rows, chunks done, chunks) of a progress text."""
    found = PROGRESS.match(text)
    assert found, text
    return tuple(int(found.group(k).replace(",", "")) for k in range(1, 5))  # type: ignore[return-value]


def record_progress(page) -> None:
    """Keep every text the page shows as a batch's progress, in order, in window.batchSeen."""
    page.evaluate("""() => {
        window.batchSeen = [];
        new MutationObserver(() => {
            for (const element of document.querySelectorAll("[data-field=batch-progress]")) {
                if (window.batchSeen.at(-1) !== element.textContent) window.batchSeen.push(element.textContent);
            }
        }).observe(document.body, { subtree: true, childList: true, characterData: true });
    }""")


def score_file(page, path, **options: str) -> None:
    """Pick ``path`` in the model page's "Score a file" form, fill its options (label: text) and submit."""
    page.get_by_label("File to score").set_input_files(str(path))
    for label, value in options.items():
        page.get_by_label(label, exact=True).fill(value)
    page.get_by_role("button", name="Score the file").click()


def downloaded(page, button: str):
    """The file a click on ``button`` downloads: (its suggested name, its path)."""
    with page.expect_download() as info:
        page.get_by_role("button", name=button).click()
    return info.value.suggested_filename, info.value.path()


def test_a_file_scored_from_the_model_page_shows_rows_and_chunks_and_downloads_predict_s_scores(
    served, browser, model, tmp_path
):
    from playwright.sync_api import expect

    errors: list[str] = []
    page = new_page(browser, errors)
    api = served.api
    sign_in(page, served.base_url, f"/dashboard/models/{model['id']}")
    expect(page.get_by_role("heading", name="Score a file")).to_be_visible()
    path, frame = features_csv(tmp_path / "rows.csv")
    record_progress(page)
    score_file(page, path, **{"Rows per chunk": "100", "Id column": "key"})
    expect(page.locator("#batch .status")).to_have_text("succeeded", timeout=120_000)

    # the counts shown are the batch document's: 442 rows in 5 chunks, every one done
    batch_id = page.locator("#batch a[href^='/dashboard/jobs/']").get_attribute("href").rsplit("/", 1)[1]
    view = api.get(f"/v1/models/batch/{batch_id}").json()
    assert view["status"] == "succeeded" and view["spec"]["model_id"] == model["id"]
    assert (view["batch"]["n_rows"], view["batch"]["n_chunks"]) == (442, 5)
    shown = page.locator("#batch [data-field=batch-progress]").inner_text()
    batch = view["batch"]
    assert (
        counts(shown)
        == (batch["rows_done"], batch["n_rows"], batch["chunks_done"], batch["n_chunks"])
        == (442, 442, 5, 5)
    )
    # on the way, each text counted whole chunks: 100 rows each, the last chunk 42
    for text in page.evaluate("window.batchSeen"):
        rows_done, rows, chunks_done, chunks = counts(text)
        assert (rows, chunks) == (442, 5) and rows_done in (100 * chunks_done, 100 * (chunks_done - 1) + 42), text
    assert "null" not in page.inner_text("#batch")
    shoot(page, FOLDER, "model-batch-done")

    # the downloads: every row, in file order with its key, predicted as /predict predicts the same rows
    expected = predict(api, model, frame.drop(columns="key"))
    name, parquet = downloaded(page, "Download Parquet")
    assert name == f"{batch_id}.parquet"
    scored = pq.read_table(parquet).to_pandas()
    assert list(scored.columns) == ["row", "key", "prediction"] and len(scored) == len(frame) == 442
    assert scored["row"].tolist() == list(range(442)) and scored["key"].tolist() == frame["key"].tolist()
    np.testing.assert_array_equal(scored["prediction"].to_numpy(), expected)
    name, csv = downloaded(page, "Download CSV")
    assert name == f"{batch_id}.csv"
    as_csv = pd.read_csv(csv)
    assert as_csv["key"].tolist() == frame["key"].tolist()
    np.testing.assert_allclose(as_csv["prediction"].to_numpy(), expected, rtol=1e-15, atol=0)

    # the batch job's own page: model, rows, chunks, time and the downloads; no "null", no problem shown
    page.locator("#batch a[href^='/dashboard/jobs/']").click()
    page.wait_for_url(re.compile(rf".*/dashboard/jobs/{batch_id}$"))
    expect(page.locator("dd[data-field='status']")).to_have_text("succeeded")
    expect(page.get_by_role("heading", name=f"Batch job {batch_id}")).to_be_visible()
    expect(page.locator("dd[data-field='model']")).to_have_text(f"diabetes v{model['version']}")
    expect(page.locator("dd[data-field='model'] a")).to_have_attribute("href", f"/dashboard/models/{model['id']}")
    expect(page.locator("dd[data-field='source']")).to_have_text("rows.csv")
    expect(page.locator("dd[data-field='n_rows']")).to_have_text(str(view["batch"]["n_rows"]))
    expect(page.locator("dd[data-field='rows_done']")).to_have_text(str(view["batch"]["rows_done"]))
    expect(page.locator("dd[data-field='n_chunks']")).to_have_text(f"{view['batch']['n_chunks']} of ≤100 rows each")
    expect(page.locator("dd[data-field='chunks_done']")).to_have_text(str(view["batch"]["chunks_done"]))
    elapsed = page.locator("dd[data-field='elapsed']").inner_text()
    took = view["finished_at"] - view["created_at"]
    assert re.fullmatch(r"[\d.]+ (ms|s)", elapsed), elapsed
    seconds = float(elapsed.split()[0]) / (1000 if elapsed.endswith(" ms") else 1)
    assert seconds == pytest.approx(took, rel=0.01), (elapsed, took)  # three significant digits
    expect(page.get_by_role("button", name="Download Parquet")).to_be_visible()
    body = page.inner_text("#view")
    assert "null" not in body and "undefined" not in body, body
    expect(page.locator("#view .problem")).to_have_count(0)
    shoot(page, FOLDER, "batch-job")

    # a chunk job's page names its rows and its batch
    chunk = api.get(f"/v1/jobs/{view['cells'][4]}").json()
    page.goto(f"{served.base_url}/dashboard/jobs/{chunk['id']}")
    expect(page.locator("dd[data-field='rows']")).to_have_text("42 (rows 400 to 441 of the file)")
    expect(page.locator("dd[data-field='batch'] a")).to_have_attribute("href", f"/dashboard/jobs/{batch_id}")
    assert not errors, errors


def test_a_batch_is_canceled_from_the_model_page(served, browser, model, tmp_path):
    """On an API whose queue no worker serves (the same data): the batch stays queued until canceled."""
    from playwright.sync_api import expect

    idle = {"key_prefix": served.settings.key_prefix, "queue_name": f"{served.settings.queue_name}-idle"}
    with Served(n_workers=0, clean_keys=False, **idle) as unserved:  # its keys are the module's, removed with them
        errors: list[str] = []
        page = new_page(browser, errors)
        sign_in(page, unserved.base_url, f"/dashboard/models/{model['id']}")
        path, _ = features_csv(tmp_path / "rows.csv")
        score_file(page, path, **{"Rows per chunk": "100", "Id column": "key"})  # the file's key: no column unscored
        cancel = page.locator("#batch").get_by_role("button", name="Cancel")
        expect(cancel).to_be_visible()
        expect(page.locator("#batch .status")).to_have_text("queued")
        batch_id = page.locator("#batch a[href^='/dashboard/jobs/']").get_attribute("href").rsplit("/", 1)[1]
        assert counts(page.locator("#batch [data-field=batch-progress]").inner_text()) == (0, 442, 0, 5)
        cancel.click()
        expect(page.locator("#batch .status")).to_have_text("canceled")
        view = unserved.api.get(f"/v1/models/batch/{batch_id}").json()
        assert view["status"] == "canceled" and view["batch"]["chunks_done"] == 0
        cells = [unserved.api.get(f"/v1/jobs/{cell}").json()["status"] for cell in view["cells"]]
        assert cells == ["canceled"] * 5
        expect(page.locator("#batch")).to_contain_text("Canceled")
        expect(page.locator("#batch").get_by_role("button", name="Cancel")).to_have_count(0)
        expect(page.get_by_role("button", name="Download Parquet")).to_have_count(0)
        assert unserved.api.get(f"/v1/models/batch/{batch_id}/result").status_code == 409
        shoot(page, FOLDER, "model-batch-canceled")
        assert not errors, errors
