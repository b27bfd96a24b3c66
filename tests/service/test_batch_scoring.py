"""Batch scoring over HTTP with real workers: a CSV or Parquet file (or a stored dataset) scored in chunk jobs,
downloaded as Parquet or CSV, equal to /predict and to the library's RuleEnsemble on the same rows; bad input is a
422 or a failed job naming the column and the first bad row, with no result; cancel; tenants; chunks over the
worker pool."""

import gzip
import io
import json
import time

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from solver import RuleEnsemble
from solver.encoding import TableEncoding
from tests.support.data import ABALONE
from tests.support.drift import drift
from tests.support.jobs import submit
from tests.support.problems import assert_problem
from tests.support.service import ServiceStack, make_settings

pytestmark = pytest.mark.integration

FOREST = {"n_estimators": 20, "max_depth": 3, "random_state": 0}
TERMINAL = ("succeeded", "failed", "canceled")


def abalone_features(rows: int = 2000) -> pd.DataFrame:
    frame = pd.read_csv(io.BytesIO(gzip.decompress(ABALONE.read_bytes())))
    return frame.drop(columns=["rings"]).iloc[:rows].reset_index(drop=True)


def promote(stack, dataset_id: str, name: str, **path) -> dict:
    job = submit(stack, {"dataset_id": dataset_id, "forest": FOREST, "n_lambdas": 10, "max_rules": 8, **path})
    stack.wait_for(job["id"], ("succeeded",), timeout=180)
    response = stack.client.post("/v1/models", json={"job_id": job["id"], "name": name})
    assert response.status_code == 201, response.text
    return response.json()


@pytest.fixture(scope="module")
def regression(stack, abalone):
    dataset, _ = abalone
    return promote(stack, dataset["id"], "batch-abalone")


@pytest.fixture(scope="module")
def classifier(stack):
    rng = np.random.default_rng(0)
    frame = abalone_features(1500)
    frame["label"] = np.where(frame["Shell_weight"] + rng.normal(0, 0.05, len(frame)) > 0.25, "old", "young")
    response = stack.client.post(
        "/v1/datasets?target=label", content=frame.to_csv(index=False).encode(), headers={"Content-Type": "text/csv"}
    )
    assert response.status_code in (200, 201), response.text
    return promote(stack, response.json()["id"], "batch-classifier", linear_terms=False)


