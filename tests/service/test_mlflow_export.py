"""A promoted model as an MLflow model (GET /v1/models/{id}/export?format=mlflow): unzipped and loaded with
``mlflow.pyfunc.load_model``, it predicts what ``POST /v1/models/{id}/predict`` serves (exactly; counts' rates to
the last bit of exp), as MLflow's scoring server does, for regression, binary and K-class classifiers and counts,
on rows with missing values and unseen levels (which it scores as missing ones, where the service refuses them);
its signature names the training columns and its input example validates against it."""

import io
import warnings
import zipfile
from types import SimpleNamespace

import mlflow.pyfunc
import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient
from mlflow.models import Model, validate_serving_input
from mlflow.pyfunc import scoring_server

from app.core.mlflow_export import mlflow_model_zip
from tests.support.data import abalone_frame
from tests.support.jobs import submit, upload_frame
from tests.support.synthetic import GRADES, grades_table, visits_table

pytestmark = pytest.mark.integration

FOREST = {"n_estimators": 20, "max_depth": 3, "max_features": "sqrt", "random_state": 0}
PATH = {"n_lambdas": 10, "max_rules": 10, "max_iter": 300}
UNSEEN = "never-seen"


def promote(stack, dataset_id: str, name: str, **job) -> dict:
    """A model of the selected step of a path job on the dataset (its forest trained by the job unless given)."""
    submitted = submit(stack, {"dataset_id": dataset_id, **PATH, **(job or {"forest": FOREST})})
    stack.wait_for(submitted["id"], ("succeeded",), timeout=180)
    promoted = stack.client.post("/v1/models", json={"job_id": submitted["id"], "name": name})
    assert promoted.status_code == 201, promoted.text
    return promoted.json()


