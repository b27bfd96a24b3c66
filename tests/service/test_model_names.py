"""Model names, versions and aliases, and scoring by them: our answer, MLflow's scoring server's, CSV bodies."""

import csv
import io
import uuid

import pytest

from app.core.container import build_core
from app.core.keys import Keys
from app.core.registry import ModelRef
from app.core.tenants import DEFAULT_TENANT
from tests.support.jobs import ABALONE_ROW, submit
from tests.support.problems import assert_problem

pytestmark = pytest.mark.integration

ROWS = [ABALONE_ROW, {**ABALONE_ROW, "Sex": "F", "Shell_weight": 0.4}, {**ABALONE_ROW, "Sex": "I", "Length": None}]


@pytest.fixture(scope="module")
def versions(stack, abalone):
    """A fresh name with two versions promoted from two paths of different budgets: (name, [model v1, model v2])."""
    dataset, forest_id = abalone
    name = f"rings-{uuid.uuid4().hex[:8]}"
    models = []
    for max_rules in (3, 10):
        job = submit(
            stack, {"dataset_id": dataset["id"], "forest_id": forest_id, "n_lambdas": 10, "max_rules": max_rules}
        )
        stack.wait_for(job["id"], ("succeeded",))
        response = stack.client.post("/v1/models", json={"job_id": job["id"], "name": name})
        assert response.status_code == 201, response.text
        models.append(response.json())
    assert [model["version"] for model in models] == [1, 2]
    return name, models


def predictions(stack, model_id: str) -> list[float]:
    response = stack.client.post(f"/v1/models/{model_id}/predict", json={"dataframe_records": ROWS})
    assert response.status_code == 200, response.text
    return response.json()["predictions"]


def test_a_name_resolves_to_its_latest_version_a_number_or_an_alias(stack, versions):
    name, (first, second) = versions
    base = f"/v1/registered-models/{name}"
    assert predictions(stack, first["id"]) != predictions(stack, second["id"])
    for path, model in [("", second), ("/versions/1", first), ("/versions/2", second)]:
        response = stack.client.post(f"{base}{path}/predict", json={"dataframe_records": ROWS})
        assert response.status_code == 200, response.text
        assert response.json()["predictions"] == predictions(stack, model["id"])
        assert response.json()["model"] == {"id": model["id"], "name": name, "version": model["version"]}
        assert response.headers["X-Model-Version"] == str(model["version"])

    assert stack.client.put(f"{base}/aliases/champion", json={"version": 1}).status_code == 200
    scored = stack.client.post(f"{base}/aliases/champion/predict", json={"dataframe_records": ROWS})
    assert scored.json()["predictions"] == predictions(stack, first["id"]) and scored.json()["model"]["version"] == 1
    assert stack.client.get(f"{base}/aliases/champion").json()["id"] == first["id"]
    assert stack.client.get(f"/v1/models/{first['id']}").json()["aliases"] == ["champion"]

    # moved: this process answers with the new version at once
    registered = stack.client.put(f"{base}/aliases/champion", json={"version": 2}).json()
    assert registered["aliases"] == {"champion": 2} and registered["latest_version"] == 2
    scored = stack.client.post(f"{base}/aliases/champion/invocations", json={"dataframe_records": ROWS})
    assert scored.json() == {"predictions": predictions(stack, second["id"])}
    assert scored.headers["X-Model-Version"] == "2" and scored.headers["X-Model-Id"] == second["id"]
    assert stack.client.get(f"{base}/aliases/champion/ping").status_code == 200


def test_setting_an_alias_again_changes_nothing_and_history_records_each_change(stack, versions):
    name, _ = versions
    base = f"/v1/registered-models/{name}"
    for _ in range(2):
        assert stack.client.put(f"{base}/aliases/staging", json={"version": 1}).status_code == 200
    stack.client.delete(f"{base}/aliases/staging")
    assert stack.client.delete(f"{base}/aliases/staging").status_code == 204  # removing twice is one removal
    history = stack.client.get(base).json()["history"]
    staging = [(event["event"], event.get("version")) for event in history if event.get("alias") == "staging"]
    assert staging == [("alias_set", 1), ("alias_removed", 1)]
    assert [event["version"] for event in history if event["event"] == "version_added"] == [1, 2]
    assert name in [registered["name"] for registered in stack.client.get("/v1/registered-models").json()]
    assert_problem(stack.client.post(f"{base}/aliases/staging/predict", json={"dataframe_records": ROWS}), 404, "alias")


def test_bad_references_and_aliases_are_clear_problems(stack, versions):
    name, _ = versions
    base = f"/v1/registered-models/{name}"
    assert_problem(stack.client.post(f"{base}/versions/9/predict", json={"dataframe_records": ROWS}), 404, "version")
    assert_problem(stack.client.post("/v1/registered-models/no-such-name/predict", json={"inputs": []}), 404, "name")
    assert_problem(stack.client.put(f"{base}/aliases/champion", json={"version": 9}), 404, "version")
    for alias in ("latest", "v2", "7", "-x"):
        assert_problem(stack.client.put(f"{base}/aliases/{alias}", json={"version": 1}), 422, "alias")
    assert_problem(stack.client.put(f"{base}/aliases/ok", json={"version": "1"}), 422, "version")
    assert_problem(stack.client.get("/v1/registered-models/no-such-name"), 404, "name")


