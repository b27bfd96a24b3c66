"""The table encoding kept with each dataset: numeric columns as they are, text columns one-hot.

The same object encodes the uploaded training table and every later scoring request, so a model
sees its inputs exactly as its forest did during training.
"""
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from app.errors import ProblemError, field_error

MAX_EXAMPLES = 5


@dataclass(frozen=True)
class ColumnSpec:
    name: str
    kind: str  # "numeric" or "categorical"
    categories: tuple[str, ...] = ()

    def encoded_names(self) -> list[str]:
        if self.kind == "numeric":
            return [self.name]
        return [f"{self.name}={category}" for category in self.categories]


class TableEncoding:
    def __init__(self, columns: Sequence[ColumnSpec]):
        self.columns = list(columns)
        self.feature_names = [name for column in self.columns for name in column.encoded_names()]
        self._category_codes = {
            column.name: {category: code for code, category in enumerate(column.categories)}
            for column in self.columns if column.kind == "categorical"
        }

    @classmethod
    def infer(cls, frame: pd.DataFrame, categorical: str, max_categories: int) -> "TableEncoding":
        """Numeric where every present value is a number; categorical (one-hot) otherwise."""
        columns, refused = [], []
        for name in frame.columns:
            values = frame[name]
            if _is_numeric(values):
                columns.append(ColumnSpec(str(name), "numeric"))
                continue
            categories = sorted({str(v) for v in values.dropna().unique()})
            if categorical == "reject":
                refused.append(field_error(f"columns.{name}", "non-numeric column",
                                           "encode it as numbers before uploading (FIRE_CATEGORICAL=reject)"))
            elif len(categories) > max_categories:
                refused.append(field_error(f"columns.{name}", f"{len(categories)} distinct text values",
                                           f"at most {max_categories} categories are one-hot encoded; "
                                           "drop the column or encode it yourself"))
            else:
                columns.append(ColumnSpec(str(name), "categorical", tuple(categories)))
        if refused:
            raise ProblemError(422, "Some feature columns are not numeric.", refused)
        return cls(columns)

    def to_dict(self) -> list[dict]:
        return [{"name": c.name, "kind": c.kind, **({"categories": list(c.categories)} if c.categories else {})}
                for c in self.columns]

    @classmethod
    def from_dict(cls, columns: list[dict]) -> "TableEncoding":
        return cls([ColumnSpec(c["name"], c["kind"], tuple(c.get("categories", ()))) for c in columns])

    def encode(self, table: dict[str, Sequence], n_rows: int, location: str = "columns") -> np.ndarray:
        """Encoded float64 matrix (n_rows, n_features); 422 naming every column at fault."""
        expected = [column.name for column in self.columns]
        errors = [field_error(f"{location}.{name}", "missing column", "send every column of the dataset")
                  for name in expected if name not in table]
        errors += [field_error(f"{location}.{name}", "unknown column",
                               f"remove it; the columns are {expected}")
                   for name in table if name not in self._known_names]
        if errors:
            raise ProblemError(422, "The columns do not match the dataset's.", errors)
        encoded = np.zeros((n_rows, len(self.feature_names)), dtype=np.float64)
        position = 0
        for column in self.columns:
            values = table[column.name]
            if column.kind == "numeric":
                error = self._encode_numeric(values, encoded[:, position], f"{location}.{column.name}")
                position += 1
            else:
                error = self._encode_categorical(column, values, encoded[:, position:position + len(column.categories)],
                                                 f"{location}.{column.name}")
                position += len(column.categories)
            if error:
                errors.append(error)
        if errors:
            raise ProblemError(422, "Some values cannot be encoded.", errors)
        return encoded

    @property
    def _known_names(self) -> set[str]:
        return {column.name for column in self.columns}

    @staticmethod
    def _encode_numeric(values, out: np.ndarray, field: str) -> dict | None:
        try:
            out[:] = np.asarray(values, dtype=np.float64)
            return None
        except (TypeError, ValueError):
            bad = [(row, value) for row, value in enumerate(values) if not _is_number(value)]
            examples = ", ".join(f"row {row}: {value!r}" for row, value in bad[:MAX_EXAMPLES])
            return field_error(field, f"{len(bad)} non-numeric values ({examples})", "send numbers (or null)")

    def _encode_categorical(self, column: ColumnSpec, values, out: np.ndarray, field: str) -> dict | None:
        codes = self._category_codes[column.name]
        unknown = set()
        for row, value in enumerate(values):
            if value is None or (isinstance(value, float) and np.isnan(value)):
                continue  # missing category: no indicator set
            code = codes.get(str(value))
            if code is None:
                unknown.add(str(value))
            else:
                out[row, code] = 1.0
        if unknown:
            return field_error(field, f"unknown categories {sorted(unknown)[:MAX_EXAMPLES]}",
                               f"use one of {list(column.categories)}")
        return None


def _is_number(value) -> bool:
    if value is None:
        return True
    try:
        float(value)
        return not isinstance(value, (str, bytes)) or value.strip() != ""
    except (TypeError, ValueError):
        return False


def _is_numeric(values: pd.Series) -> bool:
    if pd.api.types.is_bool_dtype(values) or pd.api.types.is_numeric_dtype(values):
        return True
    present = values.dropna()
    return len(present) > 0 and pd.to_numeric(present, errors="coerce").notna().all()
