"""Checks shared by the JSON documents the library reads (forests, rule ensembles): each failure names the
offending entry by its JSON path."""

import math
from numbers import Integral, Real
from typing import Mapping, Sequence


class SchemaError(ValueError):
    """An invalid document; ``field`` is the JSON path of the offending entry, ``detail`` what is wrong."""

    def __init__(self, field: str, detail: str):
        super().__init__(f"{field}: {detail}" if field else detail)
        self.field = field
        self.detail = detail


def is_integer(value) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def require_finite(value, field: str, error: type[SchemaError]) -> float:
    if not isinstance(value, Real) or isinstance(value, bool):
        raise error(field, f"must be a number, got {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise error(field, f"is {value} but must be a finite number")
    return number


def check_keys(prefix: str, mapping: Mapping, allowed: set[str], required: Sequence[str],
               error: type[SchemaError]) -> None:
    where = f"{prefix}/" if prefix else ""
    for key in required:
        if key not in mapping:
            raise error(f"{where}{key}", "is required but missing")
    unknown = sorted(str(key) for key in mapping if key not in allowed)
    if unknown:
        raise error(f"{where}{unknown[0]}", f"is not a known key; allowed keys are {', '.join(sorted(allowed))}")
