"""Cross-validated paths and rule stability through the service (issue 29): a job with ``cv_folds`` gives the
library's cross-validated steps (the folds' mean validation loss and its standard error), its folds' paths, both
choices (lowest loss, one standard error) and the library's rules; ``stability_resamples`` gives every step's
rules their selection frequency, as the library's estimator measures it; bad settings are 422s naming the field.
"""

import json

import fakeredis
import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.core.container import build_core
from app.main import create_app
from solver.encoding import TableEncoding
from solver.fitting import fit_half_samples, fit_rules
from solver.path import best_step
from solver.spec import ForestSpec, PathSpec
from solver.stability import reference_cuts, rule_stability
from tests.support.data import ABALONE, abalone_frame
from tests.support.problems import assert_problem

FOREST = {"n_estimators": 20, "max_depth": 3, "max_features": "sqrt", "random_state": 0}
PATH = {"n_lambdas": 20, "max_rules": 10, "cv_folds": 3, "selection": "1se"}
SEED = 0


@pytest.fixture(scope="module")
def edge():
    """The API on fakeredis (no workers): schemas and their checks."""
    settings = Settings(redis_url="redis://fakeredis", key_prefix="cv:", queue_name="cv")
    return TestClient(create_app(core=build_core(settings, redis=fakeredis.FakeRedis())))


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"cv_folds": 1}, "body.cv_folds"),
        ({"selection": "1se"}, "body.selection"),
        ({"cv_folds": 3, "validation": {"dataset_id": "ds_y"}}, "body.validation.dataset_id"),
        ({"cv_folds": 3, "grid": {"gamma": [1.1], "fusion_ratio": [0.5]}}, "body.grid"),
        ({"stability_resamples": 3}, "body.stability_resamples"),
        ({"forest": {**FOREST, "threshold_bins": 1}}, "body.forest.threshold_bins"),
    ],
)
def test_a_bad_cross_validation_or_stability_setting_is_a_problem_naming_it(edge, body, field):
    request = {"dataset_id": "ds_x", "forest": FOREST, **body}
    if "forest" in body:
        request["forest"] = body["forest"]
    assert_problem(edge.post("/v1/jobs", json=request), 422, field)


def library():
    frame = abalone_frame()
    features, y = frame.drop(columns=["rings"]), frame["rings"].to_numpy(dtype=np.float64)
    encoding = TableEncoding.infer(features, "onehot", Settings().max_categories)
    X = encoding.encode_frame(features)
    spec = PathSpec(**PATH, random_state=SEED)
    forest = ForestSpec(**FOREST, threshold_bins=10)
    fit = fit_rules(X, y, spec, forest=forest, encoding=encoding)
    pairs = fit_half_samples(X, y, spec, 1, forest=forest, encoding=encoding)
    return fit, pairs


