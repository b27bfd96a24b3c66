"""Issue 39, item 5, through the API: a path job's result and the model promoted from it carry the library's
``rule_step`` (the best step with a rule beside the selected step, its cost and the reason in words), equal to the
library's own fit of the same table and settings; OpenAPI documents each of its fields."""

import io

import pandas as pd
import pytest
from sklearn.datasets import load_diabetes

from solver import FireRegressor

pytestmark = pytest.mark.integration

FOREST = {"random_state": 0}  # the library's default forest, seeded as the estimator seeds it
BUDGET = 14


def test_a_path_job_and_its_model_name_the_best_step_with_a_rule_as_the_library_does(stack):
    data = load_diabetes(as_frame=True).frame.to_csv(index=False).encode()
    frame = pd.read_csv(io.BytesIO(data), float_precision="round_trip")  # its numbers as the service reads them
    library = FireRegressor(max_rules=BUDGET, **FOREST).fit(frame.drop(columns=["target"]), frame["target"])

    client = stack.client
    dataset = client.post("/v1/datasets?target=target", content=data, headers={"Content-Type": "text/csv"}).json()
    body = {
        "dataset_id": dataset["id"],
        "forest": FOREST,
        "max_rules": BUDGET,
        "validation": {"fraction": 0.2, "seed": 0},
    }
    submitted = client.post("/v1/jobs", json=body)
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["id"]
    stack.wait_for(job_id, ("succeeded",), timeout=120)
    result = client.get(f"/v1/jobs/{job_id}/result").json()

    served = result["rule_step"]
    assert served == library.rule_step_.to_dict()
    assert result["steps"][result["selected"]]["n_rules"] == 0 and served["selected"] == result["selected"]
    # an independent scan of the served steps: the lowest validation loss among those with a rule within the budget
    with_rules = [s for s in result["steps"] if s["n_rules"] >= 1 and s["n_terms"] <= BUDGET]
    best = min(with_rules, key=lambda s: (s["val_loss"], s["index"]))
    assert served["step"] == best["index"]
    assert served["loss_difference"] == best["val_loss"] - result["steps"][result["selected"]]["val_loss"]
    assert served["reason"].startswith(f"The best step within {BUDGET} terms, step {result['selected']}, uses only")

    promoted = client.post("/v1/models", json={"job_id": job_id, "name": "diabetes-rule-step"})
    assert promoted.status_code == 201, promoted.text
    model = client.get(f"/v1/models/{promoted.json()['id']}").json()
    assert model["provenance"]["rule_step"] == served


def test_a_cross_validated_job_gives_the_cost_with_its_standard_error_as_the_library_does(stack):
    data = load_diabetes(as_frame=True).frame.to_csv(index=False).encode()
    frame = pd.read_csv(io.BytesIO(data), float_precision="round_trip")
    settings = {"max_rules": BUDGET, "cv_folds": 5, "selection": "1se"}  # the case: two linear terms, no rule
    library = FireRegressor(**settings, **FOREST).fit(frame.drop(columns=["target"]), frame["target"])

    client = stack.client
    dataset = client.post("/v1/datasets?target=target", content=data, headers={"Content-Type": "text/csv"}).json()
    body = {"dataset_id": dataset["id"], "forest": FOREST, **settings, "validation": {"seed": 0}}
    submitted = client.post("/v1/jobs", json=body)
    assert submitted.status_code == 202, submitted.text
    stack.wait_for(submitted.json()["id"], ("succeeded",), timeout=180)
    result = client.get(f"/v1/jobs/{submitted.json()['id']}/result").json()

    served = result["rule_step"]
    assert served == library.rule_step_.to_dict()
    assert served["loss_se"] == result["steps"][served["step"]]["val_loss_se"] is not None
    assert served["reason"] is not None and served["reason"].endswith(f"validation loss {served['loss_se']:.4g}.")


def test_openapi_documents_every_field_of_the_rule_step(stack):
    schemas = stack.client.get("/openapi.json").json()["components"]["schemas"]
    fields = schemas["RuleStepChoice"]["properties"]
    assert set(fields) == {"selected", "step", "loss_rows", "loss_difference", "loss_ratio", "loss_se", "reason"}
    assert all(field.get("description") for field in fields.values())
    for holder in ("PathJobResult", "GridJobResult", "ModelProvenance"):
        assert "rule_step" in schemas[holder]["properties"], holder
