"""Faults as a person reads them (fakeredis, no workers): one 422 names every fault a request has, of its fields'
types, of the library's spec checks and of the service's checks; a union's alternatives are one fault at the field
saying which forms it accepts (read from the schema); no message, fix or detail says None, null, True, False, 422,
dict, list, "Input should be" or "Value error"; a binary file is refused naming `file`; a validation table is
refused only for other columns, kinds, levels or target, not for other missing values."""

import gzip
import re

import fakeredis
import pandas as pd
import pytest
from fastapi.testclient import TestClient

from app.api.problems import accepted_forms
from app.api.schemas import PathJobRequest, TrainingParams
from app.core.config import Settings
from app.core.container import build_core
from app.main import create_app
from solver.spec import ForestSpec, SpecError
from tests.support.data import ABALONE, abalone_frame
from tests.support.problems import assert_problem
from tests.support.synthetic import png_image

# words of programs, not of people (the list), as whole words
PROGRAM_WORDS = re.compile(r"\b(None|null|True|False|422|dict|list)\b|Input should be|Value error")
MAX_FEATURES_FORMS = "a fraction in (0, 1], a whole number >= 1, 'sqrt', 'log2' or empty"


@pytest.fixture(scope="module")
def client():
    settings = Settings(redis_url="redis://fakeredis", key_prefix="faults:", queue_name="faults", max_trees=1000)
    return TestClient(create_app(core=build_core(settings, redis=fakeredis.FakeRedis())))


def upload(client, frame: pd.DataFrame, target: str) -> dict:
    response = client.post(
        f"/v1/datasets?target={target}",
        content=frame.to_csv(index=False).encode(),
        headers={"Content-Type": "text/csv"},
    )
    assert response.status_code in (200, 201), response.text
    return response.json()


@pytest.fixture(scope="module")
def abalone(client):
    response = client.post(
        "/v1/datasets?target=rings", content=ABALONE.read_bytes(), headers={"Content-Type": "application/gzip"}
    )
    assert response.status_code in (200, 201), response.text
    return response.json()


def faults(problem: dict) -> dict[str, str]:
    fields = [error["field"] for error in problem["errors"]]
    assert len(fields) == len(set(fields)), f"a field named twice: {fields}"
    return {error["field"]: error["message"] for error in problem["errors"]}


def assert_plain(problem: dict) -> None:
    texts = [problem["detail"], *(error[key] for error in problem["errors"] for key in ("message", "fix"))]
    assert not [text for text in texts if PROGRAM_WORDS.search(text)], problem


def test_one_422_names_every_fault_of_the_body_at_once(client):
    body = {
        "dataset_id": "ds_x",
        "forest": {"n_estimators": "5", "max_depth": 0, "max_features": "abc"},  # a type, a spec check, a union
        "validation": {"fraction": 2.0},  # a nested spec check
        "n_lambdas": 0,
        "gamma": 0.5,
        "max_rules": "many",
        "polish": "yes",
        "surprise": 1,
    }
    problem = assert_problem(client.post("/v1/jobs", json=body), 422)
    named = faults(problem)
    assert set(named) == {
        "body.forest.n_estimators",
        "body.forest.max_depth",
        "body.forest.max_features",
        "body.validation.fraction",
        "body.n_lambdas",
        "body.gamma",
        "body.max_rules",
        "body.polish",
        "body.surprise",
    }
    assert named["body.forest.max_depth"] == "must be an integer >= 1, got 0"
    assert named["body.forest.n_estimators"] == 'must be a whole number, not the text "5"'
    assert named["body.max_rules"] == 'must be a whole number or empty, not the text "many"'
    assert named["body.polish"] == 'must be true, false or empty, not the text "yes"'
    assert problem["detail"] == "9 fields of the request need a change."
    assert_plain(problem)


def test_a_union_is_one_fault_saying_the_forms_it_accepts(client):
    problem = assert_problem(client.post("/v1/jobs", json={"dataset_id": "x", "forest": {"max_features": "abc"}}), 422)
    assert problem["errors"] == [
        {
            "field": "body.forest.max_features",
            "message": f'must be {MAX_FEATURES_FORMS}, not the text "abc"',
            "fix": "use one of those forms",
        }
    ]
    # the same words for a number out of both numeric forms' ranges
    problem = assert_problem(client.post("/v1/jobs", json={"dataset_id": "x", "forest": {"max_features": 1.5}}), 422)
    assert faults(problem) == {"body.forest.max_features": f"must be {MAX_FEATURES_FORMS}, not 1.5"}
    assert_plain(problem)


