"""The HTTP edge without a Redis server or workers (fakeredis): request schemas take their defaults and checks
from the library's specs, every route declares what it returns, and domain errors become problem+json
naming where the request carried the field at fault."""

import json

import fakeredis
import pytest
from fastapi.testclient import TestClient

from app.api.problems import http_location
from app.core.config import Settings
from app.core.container import build_core
from app.main import create_app
from solver.spec import ForestSpec, PathSpec
from tests.support.data import ABALONE
from tests.support.problems import assert_problem


@pytest.fixture(scope="module")
def client():
    settings = Settings(redis_url="redis://fakeredis", key_prefix="edge:", queue_name="edge")
    return TestClient(create_app(core=build_core(settings, redis=fakeredis.FakeRedis())))


@pytest.fixture(scope="module")
def openapi(client):
    return client.get("/openapi.json").json()


@pytest.fixture(scope="module")
def dataset_id(client):
    response = client.post(
        "/v1/datasets?target=rings", content=ABALONE.read_bytes(), headers={"Content-Type": "application/gzip"}
    )
    assert response.status_code in (200, 201), response.text
    return response.json()["id"]


def schema_defaults(openapi: dict, name: str) -> dict:
    properties = openapi["components"]["schemas"][name]["properties"]
    return {field: schema.get("default") for field, schema in properties.items()}


def test_the_openapi_defaults_are_the_specs_defaults(openapi):
    job = schema_defaults(openapi, "PathJobRequest")
    validation = schema_defaults(openapi, "ValidationSpec")
    served = {
        **{name: job[name] for name in PathSpec.defaults() if name in job},
        "validation_fraction": validation["fraction"],
        "random_state": validation["seed"],
    }
    assert served == PathSpec.defaults()
    training = schema_defaults(openapi, "TrainingParams")
    assert {name: training[name] for name in ForestSpec.defaults()} == ForestSpec.defaults()
    assert schema_defaults(openapi, "TrainForestRequest")["random_state"] == ForestSpec.defaults()["random_state"]


def test_every_route_declares_what_it_returns(openapi):
    for path, operations in openapi["paths"].items():
        for method, operation in operations.items():
            success = [code for code in operation["responses"] if code.startswith("2")]
            assert success, (method, path)
            for code in success:
                if code == "204":
                    assert not operation["responses"][code].get("content"), (method, path)
                    continue
                for media_type, content in operation["responses"][code]["content"].items():  # export: sql, python
                    if media_type == "application/json":  # a named model (or a list or union of them)
                        assert "#/components/schemas/" in json.dumps(content["schema"]), (method, path)
                    else:
                        assert content.get("schema") or content.get("itemSchema"), (method, path)


def test_every_error_is_documented_as_the_problem_it_is_answered_with(openapi):
    assert "HTTPValidationError" not in openapi["components"]["schemas"]
    for path, operations in openapi["paths"].items():
        for method, operation in operations.items():
            for code, response in operation["responses"].items():
                if code[0] in "45":
                    assert response["content"] == {
                        "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}
                    }, (method, path, code)
            if path.startswith("/v1/"):
                assert {"401", "503"} <= set(operation["responses"]), (method, path)
            if "{" in path:
                assert "404" in operation["responses"], (method, path)
            if method == "post" and path.startswith("/v1/") and not path.endswith("/cancel"):
                assert {"413", "422"} <= set(operation["responses"]), (method, path)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"n_lambdas": 0}, "body.n_lambdas"),
        ({"n_lambdas": 5000}, "body.n_lambdas"),  # a service limit
        ({"gamma": 1.0}, "body.gamma"),
        ({"lambda_f": 1.0, "fusion_ratio": 0.5}, "body.lambda_f"),
        ({"penalty": "l0"}, "body.penalty"),
        ({"lambdas": [1.0, -1.0]}, "body.lambdas"),
        ({"validation": {"fraction": 1.0}}, "body.validation.fraction"),
        ({"validation": {"seed": -1}}, "body.validation.seed"),
        ({"forest_id": None}, "body.forest_id"),
        ({"forest_id": None, "forest": {"max_features": 0}}, "body.forest.max_features"),
        ({"grid": {"gamma": [1.1, 0.5], "fusion_ratio": [0]}}, "body.grid.gamma"),
        ({"grid": {"gamma": [1.1], "fusion_ratio": [0.5]}, "lambda_f": 1.0}, "body.lambda_f"),
        ({"grid": {"gamma": [1.1] * 9, "fusion_ratio": [0.5] * 9}}, "body.grid"),
    ],
)
def test_a_bad_path_job_names_the_field(client, body, field):
    problem = assert_problem(
        client.post("/v1/jobs", json={"dataset_id": "ds_x", "forest_id": "fo_x", **body}), 422, field
    )
    assert problem["errors"][0]["field"].startswith(field), problem


