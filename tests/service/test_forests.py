"""Forest uploads: safe formats only, features checked against the dataset, pickles refused."""

import json
import pickle

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestRegressor

from solver import TreeEnsemble
from tests.support.data import abalone_frame
from tests.support.problems import assert_problem

pytestmark = pytest.mark.integration


def fitted_forest(meta: dict, n_estimators: int = 5) -> RandomForestRegressor:
    frame = abalone_frame()
    X = pd.get_dummies(frame.drop(columns=["rings"]), columns=["Sex"], prefix_sep="=", dtype=float)
    X = X[meta["feature_names"]]
    return RandomForestRegressor(n_estimators=n_estimators, max_depth=3, random_state=0).fit(X, frame["rings"])


def test_fire_json_upload_checks_features_and_round_trips(api):
    dataset = api.upload_dataset()
    forest = fitted_forest(dataset)
    document = TreeEnsemble.from_sklearn(forest).to_dict()
    response = api.client.post(f"/v1/forests?dataset_id={dataset['id']}", json=document)
    assert response.status_code == 201, response.text
    meta = response.json()
    assert meta["n_trees"] == 5 and meta["feature_names"] == dataset["feature_names"]
    assert response.headers["Location"] == f"/v1/forests/{meta['id']}"
    stored = api.client.app.state.core.forests.load(meta["id"])
    X = np.asarray(forest.feature_names_in_.size * [0.5])[None, :]
    assert np.allclose(stored.predict(X), forest.predict(pd.DataFrame(X, columns=forest.feature_names_in_)))
    again = api.client.post("/v1/forests", files={"file": ("forest.json", json.dumps(document).encode())})
    assert again.status_code == 200 and again.json()["id"] == meta["id"]


def test_forest_with_other_features_is_refused_and_not_stored(api):
    dataset = api.upload_dataset()
    document = TreeEnsemble.from_sklearn(fitted_forest(dataset)).to_dict()
    document["feature_names"] = [name.replace("Sex=", "Gender=") for name in document["feature_names"]]
    before = len(api.client.get("/v1/forests").json())
    body = assert_problem(
        api.client.post(f"/v1/forests?dataset_id={dataset['id']}", json=document), 422, "query.dataset_id"
    )
    assert any("Sex=F" in error["message"] for error in body["errors"])
    assert any("Gender=F" in error["message"] for error in body["errors"])
    assert len(api.client.get("/v1/forests").json()) == before


def test_pickles_and_garbage_are_refused(api):
    dataset = api.upload_dataset()
    forest = fitted_forest(dataset, n_estimators=2)
    assert_problem(
        api.client.post(
            "/v1/forests", content=pickle.dumps(forest), headers={"Content-Type": "application/octet-stream"}
        ),
        415,
    )
    assert_problem(api.client.post("/v1/forests", files={"file": ("model.pkl", pickle.dumps(forest))}), 415)
    assert_problem(api.client.post("/v1/forests", json={"format": "fire-forest", "trees": "no"}), 422)
    assert_problem(api.client.get("/v1/forests/fo_missing"), 404, "path.forest_id")
    assert_problem(
        api.client.post("/v1/forests/train", json={"dataset_id": dataset["id"], "n_estimators": 0}), 422, "n_estimators"
    )
    assert_problem(api.client.post("/v1/forests/train", json={"dataset_id": "ds_missing"}), 404)
    assert_problem(
        api.client.post("/v1/forests/train", json={"dataset_id": dataset["id"], "max_features": 99}),
        422,
        "max_features",
    )


def test_trees_of_a_forest_are_fire_json_of_those_trees_only(api):
    dataset = api.upload_dataset()
    document = TreeEnsemble.from_sklearn(fitted_forest(dataset)).to_dict()
    forest_id = api.client.post("/v1/forests", json=document).json()["id"]
    response = api.client.get(f"/v1/forests/{forest_id}/trees?tree=3&tree=1&tree=3")
    assert response.status_code == 200, response.text
    trees = response.json()
    assert trees["n_trees"] == 5 and trees["tree_indices"] == [3, 1]
    assert trees["forest"]["trees"] == [document["trees"][3], document["trees"][1]]
    assert TreeEnsemble.from_dict(trees["forest"]).n_trees == 2
    assert_problem(api.client.get(f"/v1/forests/{forest_id}/trees?tree=5"), 422, "query.tree")
    assert_problem(api.client.get(f"/v1/forests/{forest_id}/trees"), 422, "query.tree")
    assert_problem(api.client.get("/v1/forests/fo_missing/trees?tree=0"), 404, "path.forest_id")
