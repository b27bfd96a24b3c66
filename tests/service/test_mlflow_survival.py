"""A Cox model as an MLflow model (app.core.model_export with format mlflow): loaded with ``mlflow.pyfunc`` and
served by MLflow's scoring server, it predicts the hazard ratio relative to the baseline hazard (``predict_mean``,
to the last bit of exp) and, with ``params={"times": [...]}``, the survival curves of ``predict_survival``, a
column ``S(t=...)`` per time. The model is fitted here on scikit-survival's WHAS500 (FireSurvival) and exported
directly: no service job is needed to read its export."""

import io
import warnings
import zipfile
from types import SimpleNamespace

import mlflow.pyfunc
import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient
from mlflow.models import validate_serving_input
from mlflow.pyfunc import scoring_server
from sksurv.datasets import load_whas500

from app.core.mlflow_pyfunc import _load_pyfunc
from app.core.model_export import export_model
from solver import FireRegressor, FireSurvival, RuleEnsemble
from tests.support.data import DATA

TIMES = [0.5, 30, 365.0, 730.0, 2358.0]  # before the first event, within follow-up, the last follow-up (lenfol max)


@pytest.fixture(scope="module")
def whas500():
    """WHAS500's rows as a scoring body sends them (its 0/1 category columns, numeric to the model, as numbers) and
    a Cox model of them."""
    features, y = load_whas500()
    rules = FireSurvival(n_estimators=30, n_lambdas=10, max_rules=12, random_state=0).fit(features, y).rule_ensemble_
    kinds = {column["name"]: column["kind"] for column in rules.encoding.to_dict()}
    rows = features.astype({name: float if kinds[name] == "numeric" else object for name in features.columns})
    return rows.iloc[::4].reset_index(drop=True), rules


def exported(rules: RuleEnsemble, directory, loss: str = "cox", target: str = "lenfol"):
    """The MLflow export of a model of ``rules`` (the fields ``export_model`` reads), unzipped and loaded."""
    model = SimpleNamespace(
        id="mdl_cox",
        name="whas500",
        version=1,
        target=target,
        loss=loss,
        classes=None,
        columns=rules.encoding.to_dict(),
        ensemble=rules.to_dict(),
        created_at=0.0,
        exposure=None,
        offset=None,
    )
    export = export_model(model, "mlflow")
    zipfile.ZipFile(io.BytesIO(export.content)).extractall(directory)
    return export, mlflow.pyfunc.load_model(str(directory))


def invocations(loaded, rows: pd.DataFrame, params: dict | None = None) -> list:
    """What MLflow's scoring server (``mlflow models serve``) answers for the rows."""
    values = rows.astype(object).where(rows.notna(), None).to_numpy().tolist()
    body = {"dataframe_split": {"columns": list(rows.columns), "data": values}} | ({"params": params} if params else {})
    response = TestClient(scoring_server.init(loaded)).post("/invocations", json=body)
    assert response.status_code == 200, response.text
    return response.json()["predictions"]


def test_a_cox_model_predicts_hazard_ratios_and_with_times_its_survival_curves(whas500, tmp_path):
    rows, rules = whas500
    export, loaded = exported(rules, tmp_path)
    assert export.output == (
        "hazard ratio of 'lenfol' relative to the baseline hazard, or survival probabilities S(t=...) with params times"
    )
    assert loaded.metadata.metadata["output"] == export.output
    params = {spec.name: spec for spec in loaded.metadata.get_params_schema().params}
    assert params["times"].shape == (-1,) and params["times"].default == []
    python = zipfile.ZipFile(io.BytesIO(export.content)).read("data/rules.py").decode()
    assert "hazard ratio of 'lenfol' relative to the baseline hazard" in python and "def survival(row, times)" in python

    X = rules.encoding.encode_frame(rows)
    ratios = loaded.predict(rows)
    # math.exp against numpy's exp of the same score: the last bit may differ (numpy's own exp with AVX-512)
    np.testing.assert_array_max_ulp(np.array(ratios), rules.predict_mean(X), maxulp=1)
    assert invocations(loaded, rows) == ratios == loaded.predict(rows, params={"times": []})

    curves = loaded.predict(rows, params={"times": TIMES})
    assert list(curves.columns) == ["S(t=0.5)", "S(t=30.0)", "S(t=365.0)", "S(t=730.0)", "S(t=2358.0)"]
    np.testing.assert_allclose(curves.to_numpy(), rules.predict_survival(X, TIMES), rtol=1e-14, atol=0)
    assert (curves["S(t=0.5)"] == 1.0).all() and (curves["S(t=365.0)"] > curves["S(t=2358.0)"]).all()
    assert invocations(loaded, rows, {"times": TIMES}) == curves.to_dict("records")  # one record per input row

    with warnings.catch_warnings():  # deprecated in MLflow 3.13 for mlflow.models.predict, which builds an env
        warnings.simplefilter("ignore", FutureWarning)
        validated = validate_serving_input(str(tmp_path), (tmp_path / "serving_input_example.json").read_text())
    assert len(validated) == 3
    with pytest.raises(ValueError, match="distinct"):
        loaded.predict(rows, params={"times": [30.0, 30]})
    with pytest.raises(ValueError, match="finite numbers >= 0"):
        loaded.predict(rows, params={"times": [30.0, -1.0]})
    with pytest.raises(ValueError, match="last follow-up time"):  # past it, as the library and /predict refuse
        loaded.predict(rows, params={"times": [30.0, 2358.5]})


def test_an_amount_model_predicts_its_mean_and_takes_no_times(tmp_path):
    frame = pd.read_csv(DATA / "rand_hie_amounts.csv.gz").iloc[:800]
    rows = frame.drop(columns="meddol").astype(float)  # the signature says double
    model = FireRegressor(loss="tweedie", n_estimators=30, n_lambdas=10, validation_fraction=0.0, random_state=0)
    rules = model.fit(rows, frame["meddol"]).rule_ensemble_
    export, loaded = exported(rules, tmp_path, loss="tweedie", target="meddol")
    assert export.output == "mean of 'meddol'"
    assert [spec.name for spec in loaded.metadata.get_params_schema().params] == ["predict_method"]
    means = rules.predict_mean(rules.encoding.encode_frame(rows))
    np.testing.assert_array_max_ulp(np.array(loaded.predict(rows)), means, maxulp=1)
    # MLflow drops params its schema does not declare; the loaded model itself refuses them
    assert loaded.predict(rows, params={"times": TIMES}) == loaded.predict(rows)
    with pytest.raises(ValueError, match=r"unknown params \['times'\]"):
        _load_pyfunc(str(tmp_path / "data")).predict(rows, params={"times": TIMES})