@pytest.mark.integration
def test_a_cross_validated_job_with_stability_is_the_librarys(stack):
    fit, pairs = library()
    client = stack.client
    dataset = client.post(
        "/v1/datasets?target=rings", content=ABALONE.read_bytes(), headers={"Content-Type": "application/gzip"}
    ).json()
    body = {
        "dataset_id": dataset["id"],
        "forest": {**FOREST, "threshold_bins": 10},
        **PATH,
        "validation": {"seed": SEED},
        "stability_resamples": 2,
    }
    submitted = client.post("/v1/jobs", json=body)
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["id"]
    stack.wait_for(job_id, ("succeeded",), timeout=300)
    result = client.get(f"/v1/jobs/{job_id}/result").json()

    served = [{k: v for k, v in step.items() if k != "seconds"} for step in result["steps"]]
    assert served == [{k: v for k, v in s.to_dict().items() if k != "seconds"} for s in fit.path.steps]
    assert all(step["val_loss_se"] > 0 for step in result["steps"])
    assert result["selected"] == fit.selected and result["n_val"] == result["n_train"] == len(fit.train_rows)
    cv = result["cv"]
    assert cv["folds"] == 3 and cv["selection"] == "1se" and cv["best_1se"] == fit.selected
    assert cv["best_min"] == best_step(fit.path.steps, PATH["max_rules"], "loss") >= cv["best_1se"]
    assert [len(steps) for steps in cv["fold_steps"]] == [len(steps) for steps in fit.fold_steps]
    assert cv["fold_steps"][1][4]["val_loss"] == fit.fold_steps[1][4].val_loss

    step = client.get(f"/v1/jobs/{job_id}/steps/{result['selected']}/rules").json()
    assert step["rules"] == fit.rules.to_dict()
    expected = rule_stability(fit.rules, pairs, reference_cuts(fit.X_train))
    assert step["stability"]["frequencies"] == pytest.approx(list(expected.frequencies))
    assert len(step["stability"]["frequencies"]) == len(step["rules"]["rules"]) + len(step["rules"]["linear"])
    assert step["stability"]["dice"] == pytest.approx(expected.dice) == result["stability"]["dice"]
    assert step["stability"]["n_resamples"] == 2
    assert len(result["stability"]["frequencies"]) == len(result["steps"])

    # issue 39: how each step's rules repeat over the folds, the library's numbers (fold_stability of its own folds)
    folds = fit.fold_stability
    assert result["cv"]["stability"]["dice"] == pytest.approx(folds.dice, abs=1e-12)
    assert result["cv"]["stability"]["frequencies"] == [pytest.approx(list(f), abs=1e-12) for f in folds.frequencies]
    assert any(0 < f < 1 for step in folds.frequencies for f in step)  # some rules repeat in some folds only
    selected = step["fold_stability"]
    assert selected["n_folds"] == 3 and selected["dice"] == pytest.approx(folds.dice[fit.selected], abs=1e-12)
    assert selected["frequencies"] == pytest.approx(list(folds.frequencies[fit.selected]), abs=1e-12)
    # issue 39, item 4: the frontier of loss, terms and the folds' Dice is the library's, step for step
    frontier = result["cv"]["frontier"]
    assert [f["step"] for f in frontier] == [f.step for f in fit.frontier] and len(frontier) >= 2
    assert frontier == [pytest.approx(f.to_dict(), abs=1e-12) for f in fit.frontier]
    for cell in client.get(f"/v1/jobs/{job_id}").json()["cells"]:  # each fold kept its rules small
        stored = client.get(f"/v1/jobs/{cell}/result")
        assert len(stored.json()["fold_rules"]["steps"]) == len(stored.json()["steps"])
        assert len(json.dumps(stored.json()["fold_rules"])) < 8_000


@pytest.mark.integration
def test_the_folds_run_as_cells_and_a_killed_fold_is_retried_while_the_parent_completes(own_queue):
    """A fold's worker killed mid-path: the watchdog runs the fold again, counted once in the parent, which still
    refits, queued once by its last fold to end and run once (issue 38)."""
    dataset = own_queue.upload_dataset(ABALONE, target="rings")
    body = {
        "dataset_id": dataset["id"],
        "forest": {**FOREST, "n_estimators": 100, "max_depth": 4},
        "cv_folds": 2,
        "n_lambdas": 80,  # a fold long enough to be caught running, short enough to run twice
        "patience": None,
        "fusion_ratio": 1.0,
    }
    submitted = own_queue.client.post("/v1/jobs", json=body)
    assert submitted.status_code == 202, submitted.text
    parent = submitted.json()
    assert parent["kind"] == "cv" and len(parent["cells"]) == 2
    first = parent["cells"][0]
    own_queue.wait_for(first, ("running",), predicate=lambda j: j["progress"].get("step", 0) >= 1, timeout=240)
    own_queue.workers[-1].kill()
    own_queue.add_worker()
    done = own_queue.wait_for(parent["id"], ("succeeded",), timeout=240)
    assert done["attempt"] == 1 and done["history"] == []  # queued once, by the last fold to end, and run once
    assert not own_queue.redis.exists(f"rq:job:{parent['id']}-2")
    fold = own_queue.client.get(f"/v1/jobs/{first}").json()
    assert fold["status"] == "succeeded" and fold["attempt"] == 2 and fold["spec"]["fold"] == 0
    assert "stopped sending heartbeats" in fold["history"][0]["reason"]
    result = own_queue.client.get(f"/v1/jobs/{parent['id']}/result").json()
    assert result["cv"]["folds"] == 2 and done["summary"]["selected"] == result["selected"]
