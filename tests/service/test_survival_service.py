"""Survival (Cox loss) through the service: a table declared task=survival with its time and event columns, a
path job that agrees with the library (``FireSurvival`` on the same table, settings and seed), the survival block
of its result, scoring with ``times`` (curves equal to ``RuleEnsemble.predict_survival``), MLflow's and the Open
Inference Protocol's answers, and the 422s of a bad time or event column, or of times past the last follow-up."""

import numpy as np
import pandas as pd
import pytest

from solver import FireSurvival, RuleEnsemble
from solver.encoding import TableEncoding
from solver.fitting import holdout_split

pytestmark = pytest.mark.integration

FOREST = {"n_estimators": 30, "max_depth": 3, "max_features": "sqrt", "random_state": 0}
PATH = {"gamma": 1.1, "fusion_ratio": 0.5, "n_lambdas": 20, "max_rules": 10}
TIMES = [30.0, 100.0, 300.0]


def veterans() -> pd.DataFrame:
    from sksurv.datasets import load_veterans_lung_cancer

    X, y = load_veterans_lung_cancer()
    frame = X.copy()
    for column in frame.select_dtypes("category"):
        frame[column] = frame[column].astype(str)
    frame["time"] = y["Survival_in_days"]
    frame["event"] = y["Status"].astype(int)
    return frame


def upload(client, frame: pd.DataFrame, query: str):
    return client.post(
        f"/v1/datasets?{query}", content=frame.to_csv(index=False).encode(), headers={"Content-Type": "text/csv"}
    )


@pytest.fixture(scope="module")
def cox_job(stack):
    frame = veterans()
    client = stack.client
    dataset = upload(client, frame, "target=time&task=survival&event=event")
    assert dataset.status_code == 201, dataset.text
    assert dataset.json()["task"] == "survival" and dataset.json()["event"] == "event"
    submitted = client.post(
        "/v1/jobs",
        json={
            "dataset_id": dataset.json()["id"],
            "forest": FOREST,
            **PATH,
            "selection": "cindex",
            "validation": {"fraction": 0.25, "seed": 0},
        },
    )
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["id"]
    stack.wait_for(job_id, ("succeeded",), timeout=180)
    return frame, dataset.json(), job_id


