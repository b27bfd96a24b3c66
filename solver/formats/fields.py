"""Reading the entries of a parsed upload (XGBoost and LightGBM JSON): each failure is a
ForestFormatError naming the entry by its JSON pointer."""

from typing import Any

import numpy as np

from .errors import ForestFormatError, pointer

_TYPE_WORDS = {
    dict: "an object",
    list: "an array",
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
}


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, (list, np.ndarray)):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (int, float)):
        return "a number"
    return type(value).__name__


def get(entry: Any, key: str, path: str, types=None, *, required: bool = True, default: Any = None):
    """``entry[key]`` for the object at ``path``, of one of ``types`` when given."""
    if not isinstance(entry, dict):
        raise ForestFormatError(path or "file", f"expected an object at {path or '/'}, got {type_name(entry)}.")
    if key not in entry:
        if required:
            raise ForestFormatError(pointer(path, key), f"missing required key '{key}'.")
        return default
    value = entry[key]
    if types is not None and not isinstance(value, types):
        names = types if isinstance(types, tuple) else (types,)
        expected = " or ".join(_TYPE_WORDS.get(t, t.__name__) for t in names)
        raise ForestFormatError(pointer(path, key), f"expected {expected}, got {type_name(value)}.")
    return value


def integer(value: Any, path: str) -> int:
    """An integer, possibly written as a string (XGBoost writes parameters as strings)."""
    if isinstance(value, (bool, np.bool_)):
        raise ForestFormatError(path, f"expected an integer, got {type_name(value)}.")
    try:
        if isinstance(value, str):
            return int(value.strip())
        if isinstance(value, (int, np.integer)):
            return int(value)
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            return int(value)
    except (ValueError, OverflowError):
        pass
    raise ForestFormatError(path, f"expected an integer, got {value!r:.40}.")


def given_names(feature_names: Any) -> Any:
    """The feature names of an upload for TreeEnsemble to check; None (default names) where it gives
    none (no entry or an empty list)."""
    return None if feature_names is None or (isinstance(feature_names, list) and not feature_names) else feature_names
