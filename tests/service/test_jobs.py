"""End to end through HTTP with real worker processes: train, path, result, promote, predict;
cache hits, grids, idempotency, events, cancellation and a killed worker."""

import json
import time

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

from app.core.model_cache import MODEL_RECHECK_SECONDS
from app.core.tenants import DEFAULT_TENANT
from app.main import create_app
from solver import RuleEnsemble
from tests.support.data import ELEVATORS, KIN8NM, abalone_frame
from tests.support.jobs import (
    ABALONE_ROW,
    SMALL_FOREST,
    scoring_url,
    submit,
    train_forest,
)
from tests.support.problems import assert_problem

pytestmark = pytest.mark.integration


def encode_like_pandas(frame: pd.DataFrame, feature_names: list[str]) -> np.ndarray:
    """An encoding written independently of the service's, for checking its predictions."""
    return pd.get_dummies(frame, columns=["Sex"], prefix_sep="=", dtype=float)[feature_names].to_numpy()


def test_upload_train_path_promote_predict(stack, abalone):
    dataset, forest_id = abalone
    client = stack.client
    forest = client.get(f"/v1/forests/{forest_id}").json()
    assert forest["n_trees"] == 50 and forest["feature_names"] == dataset["feature_names"]
    assert forest["source"]["rows"] == {"validation_fraction": 0.2, "seed": 0}  # trained on the training rows only

    job = submit(
        stack,
        {
            "dataset_id": dataset["id"],
            "forest_id": forest_id,
            "fusion_ratio": 1.0,
            "n_lambdas": 30,
            "max_rules": 15,
            "validation": {"fraction": 0.2, "seed": 0},
        },
    )
    polled = client.get(f"/v1/jobs/{job['id']}")
    assert polled.headers.get("Retry-After") or polled.json()["status"] == "succeeded"
    done = stack.wait_for(job["id"], ("succeeded",))
    assert {"queue_wait", "matrix_build", "path", "total"} <= set(done["timings"])
    assert done["progress"]["step"] == done["summary"]["n_steps"] and done["progress"]["phase"] == "done"

    result = client.get(f"/v1/jobs/{job['id']}/result").json()
    assert result["n_val"] == round(4177 * 0.2) and result["n_train"] == 4177 - result["n_val"]
    assert all(step["val_loss"] is not None and step["val_loss"] > 0 for step in result["steps"])
    selected = result["steps"][result["selected"]]
    assert selected["n_terms"] <= 15  # the budget counts terms: rules and linear terms (the default: linear_terms)
    assert selected["val_loss"] == min(s["val_loss"] for s in result["steps"] if s["n_terms"] <= 15)

    step_rules = client.get(f"/v1/jobs/{job['id']}/steps/{result['selected']}/rules").json()
    # a step counts its rules, its linear terms and both (the terms the budget counts)
    linear = step_rules["rules"].get("linear", [])
    assert step_rules["selected"] and step_rules["n_linear"] == len(linear) == selected["n_linear"]
    assert len(step_rules["rules"]["rules"]) == selected["n_rules"] == selected["n_terms"] - len(linear)
    assert_problem(client.get(f"/v1/jobs/{job['id']}/steps/999/rules"), 404, "step")

    promoted = client.post("/v1/models", json={"job_id": job["id"], "name": "abalone-rings"})
    assert promoted.status_code == 201, promoted.text
    model = client.get(promoted.headers["Location"]).json()
    assert model["version"] >= 1 and model["n_rules"] + model["n_linear"] == selected["n_terms"]
    assert model["n_rules"] == len(step_rules["rules"]["rules"]) and model["metrics"]["n_terms"] == selected["n_terms"]
    assert model["provenance"]["forest_id"] == forest_id and model["provenance"]["step"] == result["selected"]
    assert model["metrics"]["val_loss"] == selected["val_loss"]

    frame = abalone_frame().drop(columns=["rings"]).iloc[:300]
    split = {"columns": list(frame.columns), "data": frame.to_numpy().tolist()}
    scored = client.post(f"/v1/models/{model['id']}/predict?explain=true", json={"dataframe_split": split})
    assert scored.status_code == 200, scored.text
    predictions = np.asarray(scored.json()["predictions"])
    X = encode_like_pandas(frame, dataset["feature_names"])
    rules = RuleEnsemble.from_dict(model["ensemble"])
    assert np.allclose(predictions, rules.predict(X), rtol=0, atol=1e-9)
    same_step = RuleEnsemble.from_dict(step_rules["rules"])
    assert np.allclose(predictions, same_step.predict(X), rtol=0, atol=1e-9)
    explained = rules.explain(X)  # the rules that fired, then every linear term ({"linear": k}: no id)
    assert scored.json()["explanations"] == [[entry["id"] for entry in row if "id" in entry] for row in explained]
    if rules.linear:
        assert np.allclose(
            scored.json()["linear_contributions"],
            [[entry["contribution"] for entry in row if "linear" in entry] for row in explained],
            rtol=0,
            atol=1e-9,
        )

    records = frame.head(20).to_dict(orient="records")
    for body in (
        {"dataframe_records": records},
        {"instances": records},
        {"instances": frame.head(20).to_numpy().tolist()},
        {"inputs": {name: frame[name].head(20).tolist() for name in frame.columns}},
    ):
        response = client.post(f"/v1/models/{model['id']}/predict", json=body)
        assert response.status_code == 200, response.text
        assert np.allclose(response.json()["predictions"], predictions[:20], rtol=0, atol=1e-9)
        assert "explanations" not in response.json()

    second = client.post("/v1/models", json={"job_id": job["id"], "name": "abalone-rings", "step": 0}).json()
    assert second["version"] == model["version"] + 1
    assert second["n_rules"] + second["n_linear"] == result["steps"][0]["n_terms"]


