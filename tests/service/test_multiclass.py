"""K classes and counts through the service (issue 17): a text-labelled seven-class CSV and a count CSV go in
through the API (upload, job, result, promotion, scoring with probabilities, rates and explanations per class,
SQL and Python exports), and the service agrees with the library (``FireClassifier`` and
``FireRegressor(loss="poisson")``) on the same data, settings and seed. Tasks and losses that do not fit, too
many classes and negative counts are 422s naming the field and the fix.

The tables are synthesized here (a few hundred rows, a text column and missing values), small enough that the
whole module runs in well under a minute on two workers.
"""

import sqlite3

import numpy as np
import pandas as pd
import pytest

from solver import FireClassifier, FireRegressor
from tests.support.problems import assert_problem
from tests.support.service import ServiceStack, make_settings
from tests.support.synthetic import GRADES, grades_table, visits_table

pytestmark = pytest.mark.integration

FOREST = {"n_estimators": 20, "max_depth": 3, "max_features": "sqrt", "random_state": 0}
# max_iter bounds the multinomial solver's passes per step (some steps of this table need thousands to converge)
PATH = {"penalty": "mcp", "gamma": 1.1, "fusion_ratio": 0.5, "n_lambdas": 15, "max_rules": 10, "max_iter": 300}
VALIDATION = {"fraction": 0.2, "seed": FOREST["random_state"]}


def csv_bytes(frame: pd.DataFrame) -> bytes:
    return frame.to_csv(index=False).encode()


def upload(client, data: bytes, target: str, **query):
    params = "".join(f"&{name}={value}" for name, value in query.items())
    return client.post(f"/v1/datasets?target={target}{params}", content=data, headers={"Content-Type": "text/csv"})


def rows_body(rows: pd.DataFrame) -> dict:
    values = rows.astype(object).where(rows.notna(), None).to_numpy().tolist()
    return {"dataframe_split": {"columns": list(rows.columns), "data": values}}


def run_job(stack, dataset_id: str, **extra) -> tuple[str, dict]:
    """Submit a path job that trains its forest from FOREST; (job id, its result)."""
    body = {"dataset_id": dataset_id, "forest": FOREST, **PATH, "validation": VALIDATION, **extra}
    submitted = stack.client.post("/v1/jobs", json=body)
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["id"]
    stack.wait_for(job_id, ("succeeded",), timeout=180)
    return job_id, stack.client.get(f"/v1/jobs/{job_id}/result").json()


def assert_same_path(served_steps: list[dict], library_steps: list[dict]) -> None:
    assert len(served_steps) == len(library_steps)
    for served, fitted in zip(served_steps, library_steps, strict=True):
        assert {k: v for k, v in served.items() if k != "seconds"} == {
            k: v for k, v in fitted.items() if k != "seconds"
        }


def exported(client, model_id: str, format: str) -> str:
    response = client.get(f"/v1/models/{model_id}/export?format={format}")
    assert response.status_code == 200, response.text
    return response.text


def sql_rows(code: str, rows: pd.DataFrame) -> list[tuple]:
    """The exported SQL (its comment lines dropped) selected over the rows in SQLite (NaN stored as NULL)."""
    expression = "\n".join(line for line in code.splitlines() if not line.startswith("--"))
    with sqlite3.connect(":memory:") as connection:
        rows.to_sql("rows", connection, index=False)
        cursor = connection.execute(f"SELECT {expression} FROM rows ORDER BY rowid")
        names = [column[0] for column in cursor.description]
        return [tuple(names), *cursor.fetchall()]


def python_outputs(code: str, rows: pd.DataFrame) -> list:
    namespace: dict = {}
    exec(compile(code, "<export>", "exec"), namespace)
    return [namespace["predict"](row) for row in rows.astype(object).where(rows.notna(), None).to_dict("records")]


