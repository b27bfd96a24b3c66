"""Limits and the event loop: heavy uploads never hold other requests up, oversized or hostile bodies are refused
early with a 4xx naming the fix, and the silent coercions of before are refused."""

import gzip
import subprocess
import sys
import threading
import time

import httpx
import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from tests.support.data import REPO_ROOT, abalone_frame
from tests.support.jobs import ABALONE_ROW, scoring_url, submit
from tests.support.problems import assert_problem
from tests.support.service import END_WITH_THIS_RUN, free_port, settings_env

pytestmark = pytest.mark.integration


def csv_bytes(frame: pd.DataFrame) -> bytes:
    return frame.to_csv(index=False).encode()


def wide_csv(n_rows: int, n_columns: int) -> bytes:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(n_rows, n_columns)).round(4), columns=[f"c{i}" for i in range(n_columns)])
    frame["target"] = rng.normal(size=n_rows)
    return csv_bytes(frame)


@pytest.fixture
def live_api(isolated_settings):
    """The API alone in a `fire-rules serve` process (uvicorn, one event loop) on the session's Redis."""
    port = free_port()
    settings = isolated_settings.model_copy(update={"max_upload_bytes": 64 << 20})
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--log-level", "warning"],
        env=settings_env(settings),
        cwd=REPO_ROOT,
        preexec_fn=END_WITH_THIS_RUN,  # a killed test run leaves no service behind
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.1)
    yield base
    process.terminate()
    process.wait(timeout=15)


def test_a_heavy_upload_does_not_hold_other_requests_up(live_api):
    body = wide_csv(4000, 1500)  # about 45 MB: seconds of parsing and encoding
    outcome = {}

    def upload():
        outcome["response"] = httpx.post(
            f"{live_api}/v1/datasets?target=target", content=body, headers={"Content-Type": "text/csv"}, timeout=120
        )

    uploading = threading.Thread(target=upload)
    uploading.start()
    latencies = []
    while uploading.is_alive():
        started = time.perf_counter()
        assert httpx.get(f"{live_api}/healthz", timeout=10).status_code == 200
        latencies.append(time.perf_counter() - started)
        time.sleep(0.05)
    uploading.join()
    assert outcome["response"].status_code == 201, outcome["response"].text
    assert len(latencies) >= 5, "the upload was too quick to show anything"
    # before, the whole parse ran on the event loop (seconds here); now only receiving the body does
    assert max(latencies) < 1.0, f"healthz waited {max(latencies):.2f} s during the upload"


def test_too_many_columns_are_refused_from_the_header_at_once(api):
    body = (
        ",".join(f"c{i}" for i in range(100_000))
        + "\n"
        + "\n".join(",".join("1" for _ in range(100_000)) for _ in range(20))
        + "\n"
    ).encode()  # 4 MB, 10^5 columns
    started = time.monotonic()
    problem = assert_problem(
        api.client.post("/v1/datasets?target=c0", content=body, headers={"Content-Type": "text/csv"}), 413, "body.file"
    )
    assert time.monotonic() - started < 3 and "FIRE_MAX_COLUMNS" in problem["errors"][0]["fix"]


def test_a_gzip_bomb_is_refused_while_it_inflates(isolated_settings):
    bomb = gzip.compress(b"0" * (16 << 20)) * 64  # 64 gzip members: 1 GiB inflated from 1 MB
    settings = isolated_settings.model_copy(update={"max_inflated_bytes": 32 << 20})
    with TestClient(create_app(settings)) as client:
        started = time.monotonic()
        problem = assert_problem(
            client.post("/v1/datasets?target=x", content=bomb, headers={"Content-Type": "application/gzip"}),
            413,
            "body.file",
        )
        assert time.monotonic() - started < 5 and "FIRE_MAX_INFLATED_BYTES" in problem["errors"][0]["fix"]


def test_too_many_rows_are_refused(isolated_settings):
    settings = isolated_settings.model_copy(update={"max_rows": 100})
    with TestClient(create_app(settings)) as client:
        frame = abalone_frame().head(101)
        assert_problem(
            client.post("/v1/datasets?target=rings", content=csv_bytes(frame), headers={"Content-Type": "text/csv"}),
            413,
            "body.file",
        )
        assert (
            client.post(
                "/v1/datasets?target=rings", content=csv_bytes(frame.head(100)), headers={"Content-Type": "text/csv"}
            ).status_code
            == 201
        )


