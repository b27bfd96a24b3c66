"""Rules from every node, a cap on their conditions and linear terms through the service (issue 18): the path
settings ``candidates``, ``max_rule_length``, ``linear_terms`` and ``linear_quantile`` are PathSpec's in the
request schema (its defaults and descriptions; a bad value is a 422 naming the field), and a job that uses them
gives rules of at most that many conditions and linear terms in the step's rules, the text, the model document,
the explanations and both exports; the promoted model scores as the library's ``fit_rules`` on the same table,
settings and seed.
"""

import fakeredis
import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.api.schemas import PathJobRequest
from app.core.config import Settings
from app.core.container import build_core
from app.main import create_app
from solver.encoding import TableEncoding
from solver.fitting import fit_rules
from solver.spec import ForestSpec, PathSpec
from tests.support.data import ABALONE, abalone_frame
from tests.support.exports import python_predictions, sql_predictions
from tests.support.problems import assert_problem

NEW_SETTINGS = ("candidates", "max_rule_length", "linear_terms", "linear_quantile")
FOREST = {"n_estimators": 30, "max_depth": 3, "max_features": "sqrt", "random_state": 0}
PATH = {"penalty": "mcp", "gamma": 1.1, "fusion_ratio": 0.5, "n_lambdas": 20, "max_rules": 12}
TERMS = {"candidates": "nodes", "max_rule_length": 2, "linear_terms": True}
VALIDATION = {"fraction": 0.2, "seed": 0}


@pytest.fixture(scope="module")
def edge():
    """The API on fakeredis (no workers): schemas and their checks."""
    settings = Settings(redis_url="redis://fakeredis", key_prefix="terms:", queue_name="terms")
    return TestClient(create_app(core=build_core(settings, redis=fakeredis.FakeRedis())))


def test_the_new_settings_are_pathspecs_in_the_request_schema(edge):
    properties = edge.get("/openapi.json").json()["components"]["schemas"]["PathJobRequest"]["properties"]
    defaults, descriptions = PathSpec.defaults(), PathSpec.descriptions()
    for name in NEW_SETTINGS:
        assert properties[name].get("default") == defaults[name], name
        assert properties[name]["description"] == descriptions[name], name
    choices = properties["candidates"].get("anyOf", [properties["candidates"]])
    assert sorted(value for option in choices for value in option.get("enum", [])) == ["leaves", "nodes"]


@pytest.mark.parametrize(("body", "used"), [({}, "leaves"), ({"max_rule_length": 2}, "nodes"), (TERMS, "nodes")])
def test_a_job_without_candidates_takes_those_that_can_satisfy_its_cap(body, used):
    request = PathJobRequest.model_validate({"dataset_id": "ds_x", "forest_id": "fo_x", **body})
    assert request.path_spec().candidates == used


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"candidates": "trees"}, "body.candidates"),
        ({"max_rule_length": 0}, "body.max_rule_length"),
        ({"max_rule_length": 1.5}, "body.max_rule_length"),
        ({"linear_terms": "yes"}, "body.linear_terms"),
        ({"linear_quantile": 0.7}, "body.linear_quantile"),
        ({"linear_quantile": -0.1}, "body.linear_quantile"),
    ],
)
def test_a_bad_term_setting_is_a_problem_naming_it(edge, body, field):
    response = edge.post("/v1/jobs", json={"dataset_id": "ds_x", "forest_id": "fo_x", **body})
    problem = assert_problem(response, 422, field)
    assert problem["errors"][0]["field"] == field, problem


def library_fit():
    """The library on the same table, settings and seed: (fit, encoding, features)."""
    frame = abalone_frame()
    features, y = frame.drop(columns=["rings"]), frame["rings"].to_numpy(dtype=np.float64)
    encoding = TableEncoding.infer(features, "onehot", Settings().max_categories)
    spec = PathSpec(**PATH, **TERMS, validation_fraction=VALIDATION["fraction"], random_state=VALIDATION["seed"])
    fit = fit_rules(encoding.encode_frame(features), y, spec, forest=ForestSpec(**FOREST), encoding=encoding)
    return fit, encoding, features