def parquet_bytes(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()


def post_batch(client, ref: str, data: bytes, filename: str, headers=None, **query):
    params = "&".join(f"{key}={value}" for key, value in query.items())
    return client.post(
        f"/v1/models/{ref}/batch" + (f"?{params}" if params else ""),
        files={"file": (filename, data, "application/octet-stream")},
        headers=headers or {},
    )


def wait_batch(client, job_id: str, headers=None, timeout: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        view = client.get(f"/v1/models/batch/{job_id}", headers=headers or {}).json()
        if view["status"] in TERMINAL:
            return view
        time.sleep(0.1)
    raise TimeoutError(job_id)


def download(client, job_id: str, headers=None, **query) -> pd.DataFrame:
    response = client.get(f"/v1/models/batch/{job_id}/result", params=query, headers=headers or {})
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("text/csv"):
        return pd.read_csv(io.BytesIO(response.content))
    return pq.read_table(io.BytesIO(response.content)).to_pandas()


def library_scores(model: dict, frame: pd.DataFrame) -> np.ndarray:
    encoding = TableEncoding.from_dict(model["columns"])
    return RuleEnsemble.from_dict(model["ensemble"]).predict(encoding.encode_frame(frame[encoding.column_names]))


def served(client, model: dict, frame: pd.DataFrame, explain: bool = False) -> dict:
    response = client.post(
        f"/v1/models/{model['id']}/predict?explain={str(explain).lower()}",
        json={"dataframe_split": {"columns": list(frame.columns), "data": frame.astype(object).to_numpy().tolist()}},
    )
    assert response.status_code == 200, response.text
    return response.json()


def assert_no_parts(stack, job_id: str) -> None:
    assert not list(stack.redis.scan_iter(match=f"{stack.settings.key_prefix}job:{job_id}:batch-*", count=1000))


def test_a_regression_file_scores_in_chunk_jobs_as_the_library_and_predict(stack, regression):
    client, features = stack.client, abalone_features(2000)
    features.insert(0, "key", [f"k{i}" for i in range(len(features))])
    expected = library_scores(regression, features)
    assert np.allclose(served(client, regression, features.drop(columns=["key"]))["predictions"], expected)

    # the model's columns only: a column it does not score is refused, as /predict refuses it (issue 38)
    rows = features.drop(columns=["key"]).to_csv(index=False).encode()
    csv = post_batch(client, regression["id"], rows, "rows.csv", chunk_rows=600)
    assert csv.status_code == 202, csv.text
    assert csv.headers["Location"] == f"/v1/models/batch/{csv.json()['id']}"
    view = csv.json()
    assert view["kind"] == "batch" and view["batch"]["n_rows"] == 2000 and view["batch"]["n_chunks"] == 4
    assert len(view["cells"]) == 4  # one chunk job each, spread over the pool's two workers
    done = wait_batch(client, view["id"])
    assert done["status"] == "succeeded", done
    assert done["batch"]["rows_done"] == 2000 and done["summary"]["n_rows"] == 2000
    cells = [client.get(f"/v1/jobs/{cell}").json() for cell in view["cells"]]
    assert [cell["spec"]["first_row"] for cell in cells] == [0, 600, 1200, 1800]
    assert all(cell["status"] == "succeeded" and cell["kind"] == "batch_chunk" for cell in cells)
    result = download(client, view["id"])
    assert list(result.columns) == ["row", "prediction"]
    assert result["row"].tolist() == list(range(2000))
    assert np.allclose(result["prediction"], expected, rtol=0, atol=1e-12)
    assert_no_parts_but_results(stack, view["id"], 4)

    # Parquet in (a row group per 512 rows, read 750 at a time), CSV out, rows matched by an id column
    parquet = post_batch(
        client,
        "batch-abalone@latest",
        parquet_bytes(features),
        "rows.parquet",
        chunk_rows=750,
        format="csv",
        id_column="key",
    )
    assert parquet.status_code == 202, parquet.text
    assert wait_batch(client, parquet.json()["id"])["status"] == "succeeded"
    as_csv = download(client, parquet.json()["id"])
    assert list(as_csv.columns) == ["row", "key", "prediction"] and as_csv["key"].tolist() == features["key"].tolist()
    assert np.allclose(as_csv["prediction"], expected, rtol=1e-12, atol=1e-12)
    as_parquet = download(client, parquet.json()["id"], format="parquet")
    assert np.allclose(as_parquet["prediction"], expected, rtol=0, atol=1e-12)


def assert_no_parts_but_results(stack, job_id: str, n_chunks: int) -> None:
    keys = {key.decode() for key in stack.redis.scan_iter(match=f"{stack.settings.key_prefix}job:{job_id}:batch-*:*")}
    assert not [key for key in keys if ":batch-in:" in key]  # the inputs are deleted once scored
    assert {f"{stack.settings.key_prefix}job:{job_id}:batch-out:{i}" for i in range(n_chunks)} <= keys


def test_a_classifier_gives_labels_probabilities_and_explanations_as_predict(stack, classifier):
    client, features = stack.client, abalone_features(1200)
    expected = served(client, classifier, features, explain=True)
    response = post_batch(client, classifier["id"], parquet_bytes(features), "rows.parquet", explain="true")
    assert response.status_code == 202, response.text
    assert wait_batch(client, response.json()["id"])["status"] == "succeeded"
    result = download(client, response.json()["id"])
    classes = expected["classes"]
    assert list(result.columns) == [
        "row",
        "prediction",
        *(f"probability_{label}" for label in classes),
        "rules",
        "contributions",
        *(["linear_contributions"] if "linear_contributions" in expected else []),
    ]
    assert result["prediction"].tolist() == expected["predictions"]
    assert np.allclose(result[f"probability_{classes[1]}"], expected["probabilities"], rtol=0, atol=1e-12)
    assert np.allclose(result[f"probability_{classes[0]}"], 1 - np.array(expected["probabilities"]), atol=1e-12)
    assert [list(rules) for rules in result["rules"]] == expected["explanations"]
    assert [list(c) for c in result["contributions"]] == expected["contributions"]
    assert sum(map(len, expected["explanations"])) > 0  # rules fired
    scores = library_scores(classifier, features)  # log-odds of classes[1]
    assert np.allclose(result[f"probability_{classes[1]}"], 1 / (1 + np.exp(-scores)), atol=1e-12)

    as_csv = download(client, response.json()["id"], format="csv")  # lists as JSON text
    assert [json.loads(rules) for rules in as_csv["rules"]] == expected["explanations"]


def test_a_stored_dataset_is_scored_by_id(stack, regression, abalone):
    dataset, _ = abalone
    response = stack.client.post(
        f"/v1/models/{regression['id']}/batch?chunk_rows=1500", json={"dataset_id": dataset["id"]}
    )
    assert response.status_code == 202, response.text
    view = wait_batch(stack.client, response.json()["id"])
    assert view["status"] == "succeeded" and view["batch"]["n_rows"] == dataset["n_rows"]
    result = download(stack.client, view["id"])
    features = pd.read_csv(io.BytesIO(gzip.decompress(ABALONE.read_bytes()))).drop(columns=["rings"])
    assert np.allclose(result["prediction"], library_scores(regression, features), rtol=0, atol=1e-12)


def test_missing_columns_and_unscorable_types_are_422s_at_submission(stack, regression):
    client, features = stack.client, abalone_features(50)
    missing = post_batch(
        client, regression["id"], features.drop(columns=["Height"]).to_csv(index=False).encode(), "a.csv"
    )
    assert_problem(missing, 422, "columns.Height")
    no_id = post_batch(client, regression["id"], features.to_csv(index=False).encode(), "a.csv", id_column="nope")
    assert_problem(no_id, 422, "id_column")
    booleans = features.assign(Height=features["Height"] > 0.1)
    typed = post_batch(client, regression["id"], parquet_bytes(booleans), "a.parquet")
    assert_problem(typed, 422, "columns.Height")
    assert "bool" in typed.json()["errors"][0]["message"]
    assert_problem(post_batch(client, "mdl_nosuchmodel", b"a,b\n1,2\n", "a.csv"), 404, "path.ref")
    empty = post_batch(client, regression["id"], features.iloc[:0].to_csv(index=False).encode(), "a.csv")
    assert_problem(empty, 422, "file")


@pytest.mark.parametrize(
    ("column", "value", "said"),
    [("Length", "long", "'long', not a number"), ("Sex", "X", "unknown categories ['X']")],
    ids=["text in a number column", "an unseen level"],
)
def test_a_bad_value_fails_the_job_naming_the_column_and_first_bad_row_with_no_result(
    stack, regression, column, value, said
):
    client, features = stack.client, abalone_features(2000).astype({"Length": object})
    features.loc[[1234, 1900], column] = value  # in the third and fourth chunk: the third's row is named
    response = post_batch(client, regression["id"], features.to_csv(index=False).encode(), "bad.csv", chunk_rows=500)
    assert response.status_code == 202, response.text
    view = wait_batch(client, response.json()["id"])
    assert view["status"] == "failed", view
    detail = view["error"]["detail"]
    assert f"column '{column}'" in detail and "row 1234" in detail and said in detail, detail
    assert "chunk 2" in detail
    assert_problem(client.get(f"/v1/models/batch/{view['id']}/result"), 409, "job_id")
    assert_no_parts(stack, view["id"])


def test_cancel_stops_a_queued_batch_and_leaves_no_result(idle_queue, regression):
    client, features = idle_queue.client, abalone_features(300)
    response = post_batch(client, regression["id"], features.to_csv(index=False).encode(), "a.csv", chunk_rows=100)
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    assert response.json()["status"] == "queued" and len(response.json()["cells"]) == 3
    canceled = client.post(f"/v1/models/batch/{job_id}/cancel")
    assert canceled.status_code == 202 and canceled.json()["status"] == "canceled"
    cells = [client.get(f"/v1/jobs/{cell}").json()["status"] for cell in response.json()["cells"]]
    assert cells == ["canceled"] * 3
    assert_problem(client.get(f"/v1/models/batch/{job_id}/result"), 409, "job_id")
    assert_no_parts(idle_queue, job_id)
    assert client.delete(f"/v1/models/batch/{job_id}").status_code == 204
    assert_problem(client.get(f"/v1/models/batch/{job_id}"), 404, "job_id")


def test_only_the_model_s_tenant_sees_its_batch_jobs_and_results(stack):
    alice, bob = {"X-API-Key": "alice-secret"}, {"X-API-Key": "bob-secret"}
    settings = make_settings(
        api_keys=["alice=alice-secret", "bob=bob-secret"],
        queue_name=f"{stack.settings.queue_name}-batch-tenants",
        key_prefix=stack.settings.key_prefix,
    )
    with ServiceStack(settings, n_workers=1, clean_keys=False) as own:
        client, features = own.client, abalone_features(300)
        data = gzip.decompress(ABALONE.read_bytes())
        dataset = client.post("/v1/datasets?target=rings", content=data, headers={**alice, "Content-Type": "text/csv"})
        job = client.post(
            "/v1/jobs", json={"dataset_id": dataset.json()["id"], "forest": FOREST, "n_lambdas": 6}, headers=alice
        ).json()
        deadline = time.monotonic() + 120
        while client.get(f"/v1/jobs/{job['id']}", headers=alice).json()["status"] not in TERMINAL:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        model = client.post("/v1/models", json={"job_id": job["id"], "name": "batch-tenant"}, headers=alice).json()
        csv = features.to_csv(index=False).encode()
        assert_problem(post_batch(client, model["id"], csv, "a.csv", headers=bob), 404, "path.ref")
        assert_problem(post_batch(client, "batch-tenant@latest", csv, "a.csv", headers=bob), 404)
        submitted = post_batch(client, model["id"], csv, "a.csv", headers=alice)
        assert submitted.status_code == 202, submitted.text
        job_id = submitted.json()["id"]
        assert wait_batch(client, job_id, headers=alice)["status"] == "succeeded"
        assert len(download(client, job_id, headers=alice)) == 300
        for route in ("", "/result"):
            assert_problem(client.get(f"/v1/models/batch/{job_id}{route}", headers=bob), 404, "job_id")
        assert_problem(client.post(f"/v1/models/batch/{job_id}/cancel", headers=bob), 404, "job_id")
        assert_problem(client.delete(f"/v1/models/batch/{job_id}", headers=bob), 404, "job_id")
        assert client.delete(f"/v1/models/batch/{job_id}", headers=alice).status_code == 204


def test_a_path_job_is_no_batch_job(stack, abalone):
    dataset, forest_id = abalone
    job = submit(stack, {"dataset_id": dataset["id"], "forest_id": forest_id, "n_lambdas": 4})
    assert_problem(stack.client.get(f"/v1/models/batch/{job['id']}"), 404, "job_id")


def test_a_batch_upload_over_its_limit_is_a_413_and_may_pass_the_upload_limit(stack):
    settings = stack.settings.model_copy(update={"max_batch_bytes": 4000, "max_upload_bytes": 1000})
    with ServiceStack(settings, n_workers=0, clean_keys=False) as own:
        body = abalone_features(200).to_csv(index=False).encode()
        assert_problem(post_batch(own.client, "mdl_x", body, "a.csv"), 413, "file")
        small = abalone_features(30).to_csv(index=False).encode()
        assert 1000 < len(small) < 4000
        assert_problem(post_batch(own.client, "mdl_x", small, "a.csv"), 404, "path.ref")  # past the upload limit


def test_chunks_hold_whole_tables_of_pyarrow_types():
    from app.core.batch.files import _rebatched

    batches = [pa.record_batch({"a": pa.array(range(start, start + 7))}) for start in range(0, 21, 7)]
    chunks = list(_rebatched(iter(batches), 5))
    assert [chunk.num_rows for chunk in chunks] == [5, 5, 5, 5, 1]
    assert pa.concat_tables(chunks).column("a").to_pylist() == list(range(21))


def test_a_reference_names_a_model_id_an_alias_a_version_or_the_latest():
    from app.core.batch.scoring import parse_ref
    from app.core.registry import ModelRef

    assert parse_ref("mdl_0123") == "mdl_0123"
    assert parse_ref("rings@champion") == ModelRef("rings", alias="champion")
    assert parse_ref("rings@3") == parse_ref("rings@v3") == ModelRef("rings", version=3)
    assert parse_ref("rings@latest") == ModelRef("rings")


def test_a_chunk_of_a_cox_model_gets_survival_columns_as_the_library():
    from app.core.batch.chunks import score_chunk
    from app.core.model_scoring import ScoringModel
    from solver import FireSurvival

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"age": rng.uniform(20, 80, 400), "dose": rng.uniform(0, 1, 400)})
    time_to_event = rng.exponential(np.exp(-0.03 * (frame["age"] - 50)))
    y = np.where(rng.uniform(size=400) < 0.8, time_to_event, -time_to_event)  # signed: negative where censored
    model = FireSurvival(n_estimators=20, max_depth=2, max_rules=5, random_state=0).fit(frame, y)
    encoding = TableEncoding.numeric(["age", "dose"])
    scoring = ScoringModel("m", "cox", 1, "t", model.rule_ensemble_, encoding)
    scored = score_chunk(scoring, pa.Table.from_pandas(frame, preserve_index=False), first_row=10, times=[0.5, 2.0])
    assert scored.table.column_names == ["row", "prediction", "survival_0.5", "survival_2"]
    assert scored.table.column("row").to_pylist() == list(range(10, 410))
    assert np.array_equal(scored.X, frame.to_numpy())
    curves = model.predict_survival_function(frame, [0.5, 2.0])
    assert np.allclose(scored.table.column("survival_0.5").to_numpy(), curves[:, 0], rtol=0, atol=1e-12)
    assert np.allclose(scored.table.column("survival_2").to_numpy(), curves[:, 1], rtol=0, atol=1e-12)
    hazard_ratios = np.exp(model.predict(frame))  # as /predict answers a Cox model: exp(log hazard ratio)
    assert np.allclose(scored.table.column("prediction").to_numpy(), hazard_ratios, rtol=1e-12, atol=0)


