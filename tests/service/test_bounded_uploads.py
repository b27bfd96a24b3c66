"""Uploads bounded in memory (issue 38): a gzip bomb on any route (datasets, forests, batch, scoring bodies, the Open
Inference Protocol; with and without Content-Encoding, raw or multipart) is refused with a 4xx naming what is at
fault while a real `fire-rules serve` stays under 600 MB, and answers afterwards; a Content-Encoding a route does not
read is a 415; a Parquet batch is bounded before any row is read (FIRE_MAX_BATCH_ROWS, at most a row per byte of the
file, what its columns take once read against FIRE_MAX_BATCH_BYTES)."""

import gzip
import io
import subprocess
import sys
import threading
import time

import httpx
import numpy as np
import pandas as pd
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.core.config import Settings
from tests.support.data import REPO_ROOT, abalone_frame
from tests.support.jobs import submit
from tests.support.problems import assert_problem
from tests.support.service import END_WITH_THIS_RUN, ServiceStack, free_port, settings_env

pytestmark = pytest.mark.integration

MiB = 1 << 20
RSS_LIMIT = 600 * MiB
BOMB = gzip.compress(b"0" * (64 * MiB)) * 16  # 16 gzip members: 1 GiB inflated from 1 MB
FEATURES = abalone_frame().drop(columns=["rings"])
NUMBERS = [column for column in FEATURES.columns if column != "Sex"]


@pytest.fixture(scope="module")
def model(stack, abalone) -> dict:
    dataset, forest_id = abalone
    job = submit(stack, {"dataset_id": dataset["id"], "forest_id": forest_id, "n_lambdas": 6, "max_rules": 6})
    stack.wait_for(job["id"], ("succeeded",), timeout=180)
    response = stack.client.post("/v1/models", json={"job_id": job["id"], "name": "bounded-uploads"})
    assert response.status_code == 201, response.text
    return response.json()


def parquet(table: pa.Table, times: int = 1) -> bytes:
    sink = io.BytesIO()
    with pq.ParquetWriter(sink, table.schema) as writer:
        for _ in range(times):
            writer.write_table(table)
    return sink.getvalue()


def repeated_rows(rows: int) -> pa.Table:
    """Abalone's columns, every row the same."""
    sex = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, dtype=np.int32)), pa.array(["M"]))
    return pa.table({"Sex": sex, **{name: np.full(rows, 0.3) for name in NUMBERS}})


def post_batch(client, ref: str, data: bytes, filename: str, **query):
    return client.post(
        f"/v1/models/{ref}/batch", params=query, files={"file": (filename, data, "application/octet-stream")}
    )


def batch_jobs(client) -> int:
    return sum(job["kind"] == "batch" for job in client.get("/v1/jobs").json())


def test_a_parquet_file_of_more_rows_than_bytes_is_refused_before_any_row_is_read(stack, model):
    # the file held 10 million rows of one value in 327 KB; 3 million here, in about 100 KB
    data = parquet(repeated_rows(1_000_000), times=3)
    assert len(data) < 150_000
    before = batch_jobs(stack.client)
    started = time.monotonic()
    problem = assert_problem(post_batch(stack.client, model["id"], data, "repeated.parquet"), 413, "body.file")
    assert time.monotonic() - started < 1  # from the metadata: no row was read
    assert problem["detail"] == f"The Parquet file holds 3000000 rows in {len(data)} bytes: more rows than bytes."
    assert "or the rows as CSV" in problem["errors"][0]["fix"] and batch_jobs(stack.client) == before


