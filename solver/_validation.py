"""Checks shared by the documents the library reads (forests, rule ensembles, uploaded models): each
failure names the offending entry by its path in the document."""

import math
from collections.abc import Callable, Mapping, Sequence
from numbers import Integral, Real

import numpy as np

MAX_FEATURE_NAME_LENGTH = 1024


class SchemaError(ValueError):
    """An invalid document; ``field`` is the JSON path of the offending entry, ``detail`` what is wrong."""

    def __init__(self, field: str, detail: str):
        super().__init__(f"{field}: {detail}" if field else detail)
        self.field = field
        self.detail = detail


def is_integer(value) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def require_finite(value, field: str, error: Callable[[str, str], SchemaError]) -> float:
    if not isinstance(value, Real) or isinstance(value, bool):
        raise error(field, f"must be a number, got {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise error(field, f"is {value} but must be a finite number")
    return number


def check_feature_names(names: list, field: str, error: Callable[[str, str], SchemaError]) -> None:
    """Feature names: non-empty strings of at most MAX_FEATURE_NAME_LENGTH characters, each once."""
    seen: dict[str, int] = {}
    for j, name in enumerate(names):
        if not isinstance(name, str) or not name or len(name) > MAX_FEATURE_NAME_LENGTH:
            raise error(f"{field}/{j}", f"must be a non-empty string of at most {MAX_FEATURE_NAME_LENGTH} characters")
        if name in seen:
            raise error(f"{field}/{j}", f"{name!r} repeats {field}/{seen[name]}; feature names must be unique")
        seen[name] = j


def check_keys(
    prefix: str, mapping: Mapping, allowed: set[str], required: Sequence[str], error: Callable[[str, str], SchemaError]
) -> None:
    where = f"{prefix}/" if prefix else ""
    for key in required:
        if key not in mapping:
            raise error(f"{where}{key}", "is required but missing")
    unknown = sorted(str(key) for key in mapping if key not in allowed)
    if unknown:
        raise error(f"{where}{unknown[0]}", f"is not a known key; allowed keys are {', '.join(sorted(allowed))}")


_ARRAY_KINDS = {"int": ("iu", "integers"), "float": ("iuf", "numbers"), "bool": ("b", "booleans")}


def node_array(values, field: str, kind: str, error: Callable[[str, str], SchemaError]) -> np.ndarray:
    """A per-node list/array as a 1-D numpy array of int64 (``kind="int"``), finite float64
    (``"float"``) or bool (``"bool"``); the range of integers is the caller's to check."""
    accepted_kinds, noun = _ARRAY_KINDS[kind]
    if not isinstance(values, (list, tuple, np.ndarray)):
        raise error(field, f"must be a list of {noun}, got {type(values).__name__}")
    try:
        array = np.asarray(values)
    except (ValueError, TypeError, OverflowError):
        array = np.asarray(values, dtype=object)
    if array.ndim != 1:
        raise error(field, f"must be a flat list of {noun} (one per node)")
    if array.size and array.dtype.kind not in accepted_kinds:
        if isinstance(values, np.ndarray):
            raise error(field, f"must hold {noun}, got dtype {array.dtype}")
        bad = next((i for i, v in enumerate(values) if not _matches_kind(v, kind)), None)
        if bad is not None:
            within = " (integers within 64 bits)" if is_integer(values[bad]) else ""
            raise error(f"{field}/{bad}", f"is {values[bad]!r} but this list must hold {noun}{within}")
    if kind == "float":
        array = array.astype(np.float64)
        nonfinite = np.flatnonzero(~np.isfinite(array))
        if nonfinite.size:
            bad = int(nonfinite[0])
            raise error(f"{field}/{bad}", f"is {array[bad]} but must be a finite number")
    elif kind == "int":
        array = array.astype(np.int64)
    else:
        array = array.astype(np.bool_)
    return array


def _matches_kind(value, kind: str) -> bool:
    if kind == "bool":
        return isinstance(value, (bool, np.bool_))
    if is_integer(value):  # numpy holds integers of at most 64 bits
        return -(2**63) <= value < 2**63
    return kind == "float" and isinstance(value, Real) and not isinstance(value, bool)
