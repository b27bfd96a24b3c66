"""Dataset uploads through HTTP: formats, encoding, and a problem+json 4xx for every bad input."""

import gzip
import io
import pickle

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from tests.support.data import ABALONE, CALIFORNIA, ELEVATORS, KIN8NM, abalone_frame
from tests.support.problems import assert_problem

pytestmark = pytest.mark.integration


def test_gzipped_csv_with_categorical_column_is_one_hot_encoded(api):
    meta = api.upload_dataset()
    assert meta["n_rows"] == 4177
    assert meta["columns"][0] == {"name": "Sex", "kind": "categorical", "categories": ["F", "I", "M"], "missing": False}
    assert meta["feature_names"][:3] == ["Sex=F", "Sex=I", "Sex=M"] and meta["n_features"] == 10
    X, y = api.client.app.state.core.datasets.load_arrays(meta["id"])
    frame = abalone_frame()
    assert np.array_equal(X[:, 0], (frame["Sex"] == "F").to_numpy(float))
    assert np.allclose(X[:, 3:], frame.drop(columns=["Sex", "rings"]).to_numpy())
    assert np.array_equal(y, frame["rings"].to_numpy(float))


def test_same_content_same_id_whatever_the_transport(api):
    raw = api.upload_dataset()
    multipart = api.client.post(
        "/v1/datasets", files={"file": ("abalone.csv.gz", ABALONE.read_bytes())}, data={"target": "rings"}
    )
    assert multipart.status_code == 200 and multipart.json()["id"] == raw["id"]
    assert multipart.headers["Location"] == f"/v1/datasets/{raw['id']}"
    assert api.client.get(f"/v1/datasets/{raw['id']}").json()["n_rows"] == 4177


@pytest.mark.parametrize("path", [KIN8NM, ELEVATORS, CALIFORNIA], ids=lambda path: path.name)
def test_every_regression_table_uploads_as_it_is(api, path):
    target = pd.read_csv(path, nrows=1).columns[-1]
    response = api.client.post(
        f"/v1/datasets?target={target}", content=path.read_bytes(), headers={"Content-Type": "application/gzip"}
    )
    assert response.status_code in (200, 201), response.text
    assert all(column["kind"] == "numeric" for column in response.json()["columns"])


def test_parquet_and_json_records(api):
    frame = abalone_frame().head(300)
    buffer = io.BytesIO()
    frame.to_parquet(buffer)
    parquet = api.client.post(
        "/v1/datasets?target=rings",
        content=buffer.getvalue(),
        headers={"Content-Type": "application/vnd.apache.parquet"},
    )
    records = api.client.post(
        "/v1/datasets?target=rings",
        content=frame.to_json(orient="records"),
        headers={"Content-Type": "application/json"},
    )
    assert parquet.status_code == records.status_code == 201
    assert parquet.json()["feature_names"] == records.json()["feature_names"]
    assert parquet.json()["n_rows"] == records.json()["n_rows"] == 300


def csv_bytes(frame: pd.DataFrame) -> bytes:
    return frame.to_csv(index=False).encode()