def test_a_chunk_whose_worker_died_is_retried_and_the_batch_completes(own_queue, regression):
    client, features = own_queue.client, abalone_features(4177)
    rows = pd.concat([features] * 72, ignore_index=True).iloc[:300_000]  # two chunks of 150,000 rows, explained
    counted = drift(own_queue, regression["id"], source="batch")["rows"]
    response = post_batch(
        client, regression["id"], parquet_bytes(rows), "big.parquet", chunk_rows=150_000, explain="true"
    )
    assert response.status_code == 202, response.text
    first = response.json()["cells"][0]
    own_queue.wait_for(first, ("running",), timeout=60)
    time.sleep(0.3)  # the horse is scoring the chunk
    own_queue.workers[-1].kill()
    own_queue.add_worker()
    view = wait_batch(client, response.json()["id"], timeout=180)
    assert view["status"] == "succeeded", view
    retried = client.get(f"/v1/jobs/{first}").json()
    assert retried["attempt"] == 2 and "stopped sending heartbeats" in retried["history"][0]["reason"]
    result = download(client, view["id"])
    assert result["row"].tolist() == list(range(300_000))
    assert np.allclose(result["prediction"], library_scores(regression, rows), rtol=0, atol=1e-12)
    # the killed chunk's rows, scored twice, are counted once in the model's drift (issue 38)
    assert drift(own_queue, regression["id"], source="batch")["rows"] - counted == 300_000