def test_a_seven_class_text_table_goes_through_the_api_and_agrees_with_the_library(stack):
    frame = grades_table()
    X, y = frame.drop(columns=["grade"]), frame["grade"]
    library = FireClassifier(**FOREST, **PATH, validation_fraction=VALIDATION["fraction"]).fit(X, y)
    assert list(library.classes_) == GRADES and library.selected_["n_terms"] > 0

    client = stack.client
    response = upload(client, csv_bytes(frame), "grade")
    assert response.status_code == 201, response.text
    dataset = response.json()
    assert dataset["task"] == "multiclass" and dataset["classes"] == GRADES
    assert dataset["class_counts"] == [int((y == grade).sum()) for grade in GRADES]

    job_id, result = run_job(stack, dataset["id"])
    job = client.get(f"/v1/jobs/{job_id}").json()
    assert job["spec"]["path"]["loss"] == "multinomial"  # from the dataset's task
    summary, progress = job["summary"], job["progress"]
    assert 0.5 < summary["val_auc"] <= 1 and 0 <= summary["val_accuracy"] <= 1 and summary["val_mae"] is None
    assert {"train_auc", "val_auc", "train_accuracy", "val_accuracy", "best"} <= set(progress)
    assert "train_mae" not in progress  # the fields that do not apply are not sent
    forest = client.get(f"/v1/forests/{result['forest_id']}").json()
    assert forest["source"]["loss"] == "multinomial" and forest["n_outputs"] == len(GRADES)  # a 7-class forest

    assert result["classes"] == GRADES and result["selected"] == library.selected_step_
    assert_same_path(result["steps"], library.path_)
    selected = result["steps"][result["selected"]]
    assert selected["val_loss"] > 0 and 0.5 < selected["val_auc"] <= 1  # log loss, macro one-vs-rest AUC
    rules = client.get(f"/v1/jobs/{job_id}/steps/{result['selected']}/rules").json()
    assert rules["rules"] == library.rule_ensemble_.to_dict()
    assert rules["rules"]["link"] == "softmax" and rules["rules"]["classes"] == GRADES
    assert all(len(rule["contribution"]) == len(GRADES) for rule in rules["rules"]["rules"])

    promoted = client.post("/v1/models", json={"job_id": job_id, "name": "grades-multiclass"})
    assert promoted.status_code == 201, promoted.text
    model = promoted.json()
    assert model["loss"] == "multinomial" and model["classes"] == GRADES
    # the rule ensemble's intercept (it holds each linear term's -coefficient * centre; the estimator's
    # intercept_ is the path's, paired with coef_)
    assert model["intercept"] == pytest.approx(list(library.rule_ensemble_.intercept), abs=0)
    assert model["metrics"]["val_accuracy"] == selected["val_accuracy"]
    assert model["metrics"]["val_auc"] == selected["val_auc"]

    rows = X.iloc[::5]
    scored = client.post(f"/v1/models/{model['id']}/predict?explain=true", json=rows_body(rows))
    assert scored.status_code == 200, scored.text
    answer = scored.json()
    assert answer["classes"] == GRADES
    assert answer["predictions"] == library.predict(rows).tolist()
    probabilities = np.array(answer["probabilities"])
    assert probabilities.shape == (len(rows), len(GRADES))
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(probabilities, library.predict_proba(rows), rtol=0, atol=1e-12)
    scores = library.decision_function(rows)
    fired = library.explain(rows)  # the rules that fired, then every linear term ({"linear": k}: no id)
    assert [[entry["id"] for entry in row if "id" in entry] for row in fired] == answer["explanations"]
    linear = [[entry["contribution"] for entry in row if "linear" in entry] for row in fired]
    assert answer.get("linear_contributions") == (linear if library.rule_ensemble_.linear else None)
    for contributions, terms, score in zip(answer["contributions"], linear, scores):
        assert all(len(amounts) == len(GRADES) for amounts in contributions + terms)
        total = np.sum(contributions + terms, axis=0) if contributions + terms else np.zeros(len(GRADES))
        np.testing.assert_allclose(total, score - np.array(model["intercept"]), rtol=0, atol=1e-9)
    assert any(answer["contributions"])  # some row has a rule that fired

    sql = exported(client, model["id"], "sql")
    assert sql.startswith("-- FIRE model 'grades-multiclass' v1")
    header, *values = sql_rows(sql, rows)
    assert list(header) == GRADES  # one column per class, named by its label
    np.testing.assert_allclose(np.array(values), probabilities, rtol=0, atol=1e-12)
    python = client.get(f"/v1/models/{model['id']}/export?format=python")
    assert python.headers["x-fire-output"] == "probabilities of the classes of 'grade'"
    outputs = python_outputs(python.text, rows)
    assert all(list(output) == GRADES for output in outputs)  # {class: probability} in class order
    np.testing.assert_allclose([list(output.values()) for output in outputs], probabilities, rtol=0, atol=1e-12)
    assert [max(output, key=output.get) for output in outputs] == answer["predictions"]