@pytest.mark.integration
def test_node_rules_and_linear_terms_go_through_the_service_and_agree_with_the_library(stack):
    fit, encoding, features = library_fit()
    assert fit.rules.n_linear > 0 and fit.rules.n_rules > 0  # the table selects both kinds of term

    client = stack.client
    dataset = client.post(
        "/v1/datasets?target=rings", content=ABALONE.read_bytes(), headers={"Content-Type": "application/gzip"}
    ).json()
    body = {"dataset_id": dataset["id"], "forest": FOREST, **PATH, **TERMS, "validation": VALIDATION}
    submitted = client.post("/v1/jobs", json=body)
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["id"]
    stack.wait_for(job_id, ("succeeded",), timeout=180)
    job = client.get(f"/v1/jobs/{job_id}").json()
    assert {name: job["spec"]["path"][name] for name in TERMS} == TERMS
    assert job["spec"]["path"]["linear_quantile"] == PathSpec.defaults()["linear_quantile"]

    result = client.get(f"/v1/jobs/{job_id}/result").json()
    assert result["selected"] == fit.selected
    served_steps = [{k: v for k, v in step.items() if k != "seconds"} for step in result["steps"]]
    assert served_steps == [{k: v for k, v in step.to_dict().items() if k != "seconds"} for step in fit.path.steps]

    step = client.get(f"/v1/jobs/{job_id}/steps/{result['selected']}/rules").json()
    rules = step["rules"]
    assert rules == fit.rules.to_dict()  # rebuilt from the stored weights with the fit's candidates
    assert all(len(rule["conditions"]) <= TERMS["max_rule_length"] for rule in rules["rules"])
    assert step["longest_rule"] == max(len(rule["conditions"]) for rule in rules["rules"])
    linear = rules["linear"]
    assert step["n_linear"] == len(linear) > 0
    assert step["n_rules"] == len(rules["rules"]) and step["n_terms"] == len(rules["rules"]) + len(linear)
    assert not any("=" in term["feature"] for term in linear)  # numeric columns only, never a level of Sex
    assert all(term["lower"] < term["upper"] for term in linear)
    for term in linear:
        assert term["feature"] in step["text"]
    assert "clipped to [" in step["text"]

    promoted = client.post("/v1/models", json={"job_id": job_id, "name": "abalone-terms"})
    assert promoted.status_code == 201, promoted.text
    model = promoted.json()
    assert model["ensemble"] == rules and model["n_linear"] == len(linear)
    assert model["n_rules"] == len(rules["rules"]) and model["metrics"]["n_terms"] == step["n_terms"]
    assert model["longest_rule"] == step["longest_rule"] <= TERMS["max_rule_length"]
    assert "clipped to [" in model["text"]
    assert client.get(f"/v1/models/{model['id']}").json()["ensemble"]["linear"] == linear

    rows = features.iloc[::9]
    values = rows.astype(object).where(rows.notna(), None).to_numpy().tolist()
    scored = client.post(
        f"/v1/models/{model['id']}/predict?explain=true",
        json={"dataframe_split": {"columns": list(rows.columns), "data": values}},
    )
    assert scored.status_code == 200, scored.text
    answer = scored.json()
    expected = fit.rules.predict(encoding.encode_frame(rows))
    np.testing.assert_array_equal(answer["predictions"], expected)  # library/service agreement, bit for bit
    assert all(len(row) == len(linear) for row in answer["linear_contributions"])
    for fired, amounts, terms, score in zip(
        answer["explanations"], answer["contributions"], answer["linear_contributions"], expected
    ):
        assert len(fired) == len(amounts)
        assert sum(amounts) + sum(terms) == pytest.approx(score - model["intercept"], abs=1e-9)

    sql = client.get(f"/v1/models/{model['id']}/export?format=sql")
    assert sql.status_code == 200, sql.text
    expression = "\n".join(line for line in sql.text.splitlines() if not line.startswith("--"))
    np.testing.assert_allclose(sql_predictions(expression, rows), expected, rtol=0, atol=1e-9)
    python = client.get(f"/v1/models/{model['id']}/export?format=python")
    assert python.status_code == 200, python.text
    np.testing.assert_allclose(python_predictions(python.text, rows), expected, rtol=0, atol=1e-9)