def with_gaps(rows: pd.DataFrame, text_column: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rows with numeric columns as doubles, some values missing and an unseen level of ``text_column``; the same
    rows as the service takes them, the unseen level sent as missing)."""
    rows = rows.reset_index(drop=True)
    numeric = [name for name in rows.columns if name != text_column]
    rows = rows.astype(dict.fromkeys(numeric, float)).astype({text_column: object})
    rows.loc[0, numeric[0]] = np.nan
    rows.loc[1, numeric] = np.nan
    rows.loc[2, text_column] = None
    rows.loc[3, text_column] = UNSEEN
    return rows, rows.assign(**{text_column: rows[text_column].where(rows[text_column] != UNSEEN, None)})


def split_body(rows: pd.DataFrame) -> dict:
    values = rows.astype(object).where(rows.notna(), None).to_numpy().tolist()
    return {"dataframe_split": {"columns": list(rows.columns), "data": values}}


def served(stack, model: dict, rows: pd.DataFrame) -> dict:
    response = stack.client.post(f"/v1/models/{model['id']}/predict", json=split_body(rows))
    assert response.status_code == 200, response.text
    return response.json()


def invocations(loaded, rows: pd.DataFrame, params: dict | None = None) -> dict:
    """What MLflow's scoring server (``mlflow models serve``) answers for the rows."""
    body = split_body(rows) | ({"params": params} if params else {})
    response = TestClient(scoring_server.init(loaded)).post("/invocations", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def load_export(stack, model: dict, directory, types: dict[str, str]):
    """The model's MLflow export, checked (headers, same bytes twice, signature ``types``, the input example
    validated and scored as served) and loaded with mlflow.pyfunc."""
    url = f"/v1/models/{model['id']}/export?format=mlflow"
    response = stack.client.get(url)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/zip"
    assert response.headers["content-disposition"] == f'attachment; filename="{model["name"]}-v1-mlflow.zip"'
    assert stack.client.get(url).content == response.content  # deterministic: fixed timestamps
    zipfile.ZipFile(io.BytesIO(response.content)).extractall(directory)
    loaded = mlflow.pyfunc.load_model(str(directory))
    schema = loaded.metadata.get_input_schema()
    assert {spec.name: spec.type.name for spec in schema.inputs} == types
    assert schema.input_names() == [column["name"] for column in model["columns"]]
    assert loaded.metadata.metadata["fire_model_id"] == model["id"]
    assert loaded.metadata.metadata["output"] == response.headers["x-fire-output"]

    example = loaded.input_example
    assert list(example.columns) == list(types) and len(example) == 3
    with warnings.catch_warnings():  # deprecated in MLflow 3.13 for mlflow.models.predict, which builds an env
        warnings.simplefilter("ignore", FutureWarning)
        validated = validate_serving_input(str(directory), (directory / "serving_input_example.json").read_text())
    # the export sums a row's rule terms in Python, the service in its kernels: the same numbers up to the last bits
    expected = served(stack, model, example)["predictions"]
    assert list(validated) == [pytest.approx(v, rel=1e-12) if isinstance(v, float) else v for v in expected]
    return loaded


def test_a_regression_model_predicts_as_served(stack, abalone, tmp_path):
    dataset, forest_id = abalone
    model = promote(stack, dataset["id"], "abalone-mlflow", forest_id=forest_id)
    types = {"Sex": "string"} | dict.fromkeys(abalone_frame().columns[1:-1], "double")
    loaded = load_export(stack, model, tmp_path, types)
    rows, sent = with_gaps(abalone_frame().drop(columns=["rings"]).iloc[:60], "Sex")
    predictions = served(stack, model, sent)["predictions"]
    assert loaded.predict(rows) == invocations(loaded, rows)["predictions"] == predictions
    with pytest.raises(ValueError, match="is for classifiers"):
        loaded.predict(rows, params={"predict_method": "predict_proba"})


@pytest.mark.parametrize("classes", [["high", "low"], GRADES])
def test_a_classifier_predicts_labels_and_probabilities_as_served(stack, tmp_path, classes):
    frame = grades_table(n_rows=300)
    if len(classes) == 2:
        frame["grade"] = np.where(frame["grade"] < "D", "low", "high")
    model = promote(stack, upload_frame(stack, frame, "grade"), f"grades-mlflow-{len(classes)}")
    assert model["classes"] == classes
    types = {"size": "double", "age": "double", "region": "string", "score": "double"}
    loaded = load_export(stack, model, tmp_path, types)
    rows, sent = with_gaps(frame.drop(columns=["grade"]).iloc[::5], "region")
    answer = served(stack, model, sent)
    assert loaded.predict(rows) == invocations(loaded, rows)["predictions"] == answer["predictions"]
    assert set(answer["predictions"]) == set(classes)

    proba = {"predict_method": "predict_proba"}
    probabilities = loaded.predict(rows, params=proba)
    assert invocations(loaded, rows, proba)["predictions"] == probabilities.to_dict("records")
    assert list(probabilities.columns) == classes  # named by the labels, as text
    expected = np.array(answer["probabilities"])
    if len(classes) == 2:  # the service serves the probability of classes[1]
        expected = np.column_stack([1 - expected, expected])
    np.testing.assert_allclose(probabilities.to_numpy(), expected, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="predict_method must be one of"):
        loaded.predict(rows, params={"predict_method": "predict_log_proba"})


def test_a_count_model_predicts_the_served_rates(stack, tmp_path):
    frame = visits_table(n_rows=300)
    model = promote(stack, upload_frame(stack, frame, "visits", task="count"), "visits-mlflow")
    types = {"age": "double", "chronic": "double", "insurance": "string", "income": "double"}
    loaded = load_export(stack, model, tmp_path, types)
    rows, sent = with_gaps(frame.drop(columns=["visits"]).iloc[::5], "insurance")
    rates = np.array(loaded.predict(rows))
    # exp of the same score: the export's math.exp, the service's numpy exp, which is numpy's own with AVX-512 and
    # may differ in the last bit (without it, as on AVX2, numpy calls libm's: equal)
    np.testing.assert_array_max_ulp(rates, np.array(served(stack, model, sent)["predictions"]), maxulp=1)


def test_text_that_yaml_reads_otherwise_keeps_its_value_in_the_mlmodel(tmp_path):
    awkward = 'a\u2028b\x85c\x7f "d" \\ 1e-05 \U0001f600 é'
    columns = [{"name": awkward, "kind": "numeric"}]
    model = SimpleNamespace(
        id="mdl_0",
        name=awkward,
        version=1,
        target=awkward,
        loss="squared",
        classes=None,
        columns=columns,
        ensemble={"rules": []},
        created_at=0.0,
    )
    zipfile.ZipFile(io.BytesIO(mlflow_model_zip(model, "", awkward))).extractall(tmp_path)
    read = Model.load(str(tmp_path))
    assert read.metadata["name"] == read.metadata["target"] == read.metadata["output"] == awkward
    assert read.signature.inputs.input_names() == [awkward]
    assert read.utc_time_created == "1970-01-01 00:00:00.000000"