def test_a_count_table_goes_through_the_api_and_agrees_with_the_library(stack):
    frame = visits_table()
    X, y = frame.drop(columns=["visits"]), frame["visits"]
    library = FireRegressor(**FOREST, **PATH, loss="poisson", validation_fraction=VALIDATION["fraction"]).fit(X, y)
    assert library.selected_["n_terms"] > 0

    client = stack.client
    detected = upload(client, csv_bytes(frame), "visits").json()
    assert detected["task"] == "regression"  # a count is declared, never guessed
    response = upload(client, csv_bytes(frame), "visits", task="count")
    assert response.status_code == 201, response.text
    dataset = response.json()
    assert dataset["task"] == "count" and dataset["classes"] is None and dataset["id"] != detected["id"]

    job_id, result = run_job(stack, dataset["id"])
    job = client.get(f"/v1/jobs/{job_id}").json()
    assert job["spec"]["path"]["loss"] == "poisson"
    assert job["summary"]["val_mae"] > 0 and job["summary"]["val_auc"] is None
    assert {"train_mae", "val_mae"} <= set(job["progress"]) and "val_auc" not in job["progress"]
    assert result["classes"] is None and result["selected"] == library.selected_step_
    assert_same_path(result["steps"], library.path_)
    selected = result["steps"][result["selected"]]
    assert selected["val_loss"] > 0 and selected["val_mae"] > 0  # mean Poisson deviance, MAE of the rate
    rules = client.get(f"/v1/jobs/{job_id}/steps/{result['selected']}/rules").json()
    assert rules["rules"] == library.rule_ensemble_.to_dict()
    assert rules["rules"]["link"] == "log" and "base rate" in rules["text"]

    model = client.post("/v1/models", json={"job_id": job_id, "name": "visits-count"}).json()
    assert model["loss"] == "poisson" and model["classes"] is None
    assert model["metrics"]["val_mae"] == selected["val_mae"] and model["metrics"]["train_mae"] is not None

    rows = X.iloc[::6]
    answer = client.post(f"/v1/models/{model['id']}/predict?explain=true", json=rows_body(rows)).json()
    assert "probabilities" not in answer and "classes" not in answer
    rates = np.array(answer["predictions"])
    assert (rates > 0).all()  # a rate is never below zero, whatever the rules add
    np.testing.assert_allclose(rates, library.predict(rows), rtol=1e-15, atol=0)
    fired = library.explain(rows)  # the rules that fired, then every linear term
    assert [[entry["id"] for entry in row if "id" in entry] for row in fired] == answer["explanations"]
    linear = [[entry["contribution"] for entry in row if "linear" in entry] for row in fired]
    assert answer.get("linear_contributions") == (linear if library.rule_ensemble_.linear else None)
    for contributions, terms, rate in zip(answer["contributions"], linear, rates):
        assert sum(contributions) + sum(terms) == pytest.approx(np.log(rate) - model["intercept"], abs=1e-9)

    sql = exported(client, model["id"], "sql")
    _header, *values = sql_rows(sql, rows)
    np.testing.assert_allclose([value for (value,) in values], rates, rtol=1e-12, atol=0)
    python = client.get(f"/v1/models/{model['id']}/export?format=python")
    assert python.headers["x-fire-output"] == "rate of 'visits'"
    np.testing.assert_allclose(python_outputs(python.text, rows), rates, rtol=1e-12, atol=0)


def test_tasks_and_losses_that_do_not_fit_are_422s_naming_the_field(stack):
    client = stack.client
    grades = csv_bytes(grades_table(n_rows=120))
    visits = visits_table(n_rows=120)

    # a declared task the target cannot be
    assert_problem(upload(client, grades, "grade", task="classification"), 422, "columns.grade")
    two = visits.assign(flag=np.where(visits["age"] > 50, "old", "young"))
    assert_problem(upload(client, csv_bytes(two), "flag", task="multiclass"), 422, "columns.flag")
    bad_task = assert_problem(upload(client, grades, "grade", task="ordinal"), 422, "task")
    assert [error["field"] for error in bad_task["errors"]] == ["query.task"]

    # counts are never negative: every such row is named
    negative = visits.assign(visits=visits["visits"] - 2)
    problem = assert_problem(upload(client, csv_bytes(negative), "visits", task="count"), 422, "columns.visits")
    assert any("negative counts" in error["message"] for error in problem["errors"])
    assert "task=regression" in problem["errors"][-1]["fix"]
    zeros = assert_problem(upload(client, csv_bytes(visits.assign(visits=0)), "visits", task="count"), 422, "visits")
    assert [error["message"] for error in zeros["errors"]] == ["every count is 0"]

    # integer class codes are multiclass when declared
    codes = visits.assign(chronic=visits["chronic"].astype(int))
    declared = upload(client, csv_bytes(codes), "chronic", task="multiclass").json()
    assert declared["task"] == "multiclass" and declared["classes"] == [0, 1, 2, 3, 4]

    # a loss the dataset's task does not allow: the problem names body.loss
    multiclass = upload(client, grades, "grade").json()
    count = upload(client, csv_bytes(visits), "visits", task="count").json()
    signed = upload(client, csv_bytes(negative), "visits").json()  # regression: it goes below zero
    for dataset, loss in ((multiclass, "squared"), (multiclass, "logistic"), (count, "logistic"), (signed, "poisson")):
        body = {"dataset_id": dataset["id"], "forest": FOREST, "loss": loss, **PATH}
        problem = assert_problem(client.post("/v1/jobs", json=body), 422, "loss")
        assert [error["field"] for error in problem["errors"]] == ["body.loss"], problem
    # a setting that the task's loss does not allow: named at its own field
    body = {"dataset_id": multiclass["id"], "forest": FOREST, "polish": True, **PATH}
    problem = assert_problem(client.post("/v1/jobs", json=body), 422, "polish")
    assert [error["field"] for error in problem["errors"]] == ["body.polish"]


