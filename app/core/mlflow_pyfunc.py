"""The MLflow ``python_function`` loader of a FIRE model exported as an MLflow model (``app.core.mlflow_export``
ships this file as the model's ``code/fire_rules_pyfunc.py``; it imports nothing of the service, and pandas only
because pyfunc hands it a DataFrame).

``_load_pyfunc(data_path)`` reads the model's ``data/``: ``rules.py``, the dependency-free Python export
(``solver.export``: ``predict(row)`` over the training table's original columns, None for a missing value), and
``model.json`` (``columns``, and a classifier's ``classes``). Its ``predict(model_input, params)`` answers the list
that ``POST /v1/models/{id}/predict`` serves as ``predictions`` (and MLflow's ``/invocations`` then serves too):
numbers, rates or means, a Cox model's hazard ratios relative to its baseline hazard, or labels (a binary
classifier: ``classes[1]`` where the log-odds are > 0; K classes: the most probable, the first of equal ones); with
``params={"predict_method": "predict_proba"}`` a classifier's probabilities, a DataFrame of one column per class
named by its label as text.

A Cox model's ``rules.py`` also defines ``survival(row, times)``; with ``params={"times": [t1, t2, ...]}`` (distinct
numbers >= 0) its ``predict`` answers the survival curves: a DataFrame of a row per input row and a column ``S(t=...)``
per time, in the order given, named by the time as a Python float (``S(t=365.0)``), holding the probability of no
event by that time. A wide table, as ``predict_proba``'s, because MLflow's scoring server serves a DataFrame as one
record per input row (``{"S(t=365.0)": 0.93, ...}``), which a long format (row, time, probability) would not keep
aligned with the input rows; an empty list (the signature's default) asks for the hazard ratios. (The service's
``/predict`` with times serves the curves as ``survival`` beside the ``predictions``; an MLflow model answers one
output, so here the curves take the predictions' place.)
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
    return FireRulesModel(rules.predict, config["columns"], config.get("classes"), getattr(rules, "survival", None))


def _probability(score: float) -> float:
    """1 / (1 + exp(-score)), without overflow."""
    if score >= 0:
        return 1.0 / (1.0 + math.exp(-score))
    odds = math.exp(score)
    return odds / (1.0 + odds)


class FireRulesModel:
    """A rule ensemble's ``predict(row)`` over whole tables, answering as the service scores; a Cox model's
    ``survival(row, times)`` (``survival_row``) where params ask for times."""

    def __init__(
        self,
        predict_row: Callable[[dict], Any],
        columns: list[str],
        classes: list | None,
        survival_row: Callable[[dict, list[float]], list[float]] | None = None,
    ):
        self.predict_row = predict_row
        self.columns = columns
        self.classes = classes
        self.survival_row = survival_row

    def predict(self, model_input: Any, params: dict[str, Any] | None = None) -> list | pd.DataFrame:
        """Predictions (a list), a classifier's probabilities (a DataFrame) where ``params`` say
        ``predict_method: predict_proba``, or a Cox model's survival curves (a DataFrame) at non-empty ``times``,
        for the rows of ``model_input`` (a DataFrame, or what makes one)."""
        method, times = self._method(params), self._times(params)
        frame = pd.DataFrame(model_input)
        missing = [name for name in self.columns if name not in frame.columns]
        if missing:
            raise ValueError(f"the input lacks the columns {missing}; the model reads {self.columns}")
        table = frame[self.columns].astype(object)
        rows = table.where(table.notna(), None).to_dict("records")  # NaN, NA and None: missing (None)
        if times and self.survival_row is not None:
            columns = [f"S(t={time!r})" for time in times]
            return pd.DataFrame([self.survival_row(row, times) for row in rows], index=frame.index, columns=columns)
        outputs = [self.predict_row(row) for row in rows]
        if method == "predict":
            return [self._label(output) for output in outputs]
        columns = [str(label) for label in self.classes or ()]
        return pd.DataFrame([self._probabilities(output) for output in outputs], index=frame.index, columns=columns)

    def _times(self, params: dict[str, Any] | None) -> list[float]:
        """The times of the curves asked for (none: the hazard ratios), as floats, each once (a column each), finite
        and >= 0; the module's survival() refuses a time past the training rows' last follow-up, as the service's
        scoring does (app.core.model_scoring.check_times)."""
        times = [float(time) for time in (params or {}).get("times") or ()]
        if not all(math.isfinite(time) and time >= 0 for time in times):
            raise ValueError(f"times must be finite numbers >= 0, got {times}")
        if len(set(times)) < len(times):
            raise ValueError(f"times must be distinct (a column each), got {times}")
        return times

    def _method(self, params: dict[str, Any] | None) -> str:
        known = {"predict_method", *(["times"] if self.survival_row is not None else [])}
        unknown = sorted(set(params or {}) - known)
        if unknown:
            raise ValueError(f"unknown params {unknown}: the model takes {sorted(known)}")
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