def test_fire_max_batch_rows_bounds_parquet_and_csv_and_what_parquet_takes_once_read(stack, model):
    rng = np.random.default_rng(0)
    frame = FEATURES.sample(101, replace=True, random_state=0).reset_index(drop=True)
    settings = stack.settings.model_copy(update={"max_batch_rows": 100})
    with ServiceStack(settings, n_workers=0, clean_keys=False) as own:
        before = batch_jobs(own.client)
        for data, name in (
            (frame.to_parquet(index=False), "rows.parquet"),
            (frame.to_csv(index=False).encode(), "rows.csv"),
        ):
            problem = assert_problem(post_batch(own.client, model["id"], data, name), 413, "body.file")
            assert "FIRE_MAX_BATCH_ROWS" in problem["errors"][0]["fix"], problem
        assert batch_jobs(own.client) == before
        accepted = post_batch(own.client, model["id"], frame.head(100).to_csv(index=False).encode(), "rows.csv")
        assert accepted.status_code == 202, accepted.text
        assert accepted.json()["batch"]["n_rows"] == 100

    # 2,000 rows of 100 values a column: 8 columns of 8 bytes a cell once read (128,000 bytes), in a file of 13 KB
    levels = pd.DataFrame({name: rng.integers(0, 100, 2000) / 100 for name in NUMBERS}).assign(Sex="M")
    data = levels.to_parquet(index=False)
    assert 2000 < len(data) < 30_000
    settings = stack.settings.model_copy(update={"max_batch_bytes": 100_000})
    with ServiceStack(settings, n_workers=0, clean_keys=False) as own:
        problem = assert_problem(post_batch(own.client, model["id"], data, "levels.parquet"), 413, "body.file")
        assert "128000 bytes once read" in problem["errors"][0]["message"]
        assert "FIRE_MAX_BATCH_BYTES" in problem["errors"][0]["fix"]


def test_a_content_encoding_a_route_does_not_read_is_a_415(stack, model):
    client, gzipped = stack.client, {"Content-Encoding": "gzip", "Content-Type": "application/json"}
    rows = gzip.compress(b'{"dataframe_records": [{"Length": 0.4}]}')
    for path in (f"/v1/models/{model['id']}/predict", "/v1/jobs", f"/v2/models/{model['name']}/infer"):
        problem = assert_problem(client.post(path, content=rows, headers=gzipped), 415, "header.Content-Encoding")
        assert problem["errors"][0]["fix"] == "send the body uncompressed"
    brotli = {"Content-Encoding": "br", "Content-Type": "text/csv"}
    for path in ("/v1/datasets?target=rings", "/v1/forests", f"/v1/models/{model['id']}/batch"):
        assert_problem(client.post(path, content=b"x,rings\n1,2\n", headers=brotli), 415, "header.Content-Encoding")


def test_a_gzipped_table_is_read_with_or_without_content_encoding_and_batch_refuses_it(stack, model):
    client = stack.client
    csv = abalone_frame().head(300).to_csv(index=False).encode()
    plain = client.post("/v1/datasets?target=rings", content=csv, headers={"Content-Type": "text/csv"}).json()
    for headers in ({"Content-Type": "application/gzip"}, {"Content-Type": "text/csv", "Content-Encoding": "gzip"}):
        response = client.post("/v1/datasets?target=rings", content=gzip.compress(csv), headers=headers)
        assert response.status_code in (200, 201), response.text
        assert response.json()["n_rows"] == plain["n_rows"] == 300
    multipart = client.post("/v1/datasets?target=rings", files={"file": ("t.csv.gz", gzip.compress(csv), "x/y")})
    assert multipart.status_code in (200, 201) and multipart.json()["n_rows"] == 300
    rows = gzip.compress(FEATURES.head(5).to_csv(index=False).encode())
    for headers in ({"Content-Type": "text/csv"}, {"Content-Type": "text/csv", "Content-Encoding": "gzip"}):
        response = client.post(f"/v1/models/{model['id']}/batch", content=rows, headers=headers)
        assert "not read gzipped" in assert_problem(response, 415, "body.file")["detail"]


@pytest.fixture
def served(stack, model):
    """`fire-rules serve` (uvicorn, one process) on the shared stack's Redis, prefix and workers, with the default
    upload limits (FIRE_MAX_UPLOAD_BYTES 256 MiB, FIRE_MAX_INFLATED_BYTES 512 MiB): (base URL, its process)."""
    defaults = {name: Settings.model_fields[name].default for name in ("max_upload_bytes", "max_inflated_bytes")}
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--log-level", "warning"],
        env=settings_env(stack.settings.model_copy(update=defaults)),
        cwd=REPO_ROOT,
        preexec_fn=END_WITH_THIS_RUN,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.1)
    yield base, psutil.Process(process.pid)
    process.terminate()
    process.wait(timeout=15)


