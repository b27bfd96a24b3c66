"""Issue 37, item 5: a job record, a path result and a model stored before a step's counts were split (``n_rules``
then counted every selected term, linear ones included, and there was no ``n_terms``) read back with that count as
``n_terms``; rules and linear terms apart where the service knows them (a path without linear candidates, a step's
stored rules, a model's linear terms), unknown (null) elsewhere rather than a figure that may be wrong.

Jobs run in this process (the worker's job functions on fakeredis); their stored documents are written back in the
old form, then read through the API.
"""

import json

import fakeredis
import pytest
from fastapi.testclient import TestClient
from sklearn.datasets import load_diabetes

import worker.runs
import worker.tasks
from app.core.config import Settings
from app.core.container import build_core
from app.core.job_submission import PathJobRequest
from app.core.keys import Keys
from app.core.tenants import DEFAULT_TENANT as TENANT
from app.main import create_app
from solver.spec import ForestSpec, PathSpec

COUNTS = ("n_rules", "n_linear", "n_terms")


@pytest.fixture
def served(monkeypatch):
    settings = Settings(redis_url="redis://fakeredis", key_prefix="counts:", queue_name="counts")
    core = build_core(settings, redis=fakeredis.FakeRedis())
    monkeypatch.setattr(worker.runs, "core", lambda: core)
    return core, TestClient(create_app(core=core))


def run_path(core, linear_terms: bool) -> str:
    table = load_diabetes(as_frame=True).frame.to_csv(index=False).encode()
    dataset = core.datasets.create(
        table, tenant=TENANT, target="target", content_type="text/csv", filename=None, declared_format=None
    )[0]
    request = PathJobRequest(
        dataset_id=dataset.id,
        forest=ForestSpec(n_estimators=10, max_depth=3, random_state=0),
        path=PathSpec(n_lambdas=15, patience=None, linear_terms=linear_terms, random_state=0),
    )
    job = core.job_submission.submit_path(request, None, tenant=TENANT)
    worker.tasks.run_path(job.id, 1)
    return job.id


def as_before(counts: dict) -> dict:
    """A step's counts as they were stored before issue 37: every term as n_rules."""
    return {**{k: v for k, v in counts.items() if k not in ("n_terms", "n_linear")}, "n_rules": counts["n_terms"]}


def store_as_before(core, job_id: str, model_id: str | None = None) -> None:
    """The job's record, result (and the model's document) written back as they were stored before the split."""
    keys = Keys.from_settings(core.settings)
    key = keys.job(job_id)
    core.redis.hset(key, "summary", json.dumps(as_before(json.loads(core.redis.hget(key, "summary")))))
    result = json.loads(core.blobs.get(keys.job_result(job_id)))
    last = result["steps"][-1]  # the progress of a path at its last step, as it was written before
    progress = {"phase": "path", "step": len(result["steps"]), "n_steps": 15, **as_before(last)}
    progress["best"] = {"step": last["index"], **as_before({k: last[k] for k in (*COUNTS, "val_loss", "train_loss")})}
    core.redis.hset(
        key, "progress", json.dumps({k: progress[k] for k in ("phase", "step", "n_steps", "n_rules", "best")})
    )
    result["steps"] = [as_before(step) for step in result["steps"]]
    core.blobs.put(keys.job_result(job_id), json.dumps(result).encode())
    if model_id is not None:
        model = json.loads(core.blobs.get(keys.model(model_id)))
        model["metrics"] = as_before(model["metrics"])
        core.blobs.put(keys.model(model_id), json.dumps(model).encode())


def counts(record: dict) -> tuple:
    return tuple(record.get(name) for name in COUNTS)  # a progress leaves out what it has not


def test_documents_stored_before_the_split_read_their_count_as_terms(served):
    core, client = served
    job_id = run_path(core, linear_terms=True)
    fresh = client.get(f"/v1/jobs/{job_id}/result").json()
    both = next(k for k, step in enumerate(fresh["steps"]) if step["n_rules"] and step["n_linear"])
    promoted = client.post("/v1/models", json={"job_id": job_id, "step": both, "name": "diabetes"})
    assert promoted.status_code == 201, promoted.text
    model_id = promoted.json()["id"]
    job = client.get(f"/v1/jobs/{job_id}").json()
    store_as_before(core, job_id, model_id)

    old_job = client.get(f"/v1/jobs/{job_id}").json()  # linear candidates: the split is unknown
    assert counts(old_job["summary"]) == (None, None, job["summary"]["n_terms"])
    last = fresh["steps"][-1]["n_terms"]
    assert counts(old_job["progress"]) == counts(old_job["progress"]["best"]) == (None, None, last)
    old = client.get(f"/v1/jobs/{job_id}/result").json()
    assert [counts(step) for step in old["steps"]] == [(None, None, step["n_terms"]) for step in fresh["steps"]]
    rules = client.get(f"/v1/jobs/{job_id}/steps/{both}/rules").json()  # its stored rules say which are linear
    assert counts(rules) == counts(fresh["steps"][both])
    model = client.get(f"/v1/models/{model_id}").json()  # the model's own linear terms split its count
    assert counts(model["metrics"]) == counts(fresh["steps"][both]) and model["n_linear"] == rules["n_linear"]


def test_a_path_without_linear_candidates_reads_back_every_count_split(served):
    core, client = served
    job_id = run_path(core, linear_terms=False)
    fresh = client.get(f"/v1/jobs/{job_id}/result").json()
    job = client.get(f"/v1/jobs/{job_id}").json()
    assert all(step["n_linear"] == 0 and step["n_rules"] == step["n_terms"] for step in fresh["steps"])
    store_as_before(core, job_id)
    assert client.get(f"/v1/jobs/{job_id}/result").json()["steps"] == fresh["steps"]
    assert counts(client.get(f"/v1/jobs/{job_id}").json()["summary"]) == counts(job["summary"])