def test_deleting_a_version_an_alias_points_at_is_a_conflict_naming_the_alias(stack, versions):
    name, (_, second) = versions
    base = f"/v1/registered-models/{name}"
    stack.client.put(f"{base}/aliases/prod", json={"version": 2})
    problem = assert_problem(stack.client.delete(f"/v1/models/{second['id']}"), 409, "prod")
    assert "prod" in problem["detail"]
    assert stack.client.get(f"/v1/models/{second['id']}").status_code == 200  # nothing was deleted
    assert stack.client.post(f"{base}/aliases/prod/predict", json={"dataframe_records": ROWS}).status_code == 200
    stack.client.delete(f"{base}/aliases/prod")
    stack.client.delete(f"{base}/aliases/champion")
    assert stack.client.delete(f"/v1/models/{second['id']}").status_code == 204
    # the latest is now version 1; version 2 is gone and its number is never reused
    assert stack.client.post(f"{base}/predict", json={"inputs": ROWS}).json()["model"]["version"] == 1
    assert_problem(stack.client.post(f"{base}/versions/2/predict", json={"inputs": ROWS}), 404, "version")
    registered = stack.client.get(base).json()
    assert registered["latest_version"] == 1 and [v["version"] for v in registered["versions"]] == [1]
    assert registered["history"][-1]["event"] == "version_deleted"


def test_csv_bodies_score_as_json_ones_and_other_content_types_are_415(stack, versions):
    name, (first, _) = versions
    base = f"/v1/registered-models/{name}/versions/1"
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(ABALONE_ROW))
    writer.writeheader()
    writer.writerows([{k: "" if v is None else v for k, v in row.items()} for row in ROWS])
    for route in ("predict", "invocations"):
        response = stack.client.post(f"{base}/{route}", content=text.getvalue(), headers={"Content-Type": "text/csv"})
        assert response.status_code == 200, response.text
        assert response.json()["predictions"] == predictions(stack, first["id"])
    csv_body = text.getvalue().encode()
    bad_csv = stack.client.post(f"{base}/predict", content=b"Sex,Length\nM,abc\n", headers={"Content-Type": "text/csv"})
    assert_problem(bad_csv, 422)
    for body, field in ((b"", "body"), (b"Sex,Length\nM\n", "csv[0]"), (b"\xff\xfe", "body")):
        response = stack.client.post(f"{base}/predict", content=body, headers={"Content-Type": "text/csv"})
        assert_problem(response, 422, field)
    for content_type in ("application/x-www-form-urlencoded", "text/plain", "application/json; charset=latin-1"):
        response = stack.client.post(f"{base}/invocations", content=csv_body, headers={"Content-Type": content_type})
        assert_problem(response, 415, "Content-Type")
    response = stack.client.post(
        f"/v1/models/{first['id']}/predict", content=b"{", headers={"Content-Type": "text/xml"}
    )
    assert_problem(response, 415, "Content-Type")


def test_params_of_the_mlflow_body(stack, versions):
    name, _ = versions
    base = f"/v1/registered-models/{name}"
    explained = stack.client.post(f"{base}/predict", json={"inputs": ROWS, "params": {"explain": True}}).json()
    assert len(explained["explanations"]) == len(ROWS)
    assert_problem(stack.client.post(f"{base}/invocations", json={"inputs": ROWS, "params": {"nope": 1}}), 422, "nope")
    regression_proba = {"inputs": ROWS, "params": {"predict_method": "predict_proba"}}
    assert_problem(stack.client.post(f"{base}/invocations", json=regression_proba), 422, "predict_method")


def test_models_promoted_before_names_were_registered_are_registered_once(stack, abalone):
    """A model stored before this registry (no versions, aliases, history nor marker) resolves by name in an API
    process started afterwards, its version and promotion time kept."""
    dataset, forest_id = abalone
    name = f"older-{uuid.uuid4().hex[:8]}"
    job = submit(stack, {"dataset_id": dataset["id"], "forest_id": forest_id, "n_lambdas": 10, "max_rules": 3})
    stack.wait_for(job["id"], ("succeeded",))
    model = stack.client.post("/v1/models", json={"job_id": job["id"], "name": name}).json()
    keys = Keys.from_settings(stack.settings)
    for key in ("name_versions", "name_aliases", "name_history"):
        stack.redis.delete(getattr(keys, key)(DEFAULT_TENANT, name))
    stack.redis.delete(keys.names_registered(DEFAULT_TENANT))

    later = build_core(stack.settings)  # another API process, started after the upgrade
    assert later.models.resolve(ModelRef(name), tenant=DEFAULT_TENANT).id == model["id"]
    registered = later.models.registered(name, tenant=DEFAULT_TENANT)
    assert [(v.version, v.model_id) for v in registered.versions] == [(1, model["id"])]
    assert registered.history[0].at == model["created_at"]
    assert not later.models.registry.claim_earlier_models(DEFAULT_TENANT)  # done once