def test_a_cox_job_agrees_with_the_library_and_carries_survival_curves(stack, cox_job):
    frame, dataset, job_id = cox_job
    client = stack.client
    X = frame.drop(columns=["time", "event"])
    y = np.where(frame["event"] == 1, frame["time"], -frame["time"])
    library = FireSurvival(**FOREST, **PATH, selection="cindex", validation_fraction=0.25).fit(X, y)

    result = client.get(f"/v1/jobs/{job_id}/result").json()
    assert result["parameters"]["path"]["loss"] == "cox"
    # no penalty asked for: the Cox loss's own, named in the job's settings, as the library's default takes it
    assert result["parameters"]["path"]["penalty"] == "l1" == library.path_spec(0).penalty_used()
    assert result["selected"] == library.selected_step_
    for served, fitted in zip(result["steps"], library.path_, strict=True):
        assert {k: v for k, v in served.items() if k != "seconds"} == {
            k: v for k, v in fitted.items() if k != "seconds"
        }
    assert result["steps"][result["selected"]]["val_cindex"] is not None
    rules = client.get(f"/v1/jobs/{job_id}/steps/{result['selected']}/rules").json()
    assert rules["rules"] == library.rule_ensemble_.to_dict()
    assert rules["rules"]["baseline_hazard"] is not None

    survival = result["survival"]
    assert len(survival["times"]) == len(survival["kaplan_meier"]) == len(survival["model"]) == 50
    assert survival["kaplan_meier"][0] == 1.0 and survival["model"][0] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(survival["model"], survival["model"][1:]))
    # every step's mean curve over the validation rows (any step promoted has its own), the selected one's the model's;
    # the grid ends at the validation rows' last time or the training rows' last follow-up, where the curves end
    train_rows, val_rows = holdout_split(len(y), 0.25, 0)
    last = np.abs(y[train_rows]).max()
    assert rules["rules"]["baseline_hazard"]["times"][-1] == last
    assert survival["times"][-1] == min(np.abs(y[val_rows]).max(), last)
    assert len(survival["steps"]) == len(result["steps"]) and survival["steps"][result["selected"]] == survival["model"]
    X_val = TableEncoding.from_dict(dataset["columns"]).encode_frame(X.iloc[val_rows])
    for step in {1, len(result["steps"]) // 2, len(result["steps"]) - 1}:
        step_rules = client.get(f"/v1/jobs/{job_id}/steps/{step}/rules").json()["rules"]
        expected = RuleEnsemble.from_dict(step_rules).predict_survival(X_val, survival["times"]).mean(axis=0)
        np.testing.assert_allclose(survival["steps"][step], expected, rtol=1e-12)
    job = client.get(f"/v1/jobs/{job_id}").json()
    assert job["summary"]["val_cindex"] == result["steps"][result["selected"]]["val_cindex"]


def test_a_polished_cox_job_is_the_librarys_polished_fit(stack):
    """polish=true on a Cox job is the refit of each step's rules by the partial likelihood (it was a Poisson
    regression of the signed times, whose models came out empty): the job's steps, selection and rules are
    ``FireSurvival(polish=True)``'s on the same table, settings and seed, and its rules are not empty."""
    frame = veterans()
    client = stack.client
    dataset = upload(client, frame, "target=time&task=survival&event=event")
    assert dataset.status_code in (200, 201), dataset.text  # 200: the same table, stored by an earlier test
    body = {"dataset_id": dataset.json()["id"], "forest": FOREST, **PATH, "polish": True}
    submitted = client.post("/v1/jobs", json={**body, "validation": {"fraction": 0.25, "seed": 0}})
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["id"]
    stack.wait_for(job_id, ("succeeded",), timeout=120)
    X = frame.drop(columns=["time", "event"])
    y = np.where(frame["event"] == 1, frame["time"], -frame["time"])
    library = FireSurvival(**FOREST, **PATH, polish=True, validation_fraction=0.25).fit(X, y)

    result = client.get(f"/v1/jobs/{job_id}/result").json()
    assert result["parameters"]["path"]["polish"] is True
    assert result["selected"] == library.selected_step_
    for served, fitted in zip(result["steps"], library.path_, strict=True):
        assert {k: v for k, v in served.items() if k != "seconds"} == {
            k: v for k, v in fitted.items() if k != "seconds"
        }
    rules = client.get(f"/v1/jobs/{job_id}/steps/{result['selected']}/rules").json()["rules"]
    assert rules == library.rule_ensemble_.to_dict()
    assert library.rule_ensemble_.n_terms > 0


def test_scoring_a_cox_model_gives_hazard_ratios_and_survival_curves(stack, cox_job):
    frame, _, job_id = cox_job
    client = stack.client
    model = client.post("/v1/models", json={"job_id": job_id, "name": "cox-veterans"})
    assert model.status_code == 201, model.text
    model_id = model.json()["id"]
    rules = RuleEnsemble.from_dict(client.get(f"/v1/models/{model_id}").json()["ensemble"])
    rows = frame.drop(columns=["time", "event"]).iloc[::9]
    body = {"dataframe_split": {"columns": list(rows.columns), "data": rows.to_numpy().tolist()}}
    encoded = _encode(client, model_id, rows)

    plain = client.post(f"/v1/models/{model_id}/predict", json=body).json()
    assert np.allclose(plain["predictions"], np.exp(rules.predict(encoded)))
    assert "survival" not in plain

    curves = client.post(f"/v1/models/{model_id}/predict", json={**body, "params": {"times": TIMES}})
    assert curves.status_code == 200, curves.text
    assert curves.json()["times"] == TIMES
    assert np.allclose(curves.json()["survival"], rules.predict_survival(encoded, TIMES))

    mlflow = client.post(
        "/v1/registered-models/cox-veterans/invocations", json={**body, "params": {"times": TIMES}}
    ).json()
    assert np.allclose(mlflow["predictions"], plain["predictions"])
    assert np.allclose(mlflow["survival"], curves.json()["survival"])

    inputs = [
        {
            "name": name,
            "shape": [len(rows)],
            "datatype": "FP64" if rows[name].dtype.kind == "f" else "BYTES",
            "data": rows[name].tolist(),
        }
        for name in rows.columns
    ]
    oip = client.post("/v2/models/cox-veterans/infer", json={"inputs": inputs, "parameters": {"times": TIMES}})
    assert oip.status_code == 200, oip.text
    outputs = {output["name"]: output for output in oip.json()["outputs"]}
    assert np.allclose(outputs["predictions"]["data"], plain["predictions"])
    assert outputs["survival"]["shape"] == [len(rows), len(TIMES)]
    assert np.allclose(np.reshape(outputs["survival"]["data"], (len(rows), len(TIMES))), curves.json()["survival"])

    wrong = client.post(f"/v1/models/{model_id}/predict", json={**body, "params": {"times": [-1.0]}})
    assert wrong.status_code == 422 and "times" in wrong.text

    # past the training rows' last follow-up time, no curve (the library raises there too): a 422 naming the field;
    # at it, the curves the library gives
    last = float(rules.baseline_hazard[0][-1])
    assert last in set(frame["time"]) and last < frame["time"].max() * 1.0001  # a training row's (the split's) last
    at_end = client.post(f"/v1/models/{model_id}/predict", json={**body, "params": {"times": [last]}})
    assert at_end.status_code == 200 and np.allclose(at_end.json()["survival"], rules.predict_survival(encoded, [last]))
    with pytest.raises(ValueError, match="last follow-up time"):
        rules.predict_survival(encoded, [last + 1])
    past = client.post(f"/v1/models/{model_id}/predict", json={**body, "params": {"times": [30.0, last + 1]}})
    assert past.status_code == 422, past.text
    (fault,) = past.json()["errors"]
    assert fault["field"] == "body.params.times" and f"{last + 1:g} is outside [0, {last:g}]" in fault["message"]
    assert f"ask for times from 0 to {last:g}" in fault["fix"]
    batch = client.post(
        f"/v1/models/{model_id}/batch?times=30&times={last + 1}",
        files={"file": ("rows.csv", rows.to_csv(index=False).encode(), "text/csv")},
    )
    assert batch.status_code == 422 and batch.json()["errors"][0]["field"] == "query.times", batch.text


def _encode(client, model_id, rows: pd.DataFrame) -> np.ndarray:
    from solver.encoding import TableEncoding

    dataset_id = client.get(f"/v1/models/{model_id}").json()["provenance"]["dataset_id"]
    encoding = TableEncoding.from_dict(client.get(f"/v1/datasets/{dataset_id}").json()["columns"])
    return encoding.encode_frame(rows)


@pytest.mark.parametrize(
    ("change", "query", "field", "words"),
    [
        (lambda f: f.assign(time=f["time"].where(f.index != 3, 0)), "event=event", "columns.time", "row 3"),
        (
            lambda f: f.assign(event=f["event"].astype(str).where(f.index != 5, "dead")),
            "event=event",
            "query.event",  # the request's field, as a form shows it at its event picker
            "pick the event column",
        ),
        (lambda f: f, "", "event", "event=COLUMN"),
        (lambda f: f, "event=status", "event", "not a column"),
    ],
    ids=["non-positive time", "text event", "no event column", "unknown event column"],
)
def test_bad_survival_tables_are_422s_naming_the_column(api, change, query, field, words):
    response = upload(api.client, change(veterans()), f"target=time&task=survival&{query}")
    assert response.status_code == 422, response.text
    errors = response.json()["errors"]
    assert any(error["field"].endswith(field) for error in errors), errors
    assert words in response.text


def test_a_gamma_grid_under_the_cox_losss_l1_default_is_a_422_asking_for_mcp(api):
    """gamma is MCP's concavity: under the Cox loss's default penalty (l1) every cell of a gamma grid would fit the same
    path, so the grid is refused at its field, saying what to change."""
    dataset = upload(api.client, veterans(), "target=time&task=survival&event=event").json()
    grid = {"gamma": [1.1, 3.0], "fusion_ratio": [0.5]}
    response = api.client.post("/v1/jobs", json={"dataset_id": dataset["id"], "forest": FOREST, "grid": grid})
    assert response.status_code == 422, response.text
    (fault,) = [error for error in response.json()["errors"] if error["field"].endswith("grid.gamma")]
    assert "l1 (the cox loss's default)" in response.text and "set penalty to mcp" in response.text, fault


def test_the_losses_are_listed_as_the_library_registers_them(api):
    """GET /v1/losses: every registered loss in the registry's order with what the dashboard's form reads (the task it
    is made for, the selections it allows), so that no client keeps its own copy of them."""
    from solver.losses import LOSSES

    response = api.client.get("/v1/losses")
    assert response.status_code == 200, response.text
    listed = response.json()
    assert [loss["name"] for loss in listed] == list(LOSSES)
    for loss in listed:
        registered = LOSSES[loss["name"]]
        assert loss["task"] == registered.task and loss["selections"] == list(registered.selections)
    assert next(loss for loss in listed if loss["task"] == "survival")["name"] == "cox"
    assert "cindex" in next(loss for loss in listed if loss["name"] == "cox")["selections"]
