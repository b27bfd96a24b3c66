"""Served models that watch their own rules: every scored row's fired rules and column bins counted per model
version (app.core.monitoring), drift against the training table (app.core.drift) in the API, in the model's
document and in /metrics, thresholds per model, counts that survive a restart of the API."""

import signal
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from scipy.stats import chi2_contingency

from app.core.drift import PSI_FLOOR, DriftThresholds, psi, two_proportion_p_value
from app.core.errors import NotFound
from app.main import create_app
from tests.support.data import REPO_ROOT, abalone_frame
from tests.support.drift import drift, expected_bins, flush, records
from tests.support.jobs import submit
from tests.support.problems import assert_problem
from tests.support.service import free_port, settings_env

FEATURES = abalone_frame().drop(columns=["rings"])


@pytest.fixture(scope="module")
def model(stack, abalone):
    """A model promoted from a short path on the abalone forest, under a fresh name with an alias."""
    dataset, forest_id = abalone
    job = submit(stack, {"dataset_id": dataset["id"], "forest_id": forest_id, "n_lambdas": 10, "max_rules": 10})
    stack.wait_for(job["id"], ("succeeded",))
    name = f"drift-{uuid.uuid4().hex[:8]}"
    response = stack.client.post("/v1/models", json={"job_id": job["id"], "name": name})
    assert response.status_code == 201, response.text
    assert stack.client.put(f"/v1/registered-models/{name}/aliases/live", json={"version": 1}).status_code == 200
    return response.json()


def test_every_scored_row_counts_its_fired_rules_and_column_bins_on_every_route(stack, model):
    before = drift(stack, model["id"])
    rows = FEATURES.iloc[:300]
    name = model["name"]
    scored = stack.client.post(
        f"/v1/models/{model['id']}/predict?explain=true", json={"dataframe_records": records(rows.iloc[:100])}
    )
    assert scored.status_code == 200, scored.text
    by_alias = stack.client.post(
        f"/v1/registered-models/{name}/aliases/live/invocations",
        content=rows.iloc[100:200].to_csv(index=False),
        headers={"Content-Type": "text/csv"},
    )
    assert by_alias.status_code == 200, by_alias.text
    inputs = [
        {
            "name": column,
            "shape": [100],
            "datatype": "BYTES" if column == "Sex" else "FP64",
            "data": rows.iloc[200:][column].tolist(),
        }
        for column in rows.columns
    ]
    infer = stack.client.post(f"/v2/models/{name}/versions/1/infer", json={"inputs": inputs})
    assert infer.status_code == 200, infer.text
    flush(stack)

    report = drift(stack, model["id"])
    assert report["rows"] - before["rows"] == 300
    assert report["sources"] == ["live", "batch"] and report["name"] == name and report["version"] == 1
    # each rule's firing rows: those the service's own explanations name, counted for all 300 rows
    explained = stack.client.post(
        f"/v1/models/{model['id']}/predict?explain=true", json={"dataframe_records": records(rows)}
    ).json()["explanations"]
    flush(stack)  # the explaining request counted too: 600 rows now, each rule's rows twice
    report = drift(stack, model["id"])
    fired = np.zeros(len(report["rules"]), dtype=int)
    for ids in explained:
        fired[ids] += 1
    earlier = np.array([rule["live_rows"] for rule in before["rules"]])
    assert (np.array([rule["live_rows"] for rule in report["rules"]]) - earlier).tolist() == (2 * fired).tolist()
    for rule in report["rules"]:
        assert rule["live_rate"] == pytest.approx(rule["live_rows"] / report["rows"])
        assert rule["ratio"] == pytest.approx(rule["live_rate"] / rule["training_rate"])
    # each column's rows per bin, from pandas, and its training shares on the dataset's rows
    for column, earlier_column in zip(report["columns"], before["columns"]):
        counted = np.array(column["live_rows"]) - np.array(earlier_column["live_rows"])
        assert counted.tolist() == (2 * expected_bins(column, rows[column["column"]])).tolist(), column["column"]
        training = expected_bins(column, FEATURES[column["column"]])
        assert column["training_shares"] == pytest.approx((training / training.sum()).tolist())
    assert sum(report["series"]["rows"]) == report["rows"]


def test_no_count_is_lost_under_concurrent_requests_while_the_counting_thread_drains(stack, model):
    before = drift(stack, model["id"])
    url = f"/v1/registered-models/{model['name']}/aliases/live/predict"
    bodies = [{"dataframe_records": records(FEATURES.iloc[i : i + 1])} for i in range(400)]
    with ThreadPoolExecutor(8) as pool:  # the API's counting thread drains every 0.5 s meanwhile
        statuses = list(pool.map(lambda body: stack.client.post(url, json=body).status_code, bodies))
    assert statuses == [200] * 400
    flush(stack)
    after = drift(stack, model["id"])
    assert after["rows"] - before["rows"] == 400
    for column, earlier in zip(after["columns"], before["columns"]):
        counted = np.array(column["live_rows"]) - np.array(earlier["live_rows"])
        assert counted.tolist() == expected_bins(column, FEATURES.iloc[:400][column["column"]]).tolist()


