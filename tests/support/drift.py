"""Drift through the API, as the drift tests read it: counts flushed, a model's report, rows as JSON records, and
each bin's rows computed with pandas (independently of app.core.drift)."""

import math

import numpy as np
import pandas as pd


def flush(stack) -> None:
    """Add what the API process has counted to Redis now (its thread does every FIRE_DRIFT_FLUSH_SECONDS)."""
    stack.client.app.state.core.monitor.flush()


def drift(stack, model_id: str, **query) -> dict:
    response = stack.client.get(f"/v1/models/{model_id}/drift", params=query)
    assert response.status_code == 200, response.text
    return response.json()


def records(frame: pd.DataFrame) -> list[dict]:
    """The rows as MLflow's dataframe_records, a missing number as null."""
    return [
        {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
        for row in frame.to_dict(orient="records")
    ]


def expected_bins(column: dict, values: pd.Series) -> np.ndarray:
    """Rows per bin of a report's ``column``, computed with pandas: a numeric column's (e_k-1, e_k] intervals, a text
    column's levels, and the missing bin last."""
    if column["kind"] == "numeric":
        codes = pd.cut(values, [-np.inf, *column["edges"], np.inf], right=True, labels=False)
    else:
        codes = values.map({level: k for k, level in enumerate(column["bins"][:-1])})
    codes = codes.fillna(len(column["bins"]) - 1).astype(int)
    return np.bincount(codes, minlength=len(column["bins"]))