def test_bad_scoring_requests_name_the_fault(stack, abalone):
    url, row = scoring_url(stack, abalone, "bad-inputs"), ABALONE_ROW
    post = lambda body: stack.client.post(url, json=body)  # noqa: E731
    assert_problem(post({"dataframe_records": [{k: v for k, v in row.items() if k != "Height"}]}), 422, "Height")
    assert_problem(post({"dataframe_records": [{**row, "Color": "red"}]}), 422, "Color")
    body = assert_problem(post({"dataframe_records": [{**row, "Sex": "X"}]}), 422, "Sex")
    assert "'X'" in body["errors"][0]["message"] and "F" in body["errors"][0]["fix"]
    body = assert_problem(post({"dataframe_records": [row, {**row, "Length": "long"}]}), 422, "Length")
    assert "row 1" in body["errors"][0]["message"]
    assert_problem(post({"dataframe_split": {"columns": list(row), "data": [list(row.values())[:-1]]}}), 422, "data")
    assert_problem(post({"dataframe_records": [row], "instances": [row]}), 422)
    assert_problem(post({}), 422)
    assert_problem(stack.client.post("/v1/models/mdl_missing/predict", json={"dataframe_records": [row]}), 404)
    assert post({"dataframe_records": [row]}).status_code == 200


def test_a_model_scored_steadily_is_rechecked_in_the_background_and_its_deletion_seen_in_time(stack, abalone):
    url = scoring_url(stack, abalone, "rechecked")
    model_id, body = url.split("/")[3], {"dataframe_records": [ABALONE_ROW]}
    with TestClient(create_app(stack.settings)) as other:  # a second API process on the same Redis
        models = other.app.state.core.models
        assert other.post(url, json=body).status_code == 200  # reads the model into that process's cache
        cached = models.recently_checked(model_id, DEFAULT_TENANT)
        first_check = cached.checked_at
        time.sleep(MODEL_RECHECK_SECONDS * 0.6)
        # past half the interval a request is still answered from the cache, and sets off one recheck
        assert models.recently_checked(model_id, DEFAULT_TENANT) is cached
        deadline = time.monotonic() + MODEL_RECHECK_SECONDS / 2
        while cached.checked_at == first_check and time.monotonic() < deadline:
            time.sleep(0.01)
        assert cached.checked_at > first_check

        assert stack.client.delete(url.removesuffix("/predict")).status_code == 204
        deleted_at, deadline = time.monotonic(), time.monotonic() + MODEL_RECHECK_SECONDS + 0.5
        while (scored := other.post(url, json=body)).status_code == 200 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert_problem(scored, 404)
        assert time.monotonic() - deleted_at <= MODEL_RECHECK_SECONDS + 0.1


