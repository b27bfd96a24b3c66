"""A promoted model's rules as code a user deploys without us, served by GET /v1/models/{id}/export: the SQL
(run through SQLite) and the Python module give the model's own predictions on real rows."""

import gzip
import io

import numpy as np
import pandas as pd
import pytest

from tests.support.data import DATA
from tests.support.exports import python_predictions, sql_predictions

pytestmark = pytest.mark.integration

FOREST = {"n_estimators": 20, "max_depth": 3, "random_state": 0}
PATH = {"n_lambdas": 15, "max_rules": 12}


def test_exports_reproduce_the_served_predictions_and_bad_requests_are_named(stack):
    client = stack.client
    data = gzip.decompress((DATA / "abalone.csv.gz").read_bytes())
    features = pd.read_csv(io.BytesIO(data)).drop(columns=["rings"]).iloc[:300]
    dataset = client.post("/v1/datasets?target=rings", content=data, headers={"Content-Type": "text/csv"}).json()
    job = client.post("/v1/jobs", json={"dataset_id": dataset["id"], "forest": FOREST, **PATH}).json()
    stack.wait_for(job["id"], ("succeeded",), timeout=180)
    model = client.post("/v1/models", json={"job_id": job["id"], "name": "abalone-export"}).json()
    ensemble = model["ensemble"]
    assert [rule["id"] for rule in ensemble["rules"]] == list(range(len(ensemble["rules"])))
    assert sum(ensemble["importance"].values()) == pytest.approx(1.0)

    served = client.post(
        f"/v1/models/{model['id']}/predict",
        json={"dataframe_split": {"columns": list(features.columns), "data": features.to_numpy().tolist()}},
    ).json()["predictions"]
    sql = client.get(f"/v1/models/{model['id']}/export?format=sql")
    assert sql.status_code == 200 and sql.headers["content-type"].startswith("application/sql")
    assert sql.headers["content-disposition"].endswith('.sql"')
    assert sql.text.startswith("-- FIRE model 'abalone-export' v1")  # a name no other test of the session promotes
    expression = "\n".join(line for line in sql.text.splitlines() if not line.startswith("--"))
    np.testing.assert_allclose(sql_predictions(expression, features), served, rtol=0, atol=1e-9)
    python = client.get(f"/v1/models/{model['id']}/export?format=python")
    assert python.status_code == 200 and python.headers["x-fire-output"] == "prediction of 'rings'"
    np.testing.assert_allclose(python_predictions(python.text, features), served, rtol=0, atol=1e-9)

    rules = f"/v1/jobs/{job['id']}/steps/{model['provenance']['step']}/rules"
    auto, always = (client.get(f"{rules}?show_missing={how}").json()["text"] for how in ("auto", "always"))
    assert "or missing" not in auto and "or missing" in always  # abalone has no missing values
    assert [error["field"] for error in client.get(f"{rules}?show_missing=sometimes").json()["errors"]] == [
        "query.show_missing"
    ]

    wrong = client.get(f"/v1/models/{model['id']}/export?format=xml")
    assert wrong.status_code == 422 and wrong.headers["content-type"] == "application/problem+json"
    assert [error["field"] for error in wrong.json()["errors"]] == ["query.format"]
    assert client.get("/v1/models/mdl_missing/export?format=sql").status_code == 404