def test_every_field_error_is_named_at_once(client):
    problem = assert_problem(
        client.post("/v1/jobs", json={"dataset_id": "x", "forest_id": "y", "n_lambdas": "many", "surprise": 1}), 422
    )
    assert {"body.n_lambdas", "body.surprise"} <= {error["field"] for error in problem["errors"]}
    assert_problem(client.post("/v1/jobs", content=b"{not json", headers={"Content-Type": "application/json"}), 422)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"n_estimators": 0}, "body.n_estimators"),
        ({"n_estimators": 6000}, "body.n_estimators"),
        ({"kind": "boosted"}, "body.kind"),
        ({"learning_rate": 2}, "body.learning_rate"),
        ({"validation": {"fraction": -0.1}}, "body.validation.fraction"),
    ],
)
def test_a_bad_training_request_names_the_field(client, body, field):
    assert_problem(client.post("/v1/forests/train", json={"dataset_id": "ds_x", **body}), 422, field)


def test_domain_errors_are_placed_where_the_request_carried_them(client, dataset_id):
    assert_problem(client.get("/v1/jobs/job_nope"), 404, "path.job_id")
    assert_problem(client.get("/v1/jobs/job_nope/steps/0/rules"), 404, "path.job_id")
    assert_problem(client.post("/v1/jobs", json={"dataset_id": "ds_nope", "forest_id": "fo_x"}), 404, "body.dataset_id")
    assert_problem(client.post("/v1/models", json={"job_id": "job_nope", "name": "m"}), 404, "body.job_id")
    assert_problem(client.post("/v1/forests?dataset_id=ds_nope", json={}), 404, "query.dataset_id")
    assert_problem(
        client.post("/v1/forests/train", json={"dataset_id": dataset_id, "max_features": 99}), 422, "body.max_features"
    )
    assert_problem(
        client.post("/v1/forests/train", json={"dataset_id": dataset_id, "validation": {"fraction": 0.9999}}),
        422,
        "body.validation.fraction",
    )

    body = {"dataset_id": dataset_id, "forest": {"n_estimators": 5}}
    first = client.post("/v1/jobs", json=body, headers={"Idempotency-Key": "edge-1"})
    assert first.status_code == 202, first.text
    assert client.post("/v1/jobs", json=body, headers={"Idempotency-Key": "edge-1"}).json()["id"] == first.json()["id"]
    problem = assert_problem(
        client.post("/v1/jobs", json={**body, "n_lambdas": 9}, headers={"Idempotency-Key": "edge-1"}),
        422,
        "header.Idempotency-Key",
    )
    assert problem["type"].endswith("/idempotency-key-reused")

    job_id = first.json()["id"]
    waiting = client.get(f"/v1/jobs/{job_id}/result")
    assert_problem(waiting, 409, "path.job_id")
    assert waiting.headers["Retry-After"] == "1"
    canceled = client.post(f"/v1/jobs/{job_id}/cancel")
    assert canceled.status_code == 202 and canceled.json()["status"] == "canceled"
    again = client.post(f"/v1/jobs/{job_id}/cancel")  # a cancel is idempotent: answered as the first
    assert again.status_code == 202 and again.json() == canceled.json()


def test_pickles_are_refused_as_unsupported(client):
    problem = assert_problem(
        client.post(
            "/v1/forests", content=b"\x80\x04\x95 pickled", headers={"Content-Type": "application/octet-stream"}
        ),
        415,
    )
    assert problem["type"].endswith("/unsupported")


class FakeRequest:
    def __init__(self, path_params=(), headers=(), query_params=()):
        self.path_params, self.headers, self.query_params = dict(path_params), dict(headers), dict(query_params)


@pytest.mark.parametrize(
    ("field", "request_parts", "location"),
    [
        ("job_id", {"path_params": {"job_id": "j"}}, "path.job_id"),
        ("job_id", {}, "body.job_id"),
        ("idempotency_key", {"headers": {"idempotency-key": "k"}}, "header.Idempotency-Key"),
        ("content_type", {"headers": {"content-type": "image/png"}}, "header.Content-Type"),
        ("dataset_id", {"query_params": {"dataset_id": "d"}}, "query.dataset_id"),
        ("validation.dataset_id", {"query_params": {"dataset_id": "d"}}, "body.validation.dataset_id"),
        ("columns.Sex", {}, "body.columns.Sex"),
    ],
)
def test_http_location(field, request_parts, location):
    assert http_location(field, FakeRequest(**request_parts)) == location
