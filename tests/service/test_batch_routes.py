"""Batch routes the dashboard relies on: which model a submission names (a model id, a bare registered name: its
latest version, as /predict by name scores; name@alias, name@3; neither an id nor a name is a 404 whose fix names
each form), and cancel while a worker takes a chunk."""

import pytest
from rq.job import Job, JobStatus

from app.core.records import JobRecords
from tests.support.jobs import submit
from tests.support.problems import assert_problem

pytestmark = pytest.mark.integration

ROWS = (
    b"Sex,Length,Diameter,Height,Whole_weight,Shucked_weight,Viscera_weight,Shell_weight\n"
    b"M,0.4,0.3,0.1,0.5,0.2,0.1,0.15\n"
)


def post_batch(client, ref: str):
    return client.post(f"/v1/models/{ref}/batch", files={"file": ("rows.csv", ROWS, "text/csv")})


@pytest.mark.parametrize("ref", ["no-such-model", "mdl_0123456789abcdef01234567"])
def test_neither_a_model_id_nor_a_name_is_a_404_naming_every_form(api, ref):
    response = post_batch(api.client, ref)
    problem = assert_problem(response, 404)
    assert problem["detail"] == f"No model with id or name '{ref}'."
    (fault,) = problem["errors"]
    assert fault["field"] == "path.ref"
    assert f"'{ref}' scores its latest version" in fault["fix"]
    assert f"'{ref}@champion' the version an alias points at" in fault["fix"] and f"'{ref}@3'" in fault["fix"]


@pytest.fixture(scope="module")
def finished_job(stack, abalone) -> str:
    """A short path job on the abalone forest, succeeded."""
    dataset, forest_id = abalone
    job = submit(stack, {"dataset_id": dataset["id"], "forest_id": forest_id, "n_lambdas": 8, "max_rules": 6})
    stack.wait_for(job["id"], ("succeeded",), timeout=180)
    return job["id"]


def test_a_bare_name_scores_its_latest_version_as_predict_by_name_does(stack, finished_job):
    job = {"id": finished_job}
    client = stack.client
    versions = [client.post("/v1/models", json={"job_id": job["id"], "name": "batch-by-name"}).json() for _ in range(2)]
    assert [model["version"] for model in versions] == [1, 2]

    by_name = post_batch(client, "batch-by-name")
    assert by_name.status_code == 202, by_name.text
    spec = by_name.json()["spec"]
    predicted = client.post(
        "/v1/registered-models/batch-by-name/predict", content=ROWS, headers={"Content-Type": "text/csv"}
    )
    assert predicted.headers["X-Model-Version"] == "2"
    assert (spec["model_id"], spec["model_name"], spec["model_version"]) == (versions[1]["id"], "batch-by-name", 2)
    by_id = post_batch(client, versions[0]["id"])  # an id is an id, whatever the names
    assert by_id.status_code == 202 and by_id.json()["spec"]["model_version"] == 1
    by_version = post_batch(client, "batch-by-name@1")
    assert by_version.status_code == 202 and by_version.json()["spec"]["model_id"] == versions[0]["id"]
    for view in (by_name, by_id, by_version):
        assert stack.wait_for(view.json()["id"], ("succeeded",))["summary"]["n_rows"] == 1


def test_cancel_answers_when_a_worker_took_a_chunk_and_ended_its_execution_meanwhile(
    stack, idle_queue, finished_job, monkeypatch
):
    """The race met canceling a batch of many short chunks (a 500): the cancel reads a chunk's RQ job as queued, a
    worker takes it (RQ's stored status: started) and ends it, deleting its execution while the job still lists it;
    RQ's cancel, reading the stored status, lists the executions and raised ValueError. That interleaving, made here
    on a queue no worker serves: the cancel is answered and every chunk canceled."""
    model = stack.client.post("/v1/models", json={"job_id": finished_job, "name": "batch-cancel"}).json()
    submitted = idle_queue.client.post(
        f"/v1/models/{model['id']}/batch?chunk_rows=1",
        files={"file": ("rows.csv", ROWS + ROWS.split(b"\n", 1)[1], "text/csv")},
    )
    assert submitted.status_code == 202, submitted.text
    view = submitted.json()
    record = JobRecords(idle_queue.settings, idle_queue.redis).get(view["cells"][0])
    assert record is not None and record.status == "queued"
    # read as queued by the cancel; then taken by a worker, whose execution ended and was deleted, still listed
    monkeypatch.setattr(Job, "get_status", lambda job, refresh=True: JobStatus.QUEUED)
    idle_queue.redis.hset(f"rq:job:{record.rq_job_id}", "status", "started")
    idle_queue.redis.zadd(f"rq:executions:{record.rq_job_id}", {"gone-execution": 4_000_000_000})
    canceled = idle_queue.client.post(f"/v1/models/batch/{view['id']}/cancel")
    assert canceled.status_code == 202, canceled.text
    assert canceled.json()["status"] == "canceled"
    statuses = [idle_queue.client.get(f"/v1/jobs/{cell}").json()["status"] for cell in view["cells"]]
    assert statuses == ["canceled", "canceled"]