def test_second_job_on_the_same_forest_and_data_hits_the_matrix_cache(stack, abalone):
    dataset, _ = abalone
    forest_id = train_forest(stack, dataset["id"], random_state=11)
    first = stack.wait_for(
        submit(stack, {"dataset_id": dataset["id"], "forest_id": forest_id, "n_lambdas": 5, "max_rules": 10})["id"],
        ("succeeded",),
    )
    second = stack.wait_for(
        submit(
            stack,
            {"dataset_id": dataset["id"], "forest_id": forest_id, "penalty": "l1", "n_lambdas": 5, "max_rules": 10},
        )["id"],
        ("succeeded",),
    )
    assert first["cache_hit"] is False and second["cache_hit"] is True
    assert stack.client.get(f"/v1/jobs/{second['id']}/result").json()["cache_hit"] is True
    metrics = stack.client.get("/metrics").text
    hits = [line for line in metrics.splitlines() if line.startswith('fire_matrix_cache_total{result="hit"}')]
    assert float(hits[0].split()[-1]) >= 1 and 'fire_jobs{status="succeeded"}' in metrics
    assert 'fire_http_requests_total{method="POST",route="/v1/jobs",status="202"}' in metrics


def test_grid_fans_out_and_picks_the_best_cell(stack, abalone):
    dataset, _ = abalone
    parent = submit(
        stack,
        {
            "dataset_id": dataset["id"],
            "forest": {**SMALL_FOREST, "random_state": 5},
            "n_lambdas": 10,
            "max_rules": 20,
            "grid": {"gamma": [1.1, 3.0], "fusion_ratio": [0.0, 1.0]},
        },
    )
    assert parent["kind"] == "grid" and len(parent["cells"]) == 4
    done = stack.wait_for(parent["id"], ("succeeded",), timeout=120)
    result = stack.client.get(f"/v1/jobs/{parent['id']}/result").json()
    assert len(result["grid"]) == 4 and all(row["status"] == "succeeded" for row in result["grid"])
    best = min(result["grid"], key=lambda row: row["summary"]["val_loss"])
    assert result["best_cell_id"] == best["job_id"] == done["summary"]["best_cell_id"]
    rules = stack.client.get(f"/v1/jobs/{parent['id']}/steps/{result['selected']}/rules")
    assert rules.status_code == 200


def test_idempotency_key_returns_the_same_job(stack, abalone):
    dataset, forest_id = abalone
    body = {"dataset_id": dataset["id"], "forest_id": forest_id, "n_lambdas": 5, "max_rules": 10}
    first = submit(stack, body, **{"Idempotency-Key": "k-" + dataset["id"]})
    again = submit(stack, body, **{"Idempotency-Key": "k-" + dataset["id"]})
    assert again["id"] == first["id"]
    assert_problem(
        stack.client.post("/v1/jobs", json={**body, "n_lambdas": 6}, headers={"Idempotency-Key": "k-" + dataset["id"]}),
        422,
        "Idempotency-Key",
    )


def test_progress_streams_as_server_sent_events(stack, abalone):
    dataset, forest_id = abalone
    job = submit(stack, {"dataset_id": dataset["id"], "forest_id": forest_id, "n_lambdas": 20, "max_rules": 15})
    events = []
    with stack.client.stream("GET", f"/v1/jobs/{job['id']}/events") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        name = None
        for line in response.iter_lines():
            if line.startswith("event:"):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                events.append((name, json.loads(line.split(":", 1)[1])))
    assert events[-1][0] == "status" and events[-1][1]["status"] == "succeeded"
    assert all(name == "progress" for name, _ in events[:-1])


