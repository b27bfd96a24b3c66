"""The service and the library agree: the same table, forest settings, seed and path specification give the
same path, the same selected step, identical rules and identical predictions.

Library side: ``FireRegressor(...).fit(frame_without_target, y)``. Service side: upload the CSV, a path job
that trains its forest from the same settings, then the job's result, its selected step's rules and a
promoted model's predictions over HTTP.
"""

import gzip
import io

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_diabetes

from solver import FireRegressor
from tests.support.data import ABALONE

pytestmark = pytest.mark.integration

FOREST = {"n_estimators": 40, "max_depth": 3, "max_features": "sqrt", "random_state": 0}
PATH = {"penalty": "mcp", "gamma": 1.1, "fusion_ratio": 0.5, "n_lambdas": 25, "max_rules": 12}


def abalone_table() -> tuple[bytes, str]:
    return gzip.decompress(ABALONE.read_bytes()), "rings"


def diabetes_table() -> tuple[bytes, str]:
    return load_diabetes(as_frame=True).frame.to_csv(index=False).encode(), "target"


@pytest.mark.parametrize("table", [abalone_table, diabetes_table], ids=["abalone (text column Sex)", "diabetes"])
def test_service_and_library_select_the_same_step_and_rules(stack, table):
    data, target = table()
    frame = pd.read_csv(io.BytesIO(data), float_precision="round_trip")  # its numbers as the service reads them
    X, y = frame.drop(columns=[target]), frame[target]
    library = FireRegressor(**FOREST, **PATH).fit(X, y)

    client = stack.client
    dataset = client.post(f"/v1/datasets?target={target}", content=data, headers={"Content-Type": "text/csv"}).json()
    submitted = client.post(
        "/v1/jobs",
        json={
            "dataset_id": dataset["id"],
            "forest": FOREST,
            **PATH,
            "validation": {"fraction": library.validation_fraction, "seed": FOREST["random_state"]},
        },
    )
    assert submitted.status_code == 202, submitted.text
    stack.wait_for(submitted.json()["id"], ("succeeded",), timeout=120)
    job_id = submitted.json()["id"]
    result = client.get(f"/v1/jobs/{job_id}/result").json()

    assert result["selected"] == library.selected_step_ and library.selected_["n_terms"] > 0
    assert len(result["steps"]) == len(library.path_)
    for served, fitted in zip(result["steps"], library.path_):
        assert {k: v for k, v in served.items() if k != "seconds"} == {
            k: v for k, v in fitted.items() if k != "seconds"
        }

    rules = client.get(f"/v1/jobs/{job_id}/steps/{result['selected']}/rules").json()
    assert rules["rules"] == library.rule_ensemble_.to_dict()

    model = client.post("/v1/models", json={"job_id": job_id, "name": f"agreement-{target}"}).json()
    rows = X.iloc[::7]
    scored = client.post(
        f"/v1/models/{model['id']}/predict",
        json={"dataframe_split": {"columns": list(rows.columns), "data": rows.to_numpy().tolist()}},
    )
    assert scored.status_code == 200, scored.text
    assert np.array_equal(scored.json()["predictions"], library.predict(rows))