class PeakRss:
    """The largest resident set of a process, sampled every 5 ms while the block runs."""

    def __init__(self, process: psutil.Process):
        self.process, self.peak, self._stop = process, 0, threading.Event()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.005)

    def __enter__(self) -> "PeakRss":
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def test_gzip_bombs_on_every_route_are_refused_with_the_api_under_600_mb(served, model):
    base, process = served
    name, model_id = model["name"], model["id"]
    gz, csv, json_body = (
        {"Content-Encoding": "gzip"},
        {"Content-Type": "text/csv"},
        {"Content-Type": "application/json"},
    )
    multipart = {"files": {"file": ("bomb.csv.gz", BOMB, "application/gzip")}}
    inflated = ("body.file", "FIRE_MAX_INFLATED_BYTES")
    # (route, request, status, the field at fault, a word of its fix)
    bombs = [
        ("/v1/datasets?target=x", {"headers": {"Content-Type": "application/gzip"}}, 413, *inflated),
        ("/v1/datasets?target=x", {"headers": {**csv, **gz}}, 413, *inflated),
        ("/v1/datasets?target=x", multipart, 413, *inflated),
        ("/v1/forests", {"headers": {"Content-Type": "application/octet-stream"}}, 413, *inflated),
        ("/v1/forests", {"headers": {**json_body, **gz}}, 413, *inflated),
        ("/v1/forests", multipart, 413, *inflated),
        (f"/v1/models/{model_id}/batch", {"headers": csv}, 415, "body.file", "uncompressed"),
        (f"/v1/models/{model_id}/batch", {"headers": {**csv, **gz}}, 415, "body.file", "uncompressed"),
        (f"/v1/models/{model_id}/batch", multipart, 415, "body.file", "uncompressed"),
        (f"/v1/models/{model_id}/predict", {"headers": json_body}, 422, "body", "JSON"),
        (f"/v1/models/{model_id}/predict", {"headers": {**json_body, **gz}}, 415, "header.Content-Encoding", "send"),
        (f"/v1/registered-models/{name}/invocations", {"headers": csv}, 422, "body", "UTF-8 text"),
        (
            f"/v1/registered-models/{name}/invocations",
            {"headers": {**csv, **gz}},
            415,
            "header.Content-Encoding",
            "send",
        ),
        (f"/v2/models/{name}/infer", {"headers": json_body}, 400, "body", "JSON"),
        (f"/v2/models/{name}/infer", {"headers": {**json_body, **gz}}, 415, "header.Content-Encoding", "send"),
        ("/v1/jobs", {"headers": {**json_body, **gz}}, 415, "header.Content-Encoding", "send"),
    ]
    baseline = process.memory_info().rss
    answers = []
    with PeakRss(process) as rss, httpx.Client(base_url=base, timeout=120) as client:
        for path, request, status, field, fix in bombs:
            body = {} if "files" in request else {"content": BOMB}
            started = time.monotonic()
            response = client.post(path, **request, **body)
            answers.append((path, response.status_code, round(time.monotonic() - started, 2), rss.peak >> 20))
            problem = assert_problem(response, status, field)
            assert any(field in fault["field"] and fix in fault["fix"] for fault in problem["errors"]), (path, problem)
        # the process answers afterwards: its health, a table upload and a prediction
        assert client.get("/healthz").status_code == 200
        table = gzip.compress(abalone_frame().head(200).to_csv(index=False).encode())
        upload = client.post("/v1/datasets?target=rings", content=table, headers={"Content-Type": "application/gzip"})
        assert upload.status_code in (200, 201), upload.text
        rows = {"dataframe_records": FEATURES.head(3).to_dict(orient="records")}
        assert len(client.post(f"/v1/models/{model_id}/predict", json=rows).json()["predictions"]) == 3
    print(
        f"RSS baseline {baseline >> 20} MiB, peak {rss.peak >> 20} MiB; (route, status, seconds, peak MiB): {answers}"
    )
    assert rss.peak < RSS_LIMIT, answers