def test_a_shifted_column_and_the_rules_on_it_are_flagged_in_the_report_the_document_and_metrics(stack, abalone):
    dataset, forest_id = abalone
    job = submit(stack, {"dataset_id": dataset["id"], "forest_id": forest_id, "n_lambdas": 10, "max_rules": 10})
    stack.wait_for(job["id"], ("succeeded",))
    model = stack.client.post("/v1/models", json={"job_id": job["id"], "name": f"shift-{uuid.uuid4().hex[:8]}"}).json()
    shifted = FEATURES.iloc[:400].copy()
    shifted["Shell_weight"] = shifted["Shell_weight"] * 2 + 1.0  # above the training table's top decile
    response = stack.client.post(
        f"/v1/models/{model['id']}/predict",
        json={"dataframe_split": {"columns": list(shifted.columns), "data": shifted.values.tolist()}},
    )
    assert response.status_code == 200, response.text
    flush(stack)

    report = drift(stack, model["id"])
    columns = {column["column"]: column for column in report["columns"]}
    assert columns["Shell_weight"]["psi"] > 0.25 and columns["Shell_weight"]["drifted"]
    assert columns["Shell_weight"]["live_rows"][-2] == 400  # every row in the last decile bin
    assert "Shell_weight" in report["drifted_columns"]
    # PSI from its definition, on the counted shares
    training = np.maximum(columns["Shell_weight"]["training_shares"], PSI_FLOOR)
    live = np.maximum(np.array(columns["Shell_weight"]["live_rows"]) / 400, PSI_FLOOR)
    assert columns["Shell_weight"]["psi"] == pytest.approx(float(np.sum((live - training) * np.log(live / training))))
    shell_rules = [
        rule["id"]
        for rule in model["ensemble"]["rules"]
        if any(condition["feature"] == "Shell_weight" for condition in rule["conditions"])
    ]
    flagged = set(report["drifted_rules"])
    assert flagged and flagged <= {rule["rule"] for rule in report["rules"]}
    assert flagged & set(shell_rules), (flagged, shell_rules)
    for rule in report["rules"]:
        if rule["rule"] in flagged:
            assert rule["p_value"] < 0.001 and (rule["ratio"] >= 2 or rule["ratio"] <= 0.5)

    document = stack.client.get(f"/v1/models/{model['id']}").json()
    assert document["drift"]["drifted_columns"] == report["drifted_columns"]
    assert document["drift"]["drifted_rules"] == report["drifted_rules"] and document["drift"]["rows"] == 400

    samples = [
        (sample.name, sample.labels, sample.value)
        for family in text_string_to_metric_families(stack.client.get("/metrics").text)
        for sample in family.samples
        if sample.labels.get("model") == model["name"]
    ]
    ours = {"tenant": "default", "model": model["name"], "version": "1"}
    assert ("fire_drift_rows", ours, 400.0) in samples
    assert ("fire_drifted", {**ours, "kind": "column", "name": "Shell_weight"}, 1.0) in samples
    assert ("fire_feature_psi", {**ours, "column": "Shell_weight"}, columns["Shell_weight"]["psi"]) in samples
    ratios = {labels["rule"]: value for name, labels, value in samples if name == "fire_rule_firing_ratio"}
    assert 0 < len(ratios) <= 10 and {f"r{rule}" for rule in flagged} <= set(ratios)

    # thresholds: a PSI threshold above this shift flags no column; nothing is flagged before min_rows
    thresholds = {"psi": 100.0, "min_rows": 10}
    assert stack.client.put(f"/v1/models/{model['id']}/monitoring", json=thresholds).status_code == 200
    assert drift(stack, model["id"])["drifted_columns"] == []
    assert stack.client.put(f"/v1/models/{model['id']}/monitoring", json={"min_rows": 10_000}).status_code == 200
    report = drift(stack, model["id"])
    assert report["drifted_columns"] == [] and report["drifted_rules"] == []


def test_rows_refused_for_an_unseen_level_count_as_that_columns_unseen_share(stack, model):
    before = drift(stack, model["id"])
    rows = records(FEATURES.iloc[:5].assign(Sex="X"))
    response = stack.client.post(f"/v1/models/{model['id']}/predict", json={"dataframe_records": rows})
    assert_problem(response, 422, "dataframe_records.Sex")
    flush(stack)
    report = drift(stack, model["id"])
    sex = next(column for column in report["columns"] if column["column"] == "Sex")
    assert report["rows"] == before["rows"]  # refused rows have no bins
    assert sex["unseen_share"] == pytest.approx(5 / (report["rows"] + 5), rel=0.25)