def test_validation_dataset(stack, abalone):
    dataset, forest_id = abalone
    frame = abalone_frame()
    validation = stack.client.post(
        "/v1/datasets?target=rings", content=frame.iloc[3000:].to_csv(index=False), headers={"Content-Type": "text/csv"}
    ).json()
    job = submit(
        stack,
        {
            "dataset_id": dataset["id"],
            "forest_id": forest_id,
            "n_lambdas": 10,
            "max_rules": 10,
            "validation": {"dataset_id": validation["id"]},
        },
    )
    stack.wait_for(job["id"], ("succeeded",))
    result = stack.client.get(f"/v1/jobs/{job['id']}/result").json()
    assert result["n_train"] == 4177 and result["n_val"] == 4177 - 3000


def test_cancel_queued_jobs_and_grids(idle_queue, abalone):
    dataset, forest_id = abalone
    single = submit(idle_queue, {"dataset_id": dataset["id"], "forest_id": forest_id})
    grid = submit(
        idle_queue,
        {"dataset_id": dataset["id"], "forest_id": forest_id, "grid": {"gamma": [1.1, 2.0], "fusion_ratio": [0.5]}},
    )
    for job in (single, grid):
        canceled = idle_queue.client.post(f"/v1/jobs/{job['id']}/cancel")
        assert canceled.status_code == 202 and canceled.json()["status"] == "canceled"
    assert all(idle_queue.client.get(f"/v1/jobs/{cell}").json()["status"] == "canceled" for cell in grid["cells"])
    assert idle_queue.client.app.state.core.jobs.queues.queued(idle_queue.settings.queue_name) == 0


def test_readiness_needs_redis_and_a_worker(stack, idle_queue):
    ready = stack.client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["workers"] == 2
    assert_problem(idle_queue.client.get("/readyz"), 503, "workers")


def test_bad_job_requests(stack, abalone):
    dataset, forest_id = abalone
    other = stack.upload_dataset(KIN8NM, target="y", rows=200)
    assert_problem(
        stack.client.post("/v1/jobs", json={"dataset_id": other["id"], "forest_id": forest_id}), 422, "forest_id"
    )
    assert_problem(
        stack.client.post(
            "/v1/jobs",
            json={"dataset_id": dataset["id"], "forest_id": forest_id, "validation": {"dataset_id": other["id"]}},
        ),
        422,
        "validation.dataset_id",
    )
    assert_problem(stack.client.post("/v1/jobs", json={"dataset_id": "ds_nope", "forest_id": forest_id}), 404)
    assert_problem(
        stack.client.post(
            "/v1/jobs", json={"dataset_id": dataset["id"], "forest_id": forest_id, "lambda_f": 1, "fusion_ratio": 1}
        ),
        422,
        "body.lambda_f",
    )
    assert_problem(stack.client.get("/v1/jobs/job_nope/result"), 404, "path.job_id")
    assert_problem(stack.client.post("/v1/jobs/job_nope/cancel"), 404, "path.job_id")
    assert_problem(stack.client.post("/v1/models", json={"job_id": "job_nope", "name": "m"}), 404, "body.job_id")


