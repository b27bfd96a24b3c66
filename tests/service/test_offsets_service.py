"""Offsets through the service: a table uploaded with offset=COLUMN (finite numbers, not a feature), a Poisson job
whose fit is the library's with that offset (``FireRegressor(loss="poisson").fit(X, y, offset=...)``, same
settings and seed) and, with the offset the log of an exposure, the fit of the same table uploaded with that
exposure column instead; scoring that adds a row's offset to its score (exp(score + offset), 0 where missing); the
422s: a non-finite offset naming its row, a loss that takes no offset (Cox, logistic) naming offset."""

import io

import numpy as np
import pandas as pd
import pytest

from solver import FireRegressor

pytestmark = pytest.mark.integration

FOREST = {"n_estimators": 20, "max_depth": 3, "max_features": "sqrt", "random_state": 0}
PATH = {"gamma": 1.1, "fusion_ratio": 0.5, "n_lambdas": 15, "max_rules": 8}
N_ROWS = 600


def counts() -> pd.DataFrame:
    """Poisson counts over an exposure: y ~ Poisson(exposure exp(f(x))); ``lo`` is log(exposure)."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(N_ROWS, 4))
    exposure = rng.uniform(0.2, 3.0, N_ROWS)
    rate = np.exp(0.3 + 0.6 * (x[:, 0] > 0) - 0.5 * (x[:, 1] > 0.5) + 0.2 * x[:, 2])
    frame = pd.DataFrame(x, columns=["a", "b", "c", "d"])
    return frame.assign(expo=exposure, lo=np.log(exposure), visits=rng.poisson(exposure * rate).astype(float))


def upload(client, frame: pd.DataFrame, query: str):
    return client.post(
        f"/v1/datasets?{query}", content=frame.to_csv(index=False).encode(), headers={"Content-Type": "text/csv"}
    )


def run_job(stack, dataset_id: str) -> tuple[str, dict]:
    submitted = stack.client.post(
        "/v1/jobs",
        json={"dataset_id": dataset_id, "forest": FOREST, **PATH, "validation": {"fraction": 0.25, "seed": 0}},
    )
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["id"]
    stack.wait_for(job_id, ("succeeded",), timeout=180)
    return job_id, stack.client.get(f"/v1/jobs/{job_id}/result").json()


def selected_rules(client, job_id: str, result: dict) -> dict:
    return client.get(f"/v1/jobs/{job_id}/steps/{result['selected']}/rules").json()["rules"]


def test_a_poisson_job_with_an_offset_is_the_library_fit_and_the_exposure_fit_and_scores_with_it(stack):
    frame = counts()
    client = stack.client
    dataset = upload(client, frame.drop(columns=["expo"]), "target=visits&task=count&offset=lo")
    assert dataset.status_code == 201, dataset.text
    assert dataset.json()["offset"] == "lo" and "lo" not in dataset.json()["feature_names"]
    job_id, result = run_job(stack, dataset.json()["id"])
    assert result["parameters"]["path"]["loss"] == "poisson"

    # the table as the service holds it: the uploaded CSV read back as the service reads it (correctly rounded)
    table = pd.read_csv(
        io.BytesIO(frame.drop(columns=["expo"]).to_csv(index=False).encode()), float_precision="round_trip"
    )
    X, y, offset = table[["a", "b", "c", "d"]], table["visits"].to_numpy(), table["lo"].to_numpy()
    library = FireRegressor(loss="poisson", **FOREST, **PATH, validation_fraction=0.25).fit(X, y, offset=offset)
    assert result["selected"] == library.selected_step_
    for served, fitted in zip(result["steps"], library.path_, strict=True):
        assert {k: v for k, v in served.items() if k != "seconds"} == {
            k: v for k, v in fitted.items() if k != "seconds"
        }
    rules = selected_rules(client, job_id, result)
    assert rules == library.rule_ensemble_.to_dict()

    # the same table with the exposure exp(lo) instead: the same rules and weights (Poisson: y exp(-lo) = y / e,
    # weights exp(lo) = e, equal up to the rounding of e against exp(lo)); two problems that differ by rounding, each
    # solved to the path's tolerance (1e-4 of lambda_max), agree to about that (CI measured 1.5e-6 relative)
    exposed = upload(client, frame.drop(columns=["lo"]), "target=visits&task=count&exposure=expo")
    assert exposed.status_code == 201, exposed.text
    exposure_job, exposure_result = run_job(stack, exposed.json()["id"])
    assert exposure_result["selected"] == result["selected"]
    exposure_rules = selected_rules(client, exposure_job, exposure_result)
    assert [rule["conditions"] for rule in exposure_rules["rules"]] == [rule["conditions"] for rule in rules["rules"]]
    assert np.allclose(
        [rule["contribution"] for rule in exposure_rules["rules"]],
        [rule["contribution"] for rule in rules["rules"]],
        rtol=1e-4,
        atol=1e-9,
    )
    assert np.isclose(exposure_rules["intercept"], rules["intercept"], rtol=1e-4)

    model = client.post("/v1/models", json={"job_id": job_id, "name": "poisson-offset"}).json()
    assert model["offset"] == "lo" and model["exposure"] is None
    assert model["prediction_formula"].startswith("exp(score + offset)") and "'lo'" in model["prediction_formula"]
    rows = frame.drop(columns=["visits", "expo"]).iloc[:40].assign(lo=np.linspace(-1.0, 1.0, 40))
    body = {"dataframe_split": {"columns": list(rows.columns), "data": rows.to_numpy().tolist()}}
    scored = client.post(f"/v1/models/{model['id']}/predict", json=body)
    assert scored.status_code == 200, scored.text
    rates = library.predict(rows.drop(columns=["lo"]))
    assert np.allclose(scored.json()["predictions"], rates * np.exp(rows["lo"].to_numpy()))
    assert np.allclose(scored.json()["predictions"], library.predict(rows.drop(columns=["lo"]), offset=rows["lo"]))
    data = rows.to_numpy().tolist()
    data[0][-1] = None  # a missing offset counts 0
    version = f"/poisson-offset/versions/{model['version']}"
    invoked = client.post(
        f"/v1/registered-models{version}/invocations",
        json={"dataframe_split": {"columns": list(rows.columns), "data": data}},
    )
    assert invoked.status_code == 200, invoked.text
    expected = rates * np.exp(np.r_[0.0, rows["lo"].to_numpy()[1:]])
    assert np.allclose(invoked.json()["predictions"], expected)
    tensors = [
        {"name": name, "datatype": "FP64", "shape": [len(rows)], "data": rows[name].tolist()} for name in rows.columns
    ]
    tensors[-1]["data"][0] = 0.0  # as the missing offset above
    inferred = client.post(f"/v2/models{version}/infer", json={"inputs": tensors})
    assert inferred.status_code == 200, inferred.text
    assert np.allclose(inferred.json()["outputs"][0]["data"], expected)
    without = rows.drop(columns=["lo"])
    body = {"dataframe_split": {"columns": list(without.columns), "data": without.to_numpy().tolist()}}
    assert np.allclose(client.post(f"/v1/models/{model['id']}/predict", json=body).json()["predictions"], rates)

    exported = client.get(f"/v1/models/{model['id']}/export?format=python")
    assert exported.status_code == 200, exported.text
    assert "exp(score + offset)" in exported.text and "exp(lo)" in exported.text


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda f: f.assign(lo=f["lo"].where(f.index != 5)), "row 5"),
        (lambda f: f.assign(lo=f["lo"].astype(object).where(f.index != 7, "inf")), "row 7"),
        (lambda f: f.assign(lo=f["lo"].astype(object).where(f.index != 2, "x")), "row 2"),
    ],
    ids=["missing offset", "infinite offset", "text offset"],
)
def test_a_non_finite_offset_is_a_422_naming_it_and_the_row(api, change, words):
    response = upload(api.client, change(counts()), "target=visits&task=count&offset=lo")
    assert response.status_code == 422, response.text
    assert any(error["field"].endswith("columns.lo") for error in response.json()["errors"])
    assert words in response.text


def test_an_offset_column_that_is_the_target_or_missing_is_a_422(api):
    same = upload(api.client, counts(), "target=visits&task=count&offset=visits")
    assert same.status_code == 422, same.text
    assert same.json()["errors"][0]["field"].endswith("offset")
    missing = upload(api.client, counts(), "target=visits&task=count&offset=nope")
    assert missing.status_code == 422, missing.text
    assert missing.json()["errors"][0]["field"].endswith("offset")


def survival() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    frame = counts().drop(columns=["visits", "expo"])
    return frame.assign(time=rng.exponential(2.0, N_ROWS) + 0.01, died=rng.integers(0, 2, N_ROWS))


@pytest.mark.parametrize(
    ("table", "query", "loss"),
    [
        (survival, "target=time&task=survival&event=died&offset=lo", "cox"),
        (lambda: counts().assign(visits=lambda f: (f["visits"] > 2).astype(int)), "target=visits&offset=lo", None),
    ],
    ids=["cox", "logistic"],
)
def test_a_loss_that_takes_no_offset_is_a_422_naming_offset(api, table, query, loss):
    dataset = upload(api.client, table(), query)
    assert dataset.status_code == 201, dataset.text
    body = {"dataset_id": dataset.json()["id"], "forest": FOREST, **PATH, **({"loss": loss} if loss else {})}
    response = api.client.post("/v1/jobs", json=body)
    assert response.status_code == 422, response.text
    error = response.json()["errors"][0]
    assert error["field"].endswith("offset") and "'lo'" in error["message"]
    assert "poisson" in response.json()["detail"] and "squared" in response.json()["detail"]
