"""Amounts (Tweedie and Gamma losses) through the service: a table declared task=amount with an exposure column, a
Tweedie path job that agrees with the library (``FireRegressor(loss="tweedie")`` on the rate target / exposure
weighted by the exposure, same settings and seed), scoring that multiplies the rate by a row's exposure, and the
422s: Gamma on a target with zeros (the library's message naming the rows), a bad exposure column."""

import numpy as np
import pandas as pd
import pytest

from solver import FireRegressor
from tests.support.data import DATA

pytestmark = pytest.mark.integration

FOREST = {"n_estimators": 20, "max_depth": 3, "max_features": "sqrt", "random_state": 0}
PATH = {"gamma": 1.1, "fusion_ratio": 0.5, "n_lambdas": 15, "max_rules": 8}
COLUMNS = ["coins", "income", "xage", "female", "educdec", "num", "physlm", "disea", "time", "meddol"]


def amounts() -> pd.DataFrame:
    return pd.read_csv(DATA / "rand_hie_amounts.csv.gz")[COLUMNS].iloc[:800]


def upload(client, frame: pd.DataFrame, query: str):
    return client.post(
        f"/v1/datasets?{query}", content=frame.to_csv(index=False).encode(), headers={"Content-Type": "text/csv"}
    )


def test_a_tweedie_job_with_exposure_agrees_with_the_library_and_scores_amounts(stack):
    frame = amounts()
    client = stack.client
    dataset = upload(client, frame, "target=meddol&task=amount&exposure=time")
    assert dataset.status_code == 201, dataset.text
    assert dataset.json()["exposure"] == "time" and "time" not in dataset.json()["feature_names"]
    submitted = client.post(
        "/v1/jobs",
        json={
            "dataset_id": dataset.json()["id"],
            "forest": FOREST,
            **PATH,
            "power": 1.6,
            "validation": {"fraction": 0.25, "seed": 0},
        },
    )
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["id"]
    stack.wait_for(job_id, ("succeeded",), timeout=180)
    result = client.get(f"/v1/jobs/{job_id}/result").json()
    assert result["parameters"]["path"]["loss"] == "tweedie" and result["parameters"]["path"]["power"] == 1.6

    X, exposure = frame.drop(columns=["meddol", "time"]), frame["time"].to_numpy()
    library = FireRegressor(loss="tweedie", power=1.6, **FOREST, **PATH, validation_fraction=0.25).fit(
        X, frame["meddol"].to_numpy() / exposure, sample_weight=exposure
    )
    assert result["selected"] == library.selected_step_
    for served, fitted in zip(result["steps"], library.path_, strict=True):
        assert {k: v for k, v in served.items() if k != "seconds"} == {
            k: v for k, v in fitted.items() if k != "seconds"
        }
    rules = client.get(f"/v1/jobs/{job_id}/steps/{result['selected']}/rules").json()
    assert rules["rules"] == library.rule_ensemble_.to_dict()

    model = client.post("/v1/models", json={"job_id": job_id, "name": "tweedie-amounts"}).json()
    assert model["exposure"] == "time"
    rows = frame.drop(columns=["meddol"]).iloc[:40].assign(time=np.linspace(0.5, 2.0, 40))
    body = {"dataframe_split": {"columns": list(rows.columns), "data": rows.to_numpy().tolist()}}
    scored = client.post(f"/v1/models/{model['id']}/predict", json=body)
    assert scored.status_code == 200, scored.text
    rates = library.predict(rows.drop(columns=["time"]))
    assert np.allclose(scored.json()["predictions"], rates * rows["time"].to_numpy())
    without = rows.drop(columns=["time"])
    body = {"dataframe_split": {"columns": list(without.columns), "data": without.to_numpy().tolist()}}
    assert np.allclose(client.post(f"/v1/models/{model['id']}/predict", json=body).json()["predictions"], rates)


def test_gamma_on_a_target_with_zeros_is_a_422_naming_the_rows(stack):
    client = stack.client
    dataset = upload(client, amounts(), "target=meddol&task=amount").json()
    response = client.post("/v1/jobs", json={"dataset_id": dataset["id"], "forest": FOREST, **PATH, "loss": "gamma"})
    assert response.status_code == 422, response.text
    error = response.json()["errors"][0]
    assert error["field"].endswith("loss") and "row 0" in error["message"] and "tweedie" in error["fix"]


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda f: f.assign(time=f["time"].where(f.index != 4, 0.0)), "row 4"),
        (lambda f: f.assign(time=f["time"].where(f.index != 6)), "row 6"),
    ],
    ids=["zero exposure", "missing exposure"],
)
def test_a_bad_exposure_column_is_a_422_naming_it_and_the_row(api, change, words):
    response = upload(api.client, change(amounts()), "target=meddol&task=amount&exposure=time")
    assert response.status_code == 422, response.text
    assert any(error["field"].endswith("columns.time") for error in response.json()["errors"])
    assert words in response.text
