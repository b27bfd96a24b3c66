"""The MLflow ``python_function`` loader of a FIRE model exported as an MLflow model (``app.core.mlflow_export``
ships this file as the model's ``code/fire_rules_pyfunc.py``; it imports nothing of the service, and pandas only
because pyfunc hands it a DataFrame).

``_load_pyfunc(data_path)`` reads the model's ``data/``: ``rules.py``, the dependency-free Python export
(``solver.export``: ``predict(row)`` over the training table's original columns, None for a missing value), and
``model.json`` (``columns``, and a classifier's ``classes``). Its ``predict(model_input, params)`` answers the list
that ``POST /v1/models/{id}/predict`` serves as ``predictions`` (and MLflow's ``/invocations`` then serves too):
numbers, rates, or labels (a binary classifier: ``classes[1]`` where the log-odds are > 0; K classes: the most
probable, the first of equal ones); with ``params={"predict_method": "predict_proba"}`` a classifier's
probabilities, a DataFrame of one column per class named by its label as text.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
from collections.abc import Callable
from typing import Any

import pandas as pd

PREDICT_METHODS = ("predict", "predict_proba")


def _load_pyfunc(data_path: str) -> FireRulesModel:
    """The model of the ``data/`` folder at ``data_path`` (MLflow's loader entry point)."""
    with open(os.path.join(data_path, "model.json"), encoding="utf-8") as file:
        config = json.load(file)
    spec = importlib.util.spec_from_file_location("fire_rules_model", os.path.join(data_path, "rules.py"))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the rules of {data_path}")
    rules = importlib.util.module_from_spec(spec)  # not put in sys.modules: each model keeps its own
    spec.loader.exec_module(rules)
    return FireRulesModel(rules.predict, config["columns"], config.get("classes"))


def _probability(score: float) -> float:
    """1 / (1 + exp(-score)), without overflow."""
    if score >= 0:
        return 1.0 / (1.0 + math.exp(-score))
    odds = math.exp(score)
    return odds / (1.0 + odds)


class FireRulesModel:
    """A rule ensemble's ``predict(row)`` over whole tables, answering as the service scores."""

    def __init__(self, predict_row: Callable[[dict], Any], columns: list[str], classes: list | None):
        self.predict_row = predict_row
        self.columns = columns
        self.classes = classes

    def predict(self, model_input: Any, params: dict[str, Any] | None = None) -> list | pd.DataFrame:
        """Predictions (a list), or a classifier's probabilities (a DataFrame) where ``params`` say
        ``predict_method: predict_proba``, for the rows of ``model_input`` (a DataFrame, or what makes one)."""
        method = self._method(params)
        frame = pd.DataFrame(model_input)
        missing = [name for name in self.columns if name not in frame.columns]
        if missing:
            raise ValueError(f"the input lacks the columns {missing}; the model reads {self.columns}")
        table = frame[self.columns].astype(object)
        rows = table.where(table.notna(), None).to_dict("records")  # NaN, NA and None: missing (None)
        outputs = [self.predict_row(row) for row in rows]
        if method == "predict":
            return [self._label(output) for output in outputs]
        columns = [str(label) for label in self.classes or ()]
        return pd.DataFrame([self._probabilities(output) for output in outputs], index=frame.index, columns=columns)

    def _method(self, params: dict[str, Any] | None) -> str:
        unknown = sorted(set(params or {}) - {"predict_method"})
        if unknown:
            raise ValueError(f"unknown params {unknown}: the model takes predict_method only")
        method = (params or {}).get("predict_method", "predict")
        if method not in PREDICT_METHODS:
            raise ValueError(f"predict_method must be one of {list(PREDICT_METHODS)}, got {method!r}")
        if method == "predict_proba" and not self.classes:
            raise ValueError("predict_method 'predict_proba' is for classifiers; this model predicts numbers")
        return method

    def _label(self, output: Any) -> Any:
        if isinstance(output, dict):  # K classes: {class: probability}
            return max(output, key=output.__getitem__)
        if self.classes:  # a binary classifier's log-odds of classes[1]
            return self.classes[1] if output > 0.0 else self.classes[0]
        return output  # a number, or a rate

    def _probabilities(self, output: Any) -> list[float]:
        if isinstance(output, dict):
            return list(output.values())
        positive = _probability(output)
        return [1.0 - positive, positive]