def test_bad_tables_get_422_naming_the_fault_and_leave_stored_data_intact(api):
    stored = api.upload_dataset()
    client = api.client
    frame = abalone_frame().head(50)

    assert_problem(
        client.post("/v1/datasets", content=csv_bytes(frame), headers={"Content-Type": "text/csv"}), 422, "target"
    )
    body = assert_problem(
        client.post("/v1/datasets?target=nope", content=csv_bytes(frame), headers={"Content-Type": "text/csv"}),
        422,
        "target",
    )
    assert "rings" in body["errors"][0]["fix"]

    missing_target = frame.copy()
    missing_target.loc[[3, 7], "rings"] = np.nan
    body = assert_problem(
        client.post(
            "/v1/datasets?target=rings", content=csv_bytes(missing_target), headers={"Content-Type": "text/csv"}
        ),
        422,
        "missing target",
    )
    assert "3, 7" in body["errors"][0]["message"]

    text_target = frame.astype({"rings": object})
    text_target.loc[5, "rings"] = "many"
    assert_problem(
        client.post("/v1/datasets?target=rings", content=csv_bytes(text_target), headers={"Content-Type": "text/csv"}),
        422,
        "non-numeric target",
    )

    infinite = frame.copy()
    infinite.loc[2, "Height"] = np.inf
    body = assert_problem(
        client.post("/v1/datasets?target=rings", content=csv_bytes(infinite), headers={"Content-Type": "text/csv"}),
        422,
        "columns.Height",
    )
    assert "infinite" in body["errors"][0]["message"]

    assert_problem(
        client.post(
            "/v1/datasets?target=rings", content=b'a,b\n1,2,3,4\n"unclosed', headers={"Content-Type": "text/csv"}
        ),
        422,
        "body",
    )
    assert_problem(
        client.post("/v1/datasets?target=rings", content=b"", headers={"Content-Type": "text/csv"}), 422, "body"
    )
    assert_problem(
        client.post("/v1/datasets?target=rings", content=b"[1, 2", headers={"Content-Type": "application/json"}),
        422,
        "body",
    )
    assert_problem(
        client.post(
            "/v1/datasets?target=rings", content=b"\x89PNG\r\n\x1a\n....", headers={"Content-Type": "image/png"}
        ),
        415,
        "header.Content-Type",
    )
    assert_problem(
        client.post(
            "/v1/datasets?target=rings",
            content=pickle.dumps(frame),
            headers={"Content-Type": "application/octet-stream"},
        ),
        415,
        "pickle",
    )
    assert_problem(
        client.post(
            "/v1/datasets?target=rings",
            content=gzip.compress(pickle.dumps(frame)),
            headers={"Content-Type": "application/gzip"},
        ),
        415,
        "pickle",
    )
    assert_problem(client.post("/v1/datasets?target=rings&format=xlsx", content=csv_bytes(frame)), 422, "format")
    assert_problem(client.get("/v1/datasets/ds_missing"), 404, "path.dataset_id")
    assert_problem(client.delete("/v1/datasets"), 405, "method")
    assert_problem(client.get("/v1/nothing-here"), 404, "path")

    again = client.get(f"/v1/datasets/{stored['id']}")
    assert again.status_code == 200 and again.json() == stored
    X, y = client.app.state.core.datasets.load_arrays(stored["id"])
    assert X.shape == (4177, 10) and y.shape == (4177,)


def test_upload_limit_is_413_even_without_content_length(isolated_settings):
    settings = isolated_settings.model_copy(update={"max_upload_bytes": 10_000})
    with TestClient(create_app(settings)) as client:
        big = ABALONE.read_bytes()
        assert_problem(
            client.post("/v1/datasets?target=rings", content=big, headers={"Content-Type": "application/gzip"}),
            413,
            "body.file",
        )
        streamed = client.post(
            "/v1/datasets?target=rings",
            content=iter([big[:8000], big[8000:16000]]),
            headers={"Content-Type": "application/gzip"},
        )
        assert_problem(streamed, 413, "body")
        multipart = client.post("/v1/datasets", files={"file": ("a.csv.gz", big)}, data={"target": "rings"})
        assert_problem(multipart, 413, "body")


def test_categorical_columns_refused_when_configured(isolated_settings):
    settings = isolated_settings.model_copy(update={"categorical": "reject"})
    with TestClient(create_app(settings)) as client:
        body = assert_problem(
            client.post(
                "/v1/datasets?target=rings", content=ABALONE.read_bytes(), headers={"Content-Type": "application/gzip"}
            ),
            422,
            "body.columns.Sex",
        )
        assert len(body["errors"]) == 1


def test_api_keys(isolated_settings):
    settings = isolated_settings.model_copy(update={"api_keys": ["s3cret"]})
    with TestClient(create_app(settings)) as client:
        assert_problem(client.get("/v1/datasets"), 401, "X-API-Key")
        assert_problem(client.get("/v1/datasets", headers={"X-API-Key": "wrong"}), 401, "X-API-Key")
        assert client.get("/v1/datasets", headers={"X-API-Key": "s3cret"}).status_code == 200
        assert client.get("/healthz").status_code == 200