def test_a_model_with_monitoring_off_counts_nothing_and_bad_thresholds_are_422s(stack, model):
    url = f"/v1/models/{model['id']}/monitoring"
    assert_problem(stack.client.put(url, json={"psi": -1}), 422, "body.psi")
    assert_problem(stack.client.put(url, json={"firing_ratio": 0.5}), 422, "body.firing_ratio")
    assert stack.client.get(url).json() == DriftThresholds().model_dump()
    assert stack.client.put(url, json={"enabled": False}).json()["enabled"] is False
    monitor = stack.client.app.state.core.monitor
    monitor._watched.pop(model["id"], None)  # its settings are reread within SETTINGS_RECHECK_SECONDS anyway
    before = drift(stack, model["id"])["rows"]
    stack.client.post(f"/v1/models/{model['id']}/predict", json={"dataframe_records": records(FEATURES.iloc[:7])})
    flush(stack)
    assert drift(stack, model["id"])["rows"] == before
    assert stack.client.put(url, json={"enabled": True}).status_code == 200
    monitor._watched.pop(model["id"], None)
    assert_problem(stack.client.get(f"/v1/models/{model['id']}/drift", params={"since": 10, "until": 5}), 422, "since")


def test_another_tenants_model_has_no_drift_for_it(stack, model):
    with pytest.raises(NotFound):
        stack.client.app.state.core.monitoring.report(model["id"], tenant="someone-else")
    assert stack.client.get("/v1/models/mdl_nosuchmodel/drift").status_code == 404


def test_a_batch_jobs_rows_count_as_batch_rows_chunk_by_chunk(stack, model):
    before = {source: drift(stack, model["id"], source=source) for source in ("live", "batch")}
    rows = FEATURES.iloc[:250]
    response = stack.client.post(
        f"/v1/models/{model['id']}/batch?chunk_rows=100",
        files={"file": ("rows.csv", rows.to_csv(index=False).encode(), "text/csv")},
    )
    assert response.status_code == 202, response.text
    job = stack.wait_for(response.json()["id"], ("succeeded",))
    assert job["status"] == "succeeded"
    # its rows are at the batch's result route, which the jobs' result route names
    problem = assert_problem(stack.client.get(f"/v1/jobs/{job['id']}/result"), 422, "job_id")
    assert problem["errors"][0]["fix"] == f"GET /v1/models/batch/{job['id']}/result"
    after = {source: drift(stack, model["id"], source=source) for source in ("live", "batch")}
    assert after["batch"]["rows"] - before["batch"]["rows"] == 250  # added by the workers as each chunk is stored
    assert after["live"]["rows"] == before["live"]["rows"]
    for column, earlier in zip(after["batch"]["columns"], before["batch"]["columns"]):
        counted = np.array(column["live_rows"]) - np.array(earlier["live_rows"])
        assert counted.tolist() == expected_bins(column, rows[column["column"]]).tolist(), column["column"]


def test_counts_reach_redis_at_shutdown_and_none_is_lost_across_a_restart(stack, model):
    before = drift(stack, model["id"])["rows"]
    settings = stack.settings.model_copy(update={"drift_flush_seconds": 3600.0})  # only the shutdown flushes
    with TestClient(create_app(settings)) as client:
        for start in range(0, 50, 10):
            response = client.post(
                f"/v1/models/{model['id']}/predict",
                json={"dataframe_records": records(FEATURES.iloc[start : start + 10])},
            )
            assert response.status_code == 200
        time.sleep(0.6)  # drained into the pending counts, not yet flushed
        assert drift(stack, model["id"])["rows"] == before
    assert drift(stack, model["id"])["rows"] == before + 50


def test_a_serve_process_stopped_by_sigterm_adds_its_counts_before_it_exits(stack, model):
    before = drift(stack, model["id"])["rows"]
    settings = stack.settings.model_copy(update={"drift_flush_seconds": 3600.0})  # only the shutdown flushes
    port = free_port()
    serve = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--log-level", "warning"],
        env=settings_env(settings),
        cwd=REPO_ROOT,
        stderr=subprocess.DEVNULL,
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if client.get("/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "serve did not answer"
                time.sleep(0.1)
            for start in range(0, 30, 10):
                rows = records(FEATURES.iloc[start : start + 10])
                response = client.post(f"/v1/models/{model['id']}/predict", json={"dataframe_records": rows})
                assert response.status_code == 200, response.text
        time.sleep(0.6)  # drained into the pending counts, not yet added
        assert drift(stack, model["id"])["rows"] == before
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(timeout=30) in (0, 128 + signal.SIGTERM)
    finally:
        serve.kill()
    assert drift(stack, model["id"])["rows"] == before + 30


@pytest.mark.parametrize(("x0", "n0", "x1", "n1"), [(120, 1000, 30, 100), (5, 4000, 0, 20), (500, 1000, 510, 1000)])
def test_the_two_proportion_test_is_the_chi_squared_test_of_its_2x2_table(x0, n0, x1, n1):
    # the pooled z-test's two-sided p-value is that of Pearson's chi-squared (no continuity correction)
    expected = chi2_contingency([[x1, n1 - x1], [x0, n0 - x0]], correction=False).pvalue
    assert two_proportion_p_value(x0, n0, x1, n1) == pytest.approx(expected, rel=1e-9)


def test_psi_is_zero_for_equal_shares_and_symmetric():
    a, b = np.array([0.2, 0.3, 0.5]), np.array([0.4, 0.4, 0.2])
    assert psi(a, a) == 0.0
    assert psi(a, b) == pytest.approx(psi(b, a)) == pytest.approx(sum((b - a) * np.log(b / a)))