def test_json_bodies_are_limited_with_or_without_content_length(api):
    huge = b'{"dataset_id": "ds_x", "forest_id": "fo_x", "lambdas": [' + b"1.0, " * 400_000 + b"1.0]}"
    assert_problem(api.client.post("/v1/jobs", content=huge, headers={"Content-Type": "application/json"}), 413, "body")
    streamed = api.client.post(
        "/v1/jobs", content=iter([huge[: 1 << 20], huge[1 << 20 :]]), headers={"Content-Type": "application/json"}
    )
    assert_problem(streamed, 413, "body")


def test_silent_coercions_and_unsafe_cells_are_refused(api):
    client = api.client

    def post_csv(data: bytes):
        return client.post("/v1/datasets?target=y", content=data, headers={"Content-Type": "text/csv"})

    assert_problem(post_csv(b"a,a,y\n1,2,3\n4,5,6\n"), 422, "body.columns.a")  # pandas would rename it a.1
    problem = assert_problem(post_csv(b"a,b,y\n1,=cmd|' /C calc'!A0,3\n4,x,6\n"), 422, "body.columns.b")
    assert "formula" in problem["errors"][0]["message"]
    assert_problem(post_csv(b"=a,b,y\n1,2,3\n4,5,6\n"), 422, "body.columns.=a")
    problem = assert_problem(post_csv(b"a,b,y\n1,1e300,3\n4,5,6\n"), 422, "body.columns.b")
    assert "3.4e+38" in problem["errors"][0]["message"]
    assert_problem(
        client.post("/v1/forests/train", json={"dataset_id": "ds_x", "max_features": True}), 422, "body.max_features"
    )
    assert_problem(
        client.post("/v1/jobs", json={"dataset_id": "ds_x", "forest_id": "fo_x", "n_lambdas": "50"}),
        422,
        "body.n_lambdas",
    )
    assert_problem(
        client.post("/v1/datasets?target=y", content=b"--x\r\n", headers={"Content-Type": "multipart/form-data"}),
        400,
        "body",
    )
    assert_problem(
        client.post("/v1/forests", content=b"--x\r\n", headers={"Content-Type": "multipart/form-data"}), 400, "body"
    )
    problem = assert_problem(
        client.post("/v1/jobs", content=b'{"dataset_id": ', headers={"Content-Type": "application/json"}), 422
    )
    assert problem["errors"][0]["field"] == "body" and problem["title"] == "Unprocessable Content"


def test_scoring_limits_and_values(stack, abalone):
    url, row = scoring_url(stack, abalone, "limits"), ABALONE_ROW
    post = lambda body: stack.client.post(url, json=body)  # noqa: E731
    assert_problem(post({"dataframe_records": [{**row, "Length": True}]}), 422, "body.dataframe_records.Length")
    problem = assert_problem(post({"dataframe_records": [{**row, "Height": 1e308}]}), 422, "Height")
    assert "3.4e+38" in problem["errors"][0]["message"]
    infinite = stack.client.post(
        url,
        content=b'{"dataframe_records": [{"Sex": "M", "Length": Infinity, '
        b'"Diameter": 0.3, "Height": 0.1, "Whole_weight": 0.5, '
        b'"Shucked_weight": 0.2, "Viscera_weight": 0.1, "Shell_weight": 0.15}]}',
        headers={"Content-Type": "application/json"},
    )
    assert_problem(infinite, 422)
    assert post({"dataframe_records": [{**row, "Length": None}]}).status_code == 200  # a missing value is fine

    limited = stack.settings.model_copy(update={"max_scoring_rows": 10, "max_scoring_bytes": 20_000})
    with TestClient(create_app(limited)) as client:
        assert client.post(url, json={"dataframe_records": [row] * 10}).status_code == 200
        assert_problem(client.post(url, json={"dataframe_records": [row] * 11}), 413, "dataframe_records")
        assert_problem(client.post(url, json={"dataframe_records": [row] * 200}), 413, "body")


def test_the_result_of_a_canceled_job_says_so(stack, abalone):
    dataset, forest_id = abalone
    job = submit(
        stack,
        {
            "dataset_id": dataset["id"],
            "forest_id": forest_id,
            "n_lambdas": 1000,
            "tol": 1e-12,
            "fusion_ratio": 1.0,
            "lambda_min_ratio": 1e-6,
        },
    )
    stack.client.post(f"/v1/jobs/{job['id']}/cancel")
    problem = assert_problem(stack.client.get(f"/v1/jobs/{job['id']}/result"), 409, "path.job_id")
    assert "canceled" in problem["errors"][0]["fix"] and "wait" not in problem["errors"][0]["fix"]
    assert "Retry-After" not in stack.client.get(f"/v1/jobs/{job['id']}/result").headers
