"""The OpenAPI document tells the truth: schemathesis sends generated requests to every operation (bounded: a
few hundred in all) against the API on a real Redis, and checks that no answer is a 5xx and that every status,
media type, header and body is the one documented; the documented examples are accepted."""

import json

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from app.main import create_app
from tests.support.service import make_settings, remove_session_keys

pytestmark = pytest.mark.integration

EXAMPLES_PER_OPERATION = 12
KEY = {"X-API-Key": "schemathesis-key"}
_settings = make_settings(api_keys=["schemathesis=schemathesis-key"])
_app = create_app(_settings)
# /readyz answers 503 by design here (no worker runs): its one documented purpose, checked in the fault tests
schema = schemathesis.openapi.from_asgi("/openapi.json", _app).exclude(path="/readyz")


@pytest.fixture(scope="module", autouse=True)
def clean_keys():
    yield
    from redis import Redis

    remove_session_keys(Redis.from_url(_settings.redis_url), _settings)


@schema.parametrize()
@settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_every_answer_is_documented_and_none_is_a_server_error(case):
    case.call_and_validate(
        headers=KEY,
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_headers_conformance,
            response_schema_conformance,
            negative_data_rejection,
        ],
    )


def test_the_documented_upload_examples_are_accepted():
    from fastapi.testclient import TestClient

    document = _app.openapi()
    with TestClient(_app, headers=KEY) as client:
        forest = document["paths"]["/v1/forests"]["post"]["requestBody"]["content"]["application/json"]["example"]
        assert client.post("/v1/forests", json=forest).status_code in (200, 201)
        table = document["paths"]["/v1/datasets"]["post"]["requestBody"]["content"]
        assert client.post(
            "/v1/datasets?target=rings", content=table["text/csv"]["example"], headers={"Content-Type": "text/csv"}
        ).status_code in (200, 201)
        assert client.post(
            "/v1/datasets?target=y",
            content=json.dumps(table["application/json"]["example"]),
            headers={"Content-Type": "application/json"},
        ).status_code in (200, 201)
        for name in ("PathJobRequest", "TrainForestRequest", "PromoteRequest", "PredictRequest"):
            model = {"PathJobRequest": "submit_job", "TrainForestRequest": "train_forest"}.get(name)
            for example in document["components"]["schemas"][name].get("examples", []):
                # the ids in examples are placeholders: a 404 says the body itself was accepted
                path = {
                    "PathJobRequest": "/v1/jobs",
                    "TrainForestRequest": "/v1/forests/train",
                    "PromoteRequest": "/v1/models",
                    "PredictRequest": "/v1/models/mdl_x/predict",
                }[name]
                assert client.post(path, json=example).status_code == 404, (name, model, example)