def test_a_forest_trained_on_the_validation_rows_is_refused(stack, abalone):
    dataset, forest_id = abalone  # trained on the training side of the default split (0.2, seed 0)
    for validation in ({"fraction": 0.25, "seed": 3}, {"fraction": 0.2, "seed": 1}, {"dataset_id": dataset["id"]}):
        body = assert_problem(
            stack.client.post(
                "/v1/jobs", json={"dataset_id": dataset["id"], "forest_id": forest_id, "validation": validation}
            ),
            422,
        )
        assert body["errors"][0]["field"] in ("body.forest_id", "body.validation.dataset_id"), body
    body = assert_problem(
        stack.client.post(
            "/v1/jobs", json={"dataset_id": dataset["id"], "forest_id": forest_id, "validation": {"fraction": 0.3}}
        ),
        422,
        "body.forest_id",
    )
    assert "validation split" in body["errors"][0]["fix"]
    everything = train_forest(stack, dataset["id"], validation={"fraction": 0})
    assert stack.client.get(f"/v1/forests/{everything}").json()["source"]["rows"]["validation_fraction"] == 0
    assert_problem(
        stack.client.post("/v1/jobs", json={"dataset_id": dataset["id"], "forest_id": everything}),
        422,
        "body.forest_id",
    )
    no_holdout = submit(
        stack,
        {
            "dataset_id": dataset["id"],
            "forest_id": everything,
            "n_lambdas": 5,
            "max_rules": 5,
            "validation": {"fraction": 0},
        },
    )  # nothing to leak: the step is chosen on train loss
    stack.wait_for(no_holdout["id"], ("succeeded",))
    result = stack.client.get(f"/v1/jobs/{no_holdout['id']}/result").json()
    assert result["n_val"] == 0 and all(step["val_loss"] is None for step in result["steps"])


def slow_job(dataset_id: str, forest_id: str) -> dict:
    """A path long enough to be caught running: many λ, tight tolerance, fusion."""
    return {
        "dataset_id": dataset_id,
        "forest_id": forest_id,
        "fusion_ratio": 1.0,
        "n_lambdas": 1000,
        "lambda_min_ratio": 1e-6,
        "tol": 1e-12,
    }


@pytest.fixture(scope="module")
def large_forest(stack):
    dataset = stack.upload_dataset(ELEVATORS, target="Goal")
    return dataset, train_forest(stack, dataset["id"], n_estimators=200, max_depth=6)


def test_cancel_a_running_job_stops_it_within_a_step(stack, large_forest):
    dataset, forest_id = large_forest
    job = submit(stack, slow_job(dataset["id"], forest_id))
    stack.wait_for(job["id"], ("running",), predicate=lambda j: j["progress"].get("step", 0) >= 1)
    canceled = stack.client.post(f"/v1/jobs/{job['id']}/cancel")
    assert canceled.status_code == 202 and canceled.json()["status"] == "canceled"
    again = stack.client.post(f"/v1/jobs/{job['id']}/cancel")  # a cancel sent twice is answered as the first
    assert again.status_code == 202 and again.json()["status"] == "canceled"
    assert_problem(stack.client.get(f"/v1/jobs/{job['id']}/result"), 409)
    step_at_cancel = stack.client.get(f"/v1/jobs/{job['id']}").json()["progress"].get("step", 0)
    time.sleep(1.0)
    after = stack.client.get(f"/v1/jobs/{job['id']}").json()
    assert after["status"] == "canceled" and after["progress"].get("step", 0) <= step_at_cancel + 1
    follow_up = submit(stack, {"dataset_id": dataset["id"], "forest_id": forest_id, "n_lambdas": 3, "max_rules": 5})
    stack.wait_for(follow_up["id"], ("succeeded",))


def test_a_killed_worker_s_job_is_retried_once_then_failed_never_lost(own_queue, large_forest):
    dataset, forest_id = large_forest
    job = submit(own_queue, slow_job(dataset["id"], forest_id))
    for attempt in (1, 2):
        own_queue.wait_for(
            job["id"],
            ("running",),
            predicate=lambda j, attempt=attempt: j["attempt"] == attempt and j["progress"].get("step", 0) >= 1,
        )
        own_queue.workers[-1].kill()
        own_queue.add_worker()
    failed = own_queue.wait_for(job["id"], ("failed",), timeout=30)
    assert failed["attempt"] == 2 and failed["error"]["type"] == "worker_lost"
    assert [entry["attempt"] for entry in failed["history"]] == [1, 2]
    assert all("stopped sending heartbeats" in entry["reason"] for entry in failed["history"])
