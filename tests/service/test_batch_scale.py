"""Batches that scale in chunks (issue 38, items 5 and 7): a file of 10,000 chunks is answered in seconds and
canceled twice without a 500 (its chunks recorded and queued a thousand at a time, its parent queued by the last
chunk to end, never by RQ), a chunk below FIRE_BATCH_MIN_CHUNK_ROWS is a 422 naming the field and the floor, and the
model's drift counts only the rows a batch delivered: all of one that succeeded, bin for bin (pandas' bins of the
file's own values), none of one that failed or was canceled, and its counts added once however often they are
added. (A chunk whose worker was killed, run again, counts once: tests/service/test_batch_scoring.py.)
"""

import gzip
import io
import time
from collections import Counter

import fakeredis
import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

import worker.runs
import worker.tasks
from app.core.config import Settings
from app.core.container import build_core
from app.main import create_app
from tests.support.data import ABALONE
from tests.support.drift import drift, expected_bins
from tests.support.jobs import submit
from tests.support.problems import assert_problem

FOREST = {"n_estimators": 20, "max_depth": 3, "random_state": 0}
TERMINAL = ("succeeded", "failed", "canceled")
CHUNKS = 10_000
SUBMIT_SECONDS = 10.0  # the target for a 10,000-chunk batch


def abalone_features(rows: int) -> pd.DataFrame:
    frame = pd.read_csv(io.BytesIO(gzip.decompress(ABALONE.read_bytes()))).drop(columns=["rings"])
    return pd.concat([frame] * (rows // len(frame) + 1), ignore_index=True).iloc[:rows]


def post_csv(client, model_id: str, frame: pd.DataFrame, chunk_rows: int):
    return client.post(
        f"/v1/models/{model_id}/batch?chunk_rows={chunk_rows}",
        files={"file": ("rows.csv", frame.to_csv(index=False).encode(), "text/csv")},
    )


def wait_batch(client, job_id: str, until=lambda view: view["status"] in TERMINAL, timeout: float = 180.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        view = client.get(f"/v1/models/batch/{job_id}").json()
        if until(view):
            return view
        assert time.monotonic() < deadline, view
        time.sleep(0.1)


@pytest.fixture(scope="module")
def model(stack, abalone):
    dataset, forest_id = abalone
    job = submit(stack, {"dataset_id": dataset["id"], "forest_id": forest_id, "n_lambdas": 10, "max_rules": 8})
    stack.wait_for(job["id"], ("succeeded",), timeout=180)
    response = stack.client.post("/v1/models", json={"job_id": job["id"], "name": "batch-scale"})
    assert response.status_code == 201, response.text
    return response.json()


@pytest.fixture
def alone(isolated_settings, monkeypatch):
    """The API alone on keys of its own (no other API's watchdog reads its jobs; its own at the production interval),
    and a model fitted by the worker's job function in this process and promoted: (client, model)."""
    settings = isolated_settings.model_copy(update={"watchdog_seconds": Settings().watchdog_seconds})
    with TestClient(create_app(settings)) as client:
        core = client.app.state.core
        monkeypatch.setattr(worker.runs, "core", lambda: core)
        dataset = client.post(
            "/v1/datasets?target=rings", content=ABALONE.read_bytes(), headers={"Content-Type": "application/gzip"}
        ).json()
        job = client.post("/v1/jobs", json={"dataset_id": dataset["id"], "forest": FOREST, "n_lambdas": 10}).json()
        worker.tasks.run_path(job["id"], 1)
        model = client.post("/v1/models", json={"job_id": job["id"], "name": "batch-scale"})
        assert model.status_code == 201, model.text
        yield client, model.json()


@pytest.mark.integration
def test_a_batch_of_ten_thousand_chunks_is_answered_in_seconds_and_canceled_twice(alone):
    client, model = alone
    core = client.app.state.core
    started = time.perf_counter()
    response = post_csv(client, model["id"], abalone_features(CHUNKS), chunk_rows=1)
    seconds = time.perf_counter() - started
    assert response.status_code == 202, response.text
    view = response.json()
    assert view["batch"]["n_chunks"] == len(view["cells"]) == CHUNKS and view["batch"]["chunks_done"] == 0
    assert seconds <= SUBMIT_SECONDS, f"the 202 of {CHUNKS} chunks took {seconds:.1f} s"
    queued = Counter(core.jobs.queues.job_ids(core.settings.queue_name))
    parent = core.records.get(view["id"])
    assert parent.rq_job_id not in queued  # it waits for its chunks: queued by the last to end, not now
    assert all(queued[f"{cell}-1"] == 1 for cell in view["cells"])  # each chunk queued once
    assert parent.progress.phase == "chunks" and parent.progress.unfinished == CHUNKS

    for _ in range(2):  # a cancel sent again is answered as the first
        canceled = client.post(f"/v1/models/batch/{view['id']}/cancel")
        assert canceled.status_code == 202, canceled.text
        assert canceled.json()["status"] == "canceled" and canceled.json()["batch"]["chunks_done"] == 0
    assert set(core.records.statuses(view["cells"])) == {"canceled"}
    left = set(core.jobs.queues.job_ids(core.settings.queue_name))
    assert not left & {f"{cell}-1" for cell in [view["id"], *view["cells"]]}  # no run of it left for a worker
    assert client.delete(f"/v1/models/batch/{view['id']}").status_code == 204
    assert core.records.get_many(view["cells"][:: CHUNKS // 10]) == [None] * 10


def test_a_chunk_below_the_floor_is_a_422_naming_chunk_rows_and_the_floor():
    settings = Settings(redis_url="redis://fakeredis", key_prefix="scale:", queue_name="scale")
    client = TestClient(create_app(core=build_core(settings, redis=fakeredis.FakeRedis())))
    floor = settings.batch_min_chunk_rows
    body = {"content": b"a,b\n1,2\n", "headers": {"Content-Type": "text/csv"}}
    problem = assert_problem(client.post(f"/v1/models/mdl_x/batch?chunk_rows={floor - 1}", **body), 422, "chunk_rows")
    fault = next(error for error in problem["errors"] if "chunk_rows" in error["field"])
    assert str(floor) in fault["message"] and str(floor) in fault["fix"]
    # at the floor the file is taken as far as its rows go (here: no such model)
    assert_problem(client.post(f"/v1/models/mdl_x/batch?chunk_rows={floor}", **body), 404, "ref")


def test_the_counts_of_a_succeeded_batch_are_added_once_however_often_they_are_added():
    settings = Settings(redis_url="redis://fakeredis", key_prefix="scale:", queue_name="scale")
    core = build_core(settings, redis=fakeredis.FakeRedis())
    chunks = [{"rows": 3, "bin:a:0": 2, "bin:a:1": 1}, {"rows": 2, "bin:a:1": 2}]
    assert core.monitor.add_delivered("mdl_x", chunks, once="scale:counted")
    assert not core.monitor.add_delivered("mdl_x", chunks, once="scale:counted")  # its job run again
    windows = list(core.redis.scan_iter(match="scale:drift:mdl_x:batch:*"))
    assert len(windows) == 2  # the fine window and the hour
    for key in windows:
        assert core.redis.hgetall(key) == {b"rows": b"5", b"bin:a:0": b"2", b"bin:a:1": b"3"}


@pytest.mark.integration
def test_drift_counts_the_rows_a_batch_delivered_and_none_of_one_that_failed_or_was_canceled(stack, model):
    client = stack.client
    rows = abalone_features(3000)
    before = drift(stack, model["id"], source="batch")

    bad = rows.astype({"Length": object})
    bad.loc[len(bad) - 1, "Length"] = "long"  # its last chunk fails: the two before it are scored, never counted
    failed = post_csv(client, model["id"], bad, chunk_rows=1000)
    assert failed.status_code == 202, failed.text
    assert wait_batch(client, failed.json()["id"])["status"] == "failed"
    many = post_csv(client, model["id"], abalone_features(20_000), chunk_rows=200)  # 100 chunks, canceled midway
    assert many.status_code == 202, many.text
    wait_batch(client, many.json()["id"], until=lambda view: view["batch"]["chunks_done"] >= 4)
    assert client.post(f"/v1/models/batch/{many.json()['id']}/cancel").status_code == 202
    records, cells = client.app.state.core.records, many.json()["cells"]
    deadline = time.monotonic() + 60
    while not set(records.statuses(cells)) <= set(TERMINAL):
        assert time.monotonic() < deadline
        time.sleep(0.1)  # the chunks the workers held when it was canceled end (scored, or stopped)
    assert drift(stack, model["id"], source="batch")["rows"] == before["rows"]

    succeeded = post_csv(client, model["id"], rows, chunk_rows=1000)
    assert wait_batch(client, succeeded.json()["id"])["status"] == "succeeded"
    after = drift(stack, model["id"], source="batch")
    assert after["rows"] - before["rows"] == len(rows)
    for column, earlier in zip(after["columns"], before["columns"]):
        counted = np.array(column["live_rows"]) - np.array(earlier["live_rows"])
        assert counted.tolist() == expected_bins(column, rows[column["column"]]).tolist(), column["column"]
