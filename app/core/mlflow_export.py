"""A model as a zipped MLflow model directory (``GET /v1/models/{id}/export?format=mlflow``), written without
MLflow (a test dependency only), in the format MLflow 3 reads:

* ``MLmodel``: a ``python_function`` flavor whose ``loader_module`` is ``code/fire_rules_pyfunc.py``
  (``app/core/mlflow_pyfunc.py``) reading ``data/``; a ``signature`` whose inputs are the training table's
  columns (numeric: double, text: string) and whose params schema declares ``predict_method`` (``predict``, or a
  classifier's ``predict_proba``) and, for a Cox model (its rules document has a ``baseline_hazard``), ``times``
  (a list of doubles, default ``[]``: the hazard ratios; given, the survival curves at those times), so
  ``mlflow models serve`` passes them (it passes only the params the schema declares, filling in their
  defaults); the FIRE model's id, name, version, target, loss and output as ``metadata``;
* ``data/rules.py``: the dependency-free Python export with its header, ``data/model.json``: the columns and a
  classifier's classes;
* ``python_env.yaml``, ``conda.yaml`` and ``requirements.txt``: the Python version of the service that wrote it,
  and pandas (pyfunc hands the loader a DataFrame);
* ``input_example.json`` (and its ``serving_input_example.json``): the model stores no training rows, so its rows
  are built from the rules: per numeric column the smallest, middle and largest cut point the rules compare it
  with (null where no rule does), per text column its levels in turn.

The bytes depend on the model, the Python version and the loader's source alone: every entry has a fixed
timestamp and mode, and ``utc_time_created`` is the model's promotion time.
"""

from __future__ import annotations

import io
import json
import platform
import re
import zipfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from app.core.model_documents import ModelInfo

LOADER_SOURCE = Path(__file__).with_name("mlflow_pyfunc.py")
LOADER_MODULE = "fire_rules_pyfunc"
PYTHON_VERSION = platform.python_version()
SIGNATURE_TYPES = {"numeric": "double", "categorical": "string"}  # solver.encoding's column kinds
PREDICT_METHOD_PARAM = {"name": "predict_method", "default": "predict", "shape": None, "type": "string"}
TIMES_PARAM = {"name": "times", "default": [], "shape": [-1], "type": "double"}  # a Cox model's curves
EXAMPLE_ROWS = 3
FLOAT32_MAX = 3.4028234663852886e38  # a cut at or beyond it is no number of the data (solver.rule_text)
ZIP_TIME = (1980, 1, 1, 0, 0, 0)
# what a YAML reader refuses or reads as a line break in a double-quoted scalar (JSON leaves them as they are)
_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]")


def mlflow_model_zip(model: ModelInfo, rules: str, output: str, python_version: str = PYTHON_VERSION) -> bytes:
    """The zipped MLflow model directory of ``model`` (module docstring): ``rules`` is its Python export with
    header (``ModelStore.export``), ``output`` what the MLflow model predicts (its ``metadata``)."""
    names = [column["name"] for column in model.columns]
    example = {"columns": names, "data": example_rows(model.columns, model.ensemble)}
    inputs = [
        {"type": SIGNATURE_TYPES[column["kind"]], "name": column["name"], "required": True} for column in model.columns
    ]
    params = [PREDICT_METHOD_PARAM, *([TIMES_PARAM] if model.ensemble.get("baseline_hazard") else [])]
    signature = {"inputs": json.dumps(inputs), "params": json.dumps(params)}
    mlmodel = {
        "flavors": {
            "python_function": {
                "loader_module": LOADER_MODULE,
                "code": "code",
                "data": "data",
                "env": {"conda": "conda.yaml", "virtualenv": "python_env.yaml"},
                "python_version": python_version,
            }
        },
        "metadata": {
            "fire_model_id": model.id,
            "name": model.name,
            "version": model.version,
            "target": model.target,
            "loss": model.loss,
            "output": output,
            # the rows' offset and exposure columns (where the model has them): the pyfunc does not read them
            **{name: value for name in ("offset", "exposure") if (value := getattr(model, name, None)) is not None},
        },
        "model_uuid": model.id,
        "saved_input_example_info": {
            "artifact_path": "input_example.json",
            "pandas_orient": "split",
            "serving_input_path": "serving_input_example.json",
            "type": "dataframe",
        },
        "signature": signature,
        "utc_time_created": datetime.fromtimestamp(model.created_at, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f"),
    }
    files = {
        "MLmodel": _yaml(mlmodel),
        f"code/{LOADER_MODULE}.py": LOADER_SOURCE.read_text(encoding="utf-8"),
        "data/rules.py": rules,
        "data/model.json": json.dumps({"columns": names, "classes": model.classes}, indent=2) + "\n",
        "requirements.txt": "pandas\n",
        "python_env.yaml": (
            f"python: {python_version}\nbuild_dependencies:\n- pip\ndependencies:\n- -r requirements.txt\n"
        ),
        "conda.yaml": (
            f"name: mlflow-env\nchannels:\n- conda-forge\ndependencies:\n- python={python_version}\n- pip\n"
            "- pip:\n  - pandas\n"
        ),
        "input_example.json": json.dumps(example),
        "serving_input_example.json": json.dumps({"dataframe_split": example}, indent=2),
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, text in files.items():
            entry = zipfile.ZipInfo(path, ZIP_TIME)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = 0o644 << 16  # -rw-r--r--
            archive.writestr(entry, text.encode("utf-8"))
    return buffer.getvalue()


def example_rows(columns: list[dict[str, Any]], ensemble: dict[str, Any]) -> list[list]:
    """EXAMPLE_ROWS rows over ``columns`` (TableEncoding.to_dict) from the rules of ``ensemble`` (a fire-rules
    document): a numeric column's smallest, middle and largest cut point (the number the rule text shows), None
    where no rule compares it; a text column's levels in turn (None without levels)."""
    cuts: dict[str, set[float]] = {}
    for rule in ensemble.get("rules", ()):
        for condition in rule["conditions"]:
            cut = condition.get("display_threshold", condition["threshold"])
            if abs(cut) < FLOAT32_MAX:
                cuts.setdefault(condition["feature"], set()).add(cut)
    values = [
        sorted(cuts.get(column["name"], ())) if column["kind"] == "numeric" else column.get("categories", [])
        for column in columns
    ]
    return [
        [
            (
                None
                if not choices
                else choices[(len(choices) - 1) * row // (EXAMPLE_ROWS - 1)]
                if column["kind"] == "numeric"
                else choices[row % len(choices)]
            )
            for column, choices in zip(columns, values)
        ]
        for row in range(EXAMPLE_ROWS)
    ]


def _yaml(mapping: dict[str, Any], indent: str = "") -> str:
    """Block YAML of nested mappings whose leaves are JSON scalars."""
    lines = []
    for key, value in mapping.items():
        if isinstance(value, dict):
            lines.append(f"{indent}{key}:\n{_yaml(value, indent + '  ')}")
        else:
            lines.append(f"{indent}{key}: {_yaml_scalar(value)}\n")
    return "".join(lines)


def _yaml_scalar(value: Any) -> str:
    """The JSON text of a string, number, boolean or None: YAML reads it as the same value once the characters
    YAML reads otherwise (_YAML_UNSAFE) are escaped."""
    return _YAML_UNSAFE.sub(
        lambda match: "\\u" + format(ord(match.group()), "04x"), json.dumps(value, ensure_ascii=False)
    )