def test_a_chunk_names_the_file_s_row_of_a_bad_exposure_or_an_infinite_number_and_scales_rates_by_exposure():
    from app.core.batch.chunks import BatchRowsInvalid, score_chunk
    from app.core.model_scoring import ScoringModel
    from solver import FireRegressor

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.uniform(size=500), "b": rng.uniform(size=500)})
    model = FireRegressor(loss="poisson", n_estimators=10, max_depth=2, max_rules=4, random_state=0)
    model.fit(frame, rng.poisson(np.exp(frame["a"])))
    scoring = ScoringModel("m", "counts", 1, "t", model.rule_ensemble_, TableEncoding.numeric(["a", "b"]), exposure="e")
    scored = score_chunk(scoring, pa.Table.from_pandas(frame.assign(e=2.0), preserve_index=False))
    assert np.allclose(scored.table.column("prediction").to_numpy(), 2 * model.predict(frame), rtol=1e-12, atol=0)
    exposures = frame.assign(e=1.0)
    exposures.loc[7, "e"] = -1.0
    with pytest.raises(BatchRowsInvalid, match=r"column 'e': row 1007 has -1.0: not a valid exposure"):
        score_chunk(scoring, pa.Table.from_pandas(exposures, preserve_index=False), first_row=1000)
    infinite = frame.copy()
    infinite.loc[3, "a"] = np.inf
    with pytest.raises(BatchRowsInvalid, match=r"column 'a': row 1003 has inf: infinite"):
        score_chunk(scoring, pa.Table.from_pandas(infinite, preserve_index=False), first_row=1000)
