"""Tenants over HTTP with a real worker: each API key sees only its tenant's datasets, forests, jobs, models,
model names and idempotency keys (another tenant's are 404), and DELETE handles what depends on a thing."""

import gzip
import time

import pytest

from tests.support.data import ABALONE, FIRST_ABALONE_ROW
from tests.support.problems import assert_problem
from tests.support.service import ServiceStack, make_settings

pytestmark = pytest.mark.integration

ALICE, BOB = {"X-API-Key": "alice-secret"}, {"X-API-Key": "bob-secret"}
SMALL_FOREST = {"n_estimators": 20, "max_depth": 3, "max_features": "sqrt"}
ROW = FIRST_ABALONE_ROW


@pytest.fixture(scope="module")
def tenants(stack):
    settings = make_settings(
        api_keys=["alice=alice-secret", "bob=bob-secret"],
        queue_name=f"{stack.settings.queue_name}-tenants",
        key_prefix=stack.settings.key_prefix,
    )
    with ServiceStack(settings, n_workers=1, clean_keys=False) as own:
        yield own


def csv_rows(rows: int) -> bytes:
    lines = gzip.decompress(ABALONE.read_bytes()).decode().splitlines()
    return ("\n".join(lines[: rows + 1]) + "\n").encode()


def upload(client, headers, rows: int = 500):
    return client.post(
        "/v1/datasets?target=rings", content=csv_rows(rows), headers={**headers, "Content-Type": "text/csv"}
    )


def run_job(tenants, headers, dataset_id: str, **extra) -> dict:
    response = tenants.client.post(
        "/v1/jobs",
        json={"dataset_id": dataset_id, "forest": SMALL_FOREST, "n_lambdas": 6, "max_rules": 6, **extra},
        headers=headers,
    )
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job = tenants.client.get(f"/v1/jobs/{job_id}", headers=headers).json()
        if job["status"] in ("succeeded", "failed", "canceled"):
            assert job["status"] == "succeeded", job
            return job
        time.sleep(0.1)
    raise TimeoutError(job_id)


def test_a_key_names_a_tenant_and_bad_keys_are_refused(tenants):
    client = tenants.client
    assert_problem(client.get("/v1/datasets"), 401, "X-API-Key")
    assert_problem(client.get("/v1/datasets", headers={"X-API-Key": "nope"}), 401, "X-API-Key")
    assert_problem(
        client.get("/v1/datasets", headers={"X-API-Key": "kéy".encode()}), 401, "X-API-Key"
    )  # non-ASCII: no 500
    assert client.get("/v1/datasets", headers=ALICE).status_code == 200
    # the same key as a bearer token (Open Inference Protocol clients behind KServe or a gateway), the same 401
    bearer = client.get("/v1/datasets", headers={"Authorization": "Bearer alice-secret"})
    assert bearer.status_code == 200 and bearer.json() == client.get("/v1/datasets", headers=ALICE).json()
    assert client.get("/v2/health/ready", headers={"Authorization": "Bearer alice-secret"}).status_code == 200
    for wrong in ("Bearer nope", "Basic YWxpY2Utc2VjcmV0", "alice-secret", "Bearer "):
        assert_problem(client.get("/v1/datasets", headers={"Authorization": wrong}), 401, "X-API-Key")


def test_another_tenant_sees_nothing_of_mine(tenants):
    client = tenants.client
    mine = upload(client, ALICE)
    assert mine.status_code in (200, 201), mine.text
    dataset = mine.json()
    assert dataset["tenant"] == "alice"
    theirs = upload(client, BOB)  # the same bytes: a dataset of bob's own, nothing said about alice's
    assert theirs.status_code == 201 and theirs.json()["id"] != dataset["id"]
    assert dataset["id"] not in [d["id"] for d in client.get("/v1/datasets", headers=BOB).json()]
    assert_problem(client.get(f"/v1/datasets/{dataset['id']}", headers=BOB), 404, "path.dataset_id")

    job = run_job(tenants, ALICE, dataset["id"])
    forest_id = job["spec"]["forest_id"]
    for url in (
        f"/v1/jobs/{job['id']}",
        f"/v1/jobs/{job['id']}/result",
        f"/v1/jobs/{job['id']}/steps/0/rules",
        f"/v1/jobs/{job['id']}/events",
        f"/v1/forests/{forest_id}",
        f"/v1/forests/{forest_id}/trees?tree=0",
    ):
        assert_problem(client.get(url, headers=BOB), 404)
    assert job["id"] not in [j["id"] for j in client.get("/v1/jobs", headers=BOB).json()]
    assert forest_id not in [f["id"] for f in client.get("/v1/forests", headers=BOB).json()]
    assert_problem(client.post(f"/v1/jobs/{job['id']}/cancel", headers=BOB), 404)
    assert_problem(
        client.post("/v1/jobs", json={"dataset_id": dataset["id"], "forest": SMALL_FOREST}, headers=BOB),
        404,
        "body.dataset_id",
    )
    assert_problem(
        client.post("/v1/jobs", json={"dataset_id": theirs.json()["id"], "forest_id": forest_id}, headers=BOB),
        404,
        "body.forest_id",
    )
    assert_problem(
        client.post("/v1/models", json={"job_id": job["id"], "name": "rings"}, headers=BOB), 404, "body.job_id"
    )

    model = client.post("/v1/models", json={"job_id": job["id"], "name": "rings"}, headers=ALICE).json()
    assert model["version"] == 1 and model["tenant"] == "alice"
    assert_problem(
        client.post(f"/v1/models/{model['id']}/predict", json={"dataframe_records": [ROW]}, headers=BOB), 404
    )
    assert_problem(client.get(f"/v1/models/{model['id']}", headers=BOB), 404)
    assert model["id"] not in [m["id"] for m in client.get("/v1/models", headers=BOB).json()]
    bob_job = run_job(tenants, BOB, theirs.json()["id"])
    bob_model = client.post("/v1/models", json={"job_id": bob_job["id"], "name": "rings"}, headers=BOB).json()
    assert bob_model["version"] == 1  # model names are per tenant

    for method, url in (
        ("DELETE", f"/v1/datasets/{dataset['id']}"),
        ("DELETE", f"/v1/forests/{forest_id}"),
        ("DELETE", f"/v1/jobs/{job['id']}"),
        ("DELETE", f"/v1/models/{model['id']}"),
    ):
        assert_problem(client.request(method, url, headers=BOB), 404)
    assert client.get(f"/v1/models/{model['id']}", headers=ALICE).status_code == 200