def test_the_forms_are_read_from_the_schema_and_agree_with_the_spec():
    assert accepted_forms(TrainingParams, "max_features") == MAX_FEATURES_FORMS
    assert accepted_forms(PathJobRequest, "lambdas") == "numbers in square brackets ([…]) or empty"
    assert accepted_forms(PathJobRequest, "candidates") == "'leaves', 'nodes' or empty"
    assert accepted_forms(PathJobRequest, "min_support") == "a whole number or a number"
    # a value the schema's forms take is one ForestSpec's check takes, and no other
    for value in (0.0, 1e-9, 0.5, 1.0, 1.5, 0, 1, 7, -1, "sqrt", "log2", "all", None):
        by_schema = True
        try:
            TrainingParams(max_features=value)
        except ValueError:
            by_schema = False
        by_spec = True
        try:
            ForestSpec(max_features=value)
        except SpecError:
            by_spec = False
        assert by_schema == by_spec, value


def test_the_service_checks_are_named_at_once(client, abalone):
    body = {
        "dataset_id": abalone["id"],
        "forest": {"n_estimators": 2000, "max_depth": 40, "max_features": 12},
        "loss": "logistic",  # a regression target
        "n_lambdas": 2000,
    }
    problem = assert_problem(client.post("/v1/jobs", json=body), 422)
    assert set(faults(problem)) == {
        "body.forest.n_estimators",
        "body.forest.max_depth",
        "body.forest.max_features",
        "body.loss",
        "body.n_lambdas",
    }
    assert "n_estimators may be at most 1000." in problem["detail"] and "A logistic loss" in problem["detail"]
    assert_plain(problem)
    problem = assert_problem(
        client.post("/v1/forests/train", json={"dataset_id": abalone["id"], "n_estimators": 2000, "max_features": 12}),
        422,
    )
    assert set(faults(problem)) == {"body.n_estimators", "body.max_features"}
    # a missing dataset alone is still its own 404
    assert_problem(client.post("/v1/jobs", json={"dataset_id": "ds_none", "forest": {}}), 404)


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("post", "/v1/jobs", {"dataset_id": None, "forest": []}),
        ("post", "/v1/jobs", {"dataset_id": "x", "forest_id": "y", "lambdas": {"a": 1}, "grid": {"gamma": []}}),
        ("post", "/v1/jobs", {"dataset_id": "x", "forest_id": "y", "linear_terms": None, "selection": "auc"}),
        ("post", "/v1/forests/train", {"dataset_id": "x", "threshold_bins": 1, "random_state": -1, "kind": True}),
        ("post", "/v1/models", {"job_id": "j", "name": "has space", "step": -1}),
        ("post", "/v1/models/none/predict", {"dataframe_records": [], "instances": []}),
        ("post", "/v1/models/none/predict", {"dataframe_split": {"columns": "a", "data": 1}}),
    ],
)
def test_no_fault_speaks_in_program_words(client, method, path, body):
    response = getattr(client, method)(path, json=body)
    assert response.status_code in (404, 422), response.text
    assert_plain(response.json())


@pytest.mark.parametrize("gzipped", [False, True])
def test_a_png_renamed_csv_is_refused_naming_file(client, gzipped):
    data = gzip.compress(png_image()) if gzipped else png_image()
    response = client.post("/v1/datasets?target=y", files={"file": ("chart.csv" + (".gz" if gzipped else ""), data)})
    problem = assert_problem(response, 422)
    assert problem["errors"] == [
        {
            "field": "body.file",
            "message": "a PNG image, not text",
            "fix": "send a CSV (gzipped too), Parquet or JSON file",
        }
    ]
    assert problem["detail"] == "This file is not a table: it holds a PNG image, not the text of a CSV or JSON table."


def test_binary_data_without_a_known_start_is_refused(client):
    response = client.post(
        "/v1/datasets?target=b", content=b"a,b\n1,2\n\x00\x01\x02", headers={"Content-Type": "text/csv"}
    )
    assert faults(assert_problem(response, 422)) == {"body.file": "binary data, not text"}


def test_a_validation_table_is_refused_for_its_columns_not_its_missing_values(client):
    frame = abalone_frame().head(600)
    training = upload(client, frame.iloc[:400], "rings")
    holes = frame.iloc[400:].copy()
    holes.loc[holes.index[:5], "Length"] = None  # no missing Length in the training rows
    validation = upload(client, holes, "rings")
    forest = {"n_estimators": 5, "max_depth": 2}
    body = {"dataset_id": training["id"], "forest": forest, "validation": {"dataset_id": validation["id"]}}
    response = client.post("/v1/jobs", json=body)
    assert response.status_code == 202, response.text
    other = upload(client, frame.iloc[400:].drop(columns=["Height"]), "rings")
    body["validation"] = {"dataset_id": other["id"]}
    problem = assert_problem(client.post("/v1/jobs", json=body), 422)
    named = faults(problem)
    assert list(named) == ["body.validation.dataset_id"]
    assert "Height" in named["body.validation.dataset_id"]
    assert_plain(problem)