def test_more_text_labels_than_fire_max_classes_is_a_422_naming_the_setting_and_the_target():
    with ServiceStack(make_settings(max_classes=4), n_workers=0) as api:
        frame = grades_table(n_rows=100)
        problem = assert_problem(upload(api.client, csv_bytes(frame), "grade"), 422, "columns.grade")
        assert "FIRE_MAX_CLASSES" in problem["detail"] and "'grade'" in problem["detail"]
        assert "FIRE_MAX_CLASSES" in problem["errors"][0]["fix"]
        declared = assert_problem(upload(api.client, csv_bytes(frame), "grade", task="multiclass"), 422, "grade")
        assert "FIRE_MAX_CLASSES" in declared["detail"]
        few = frame[frame["grade"].isin(GRADES[:4])]
        accepted = upload(api.client, csv_bytes(few), "grade")
        assert accepted.status_code == 201 and accepted.json()["classes"] == GRADES[:4]


def test_a_class_whose_rows_are_all_held_out_fails_the_job_naming_it(stack):
    from solver.fitting import holdout_split

    frame = grades_table(n_rows=150)
    _, validation_rows = holdout_split(len(frame), VALIDATION["fraction"], VALIDATION["seed"])
    frame.loc[validation_rows[0], "grade"] = "Z"  # a class of one row, which the holdout takes
    dataset = upload(stack.client, csv_bytes(frame), "grade").json()
    assert dataset["classes"][-1] == "Z"
    body = {"dataset_id": dataset["id"], "forest": {**FOREST, "n_estimators": 5}, **PATH, "validation": VALIDATION}
    submitted = stack.client.post("/v1/jobs", json=body)
    assert submitted.status_code == 202, submitted.text
    job = stack.wait_for(submitted.json()["id"], ("failed",), timeout=120)
    assert job["error"]["type"] == "ValueError" and "no training row has class Z" in job["error"]["detail"]
    assert "a smaller validation_fraction or another random_state" in job["error"]["detail"]  # fit_rules' check


def test_a_grid_on_a_multiclass_dataset_keeps_the_best_cell_and_its_classes(stack):
    dataset = upload(stack.client, csv_bytes(grades_table(n_rows=300)), "grade").json()
    body = {
        "dataset_id": dataset["id"],
        "forest": {**FOREST, "n_estimators": 8},
        **PATH,
        "n_lambdas": 8,
        "validation": VALIDATION,
        "grid": {"gamma": [1.1, 3.0], "fusion_ratio": [0.5]},
    }
    submitted = stack.client.post("/v1/jobs", json=body)
    assert submitted.status_code == 202, submitted.text
    job = stack.wait_for(submitted.json()["id"], ("succeeded",), timeout=180)
    assert job["summary"]["val_accuracy"] is not None and job["summary"]["val_auc"] is not None
    result = stack.client.get(f"/v1/jobs/{job['id']}/result").json()
    assert result["kind"] == "grid" and result["classes"] == GRADES
    assert all(cell["summary"]["val_auc"] is not None for cell in result["grid"])
    model = stack.client.post("/v1/models", json={"job_id": job["id"], "name": "grades-grid"}).json()
    assert model["classes"] == GRADES and len(model["intercept"]) == len(GRADES)