def test_idempotency_keys_belong_to_a_tenant(tenants):
    client = tenants.client
    alice_data, bob_data = upload(client, ALICE, 300).json(), upload(client, BOB, 300).json()
    key = {"Idempotency-Key": "nightly-1"}
    first = client.post(
        "/v1/jobs",
        json={"dataset_id": alice_data["id"], "forest": SMALL_FOREST, "n_lambdas": 4},
        headers={**ALICE, **key},
    )
    other = client.post(
        "/v1/jobs", json={"dataset_id": bob_data["id"], "forest": SMALL_FOREST, "n_lambdas": 4}, headers={**BOB, **key}
    )
    assert first.status_code == other.status_code == 202
    assert other.json()["id"] != first.json()["id"] and other.json()["tenant"] == "bob"
    again = client.post(
        "/v1/jobs",
        json={"dataset_id": alice_data["id"], "forest": SMALL_FOREST, "n_lambdas": 4},
        headers={**ALICE, **key},
    )
    assert again.json()["id"] == first.json()["id"]


def test_a_retried_promotion_gives_the_same_model(tenants):
    client = tenants.client
    job = run_job(tenants, ALICE, upload(client, ALICE, 400).json()["id"])
    key = {**ALICE, "Idempotency-Key": "promote-nightly"}
    models = [client.post("/v1/models", json={"job_id": job["id"], "name": "retried"}, headers=key) for _ in range(3)]
    assert [m.status_code for m in models] == [201] * 3
    assert len({m.json()["id"] for m in models}) == 1 and models[0].json()["version"] == 1
    assert [m["name"] for m in client.get("/v1/models", headers=ALICE).json()].count("retried") == 1
    assert_problem(
        client.post("/v1/models", json={"job_id": job["id"], "name": "other"}, headers=key),
        422,
        "header.Idempotency-Key",
    )


def test_delete_handles_what_depends_on_the_thing(tenants):
    client = tenants.client
    dataset = upload(client, ALICE, 700).json()
    job = run_job(tenants, ALICE, dataset["id"])
    model = client.post("/v1/models", json={"job_id": job["id"], "name": "kept"}, headers=ALICE).json()
    predictions = client.post(
        f"/v1/models/{model['id']}/predict", json={"dataframe_records": [ROW]}, headers=ALICE
    ).json()

    slow = client.post(
        "/v1/jobs",
        json={
            "dataset_id": dataset["id"],
            "forest": {"n_estimators": 400, "max_depth": 8},
            "n_lambdas": 500,
            "fusion_ratio": 1.0,
            "tol": 1e-12,
        },
        headers=ALICE,
    ).json()
    body = assert_problem(client.delete(f"/v1/datasets/{dataset['id']}", headers=ALICE), 409, "path.dataset_id")
    assert slow["id"] in body["errors"][0]["message"]
    assert client.delete(f"/v1/jobs/{slow['id']}", headers=ALICE).status_code == 204  # canceled, then removed
    assert_problem(client.get(f"/v1/jobs/{slow['id']}", headers=ALICE), 404)

    assert client.delete(f"/v1/datasets/{dataset['id']}", headers=ALICE).status_code == 204
    assert_problem(client.get(f"/v1/datasets/{dataset['id']}", headers=ALICE), 404)
    again = client.post(f"/v1/models/{model['id']}/predict", json={"dataframe_records": [ROW]}, headers=ALICE)
    assert again.json() == predictions  # a model is self-contained
    assert_problem(
        client.post("/v1/models", json={"job_id": job["id"], "name": "late"}, headers=ALICE), 410, "body.job_id"
    )

    forest_id = job["spec"]["forest_id"]
    assert client.delete(f"/v1/forests/{forest_id}", headers=ALICE).status_code == 204
    rules = client.get(f"/v1/jobs/{job['id']}/steps/0/rules", headers=ALICE)
    assert rules.status_code == 200  # stored with the result: the rules outlive the forest
    assert client.get(f"/v1/jobs/{job['id']}/result", headers=ALICE).status_code == 200  # results are kept

    assert client.delete(f"/v1/models/{model['id']}", headers=ALICE).status_code == 204
    assert_problem(
        client.post(f"/v1/models/{model['id']}/predict", json={"dataframe_records": [ROW]}, headers=ALICE), 404
    )
    assert client.delete(f"/v1/jobs/{job['id']}", headers=ALICE).status_code == 204
    assert_problem(client.get(f"/v1/jobs/{job['id']}/result", headers=ALICE), 404)
