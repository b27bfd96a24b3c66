"""The encoding of a table into the float matrix a forest splits on: numbers as they are, text one-hot.

One :class:`TableEncoding` is inferred from the training table and kept with the model, so every later
table (validation rows, scoring requests, a library user's DataFrame) is encoded exactly as the forest saw
its training rows. Missing values stay NaN in numeric columns; a missing category sets no indicator. Each
column records whether the table it was inferred from had missing values (``missing``): rules mention
missing values only where they can occur (``solver.rule_text``); a numeric column that held exactly two values
there (a 0/1 flag, 1/2 codes) records them (``binary``): its rules say which value (``smoker is 1``), not a
threshold between them. A document without them (written before) reads as unknown: thresholds, as before.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
import pandas as pd

CategoricalPolicy = Literal["onehot", "reject"]
CATEGORICAL_POLICIES: tuple[CategoricalPolicy, ...] = get_args(CategoricalPolicy)
DEFAULT_MAX_CATEGORIES = 64
MAX_EXAMPLES = 5


class TableError(ValueError):
    """A table that cannot be encoded; ``errors`` lists ``{"field", "message", "fix"}`` entries, one per fault;
    ``unseen_columns`` names the categorical columns at fault for levels the encoding does not know."""

    def __init__(self, summary: str, errors: list[dict], unseen_columns: Sequence[str] = ()):
        super().__init__(summary + " " + "; ".join(f"{e['field']}: {e['message']}" for e in errors))
        self.summary = summary
        self.errors = errors
        self.unseen_columns = list(unseen_columns)


def table_fault(field: str, message: str, fix: str) -> dict:
    return {"field": field, "message": message, "fix": fix}


@dataclass(frozen=True)
class ColumnSpec:
    name: str
    kind: str  # "numeric" or "categorical"
    categories: tuple[str, ...] = ()
    missing: bool | None = None  # whether the table it was inferred from had missing values here (None: unknown)
    # a numeric column's two values, the smaller first, where the table it was inferred from held exactly two (None:
    # more, fewer or unknown)
    binary: tuple[float, float] | None = None

    def encoded_names(self) -> list[str]:
        if self.kind == "numeric":
            return [self.name]
        return [f"{self.name}={category}" for category in self.categories]


class TableEncoding:
    def __init__(self, columns: Sequence[ColumnSpec]):
        self.columns = list(columns)
        self.feature_names = [name for column in self.columns for name in column.encoded_names()]
        self._feature_columns = [
            (column, None if column.kind == "numeric" else category)
            for column in self.columns
            for category in ((None,) if column.kind == "numeric" else column.categories)
        ]
        self._category_codes = {
            column.name: {category: code for code, category in enumerate(column.categories)}
            for column in self.columns
            if column.kind == "categorical"
        }

    @property
    def column_names(self) -> list[str]:
        return [column.name for column in self.columns]

    @classmethod
    def numeric(cls, names: Sequence[str], missing: Sequence[bool] | None = None) -> "TableEncoding":
        """Numeric columns ``names``; ``missing``: whether each had missing values (None: unknown)."""
        flags = [None] * len(names) if missing is None else [bool(flag) for flag in missing]
        return cls([ColumnSpec(str(name), "numeric", missing=flag) for name, flag in zip(names, flags)])

    @classmethod
    def of_matrix(cls, names: Sequence[str], X: np.ndarray) -> "TableEncoding":
        """Numeric columns ``names`` of the float matrix ``X``: whether each has missing values (NaN) and its two
        values where it holds exactly two."""
        return cls(
            [
                ColumnSpec(str(name), "numeric", missing=bool(np.isnan(X[:, j]).any()), binary=two_values(X[:, j]))
                for j, name in enumerate(names)
            ]
        )

    @classmethod
    def infer(
        cls, frame: pd.DataFrame, categorical: str = "onehot", max_categories: int = DEFAULT_MAX_CATEGORIES
    ) -> "TableEncoding":
        """Numeric where every present value is a number; categorical (one-hot, sorted levels) otherwise."""
        if categorical not in CATEGORICAL_POLICIES:
            raise ValueError(f"categorical must be one of {list(CATEGORICAL_POLICIES)}, got {categorical!r}")
        columns, refused = [], []
        for name in frame.columns:
            values = frame[name]
            missing = bool(values.isna().any())
            if _is_numeric(values):
                numbers = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
                columns.append(ColumnSpec(str(name), "numeric", missing=missing, binary=two_values(numbers)))
                continue
            categories = sorted({str(v) for v in values.dropna().unique()})
            if categorical == "reject":
                refused.append(
                    table_fault(
                        f"columns.{name}", "non-numeric column", "encode it as numbers first (categorical='reject')"
                    )
                )
            elif len(categories) > max_categories:
                refused.append(
                    table_fault(
                        f"columns.{name}",
                        f"{len(categories)} distinct text values",
                        f"at most {max_categories} categories are one-hot encoded; "
                        "drop the column or encode it yourself",
                    )
                )
            else:
                columns.append(ColumnSpec(str(name), "categorical", tuple(categories), missing))
        if refused:
            raise TableError("Some feature columns are not numeric.", refused)
        return cls(columns)

    def feature_column(self, j: int) -> tuple[ColumnSpec, str | None]:
        """(column, level) of encoded feature ``j``: the level it indicates, None for a numeric column."""
        return self._feature_columns[j]

    def to_dict(self) -> list[dict]:
        return [
            {
                "name": c.name,
                "kind": c.kind,
                **({"categories": list(c.categories)} if c.categories else {}),
                **({} if c.missing is None else {"missing": c.missing}),
                **({} if c.binary is None else {"values": list(c.binary)}),
            }
            for c in self.columns
        ]

    @classmethod
    def from_dict(cls, columns: list[dict]) -> "TableEncoding":
        """The encoding of ``to_dict``'s columns; a column without ``values`` (a document written before they were
        kept) is not known to hold two values."""
        return cls(
            [
                ColumnSpec(
                    c["name"],
                    c["kind"],
                    tuple(c.get("categories", ())),
                    c.get("missing"),
                    None if c.get("values") is None else (float(c["values"][0]), float(c["values"][1])),
                )
                for c in columns
            ]
        )

    def encode_frame(self, frame: pd.DataFrame, location: str = "columns") -> np.ndarray:
        return self.encode({str(name): frame[name].to_numpy() for name in frame.columns}, len(frame), location)

    def encode(self, table: Mapping[str, Sequence], n_rows: int, location: str = "columns") -> np.ndarray:
        """Encoded float64 matrix (n_rows, n_features); a :class:`TableError` naming every column at fault."""
        expected = self.column_names
        known = set(expected)
        errors = [
            table_fault(f"{location}.{name}", "missing column", "send every column of the training table")
            for name in expected
            if name not in table
        ]
        errors += [
            table_fault(f"{location}.{name}", "unknown column", f"remove it; the columns are {expected}")
            for name in table
            if name not in known
        ]
        if errors:
            raise TableError("The columns do not match the training table's.", errors)
        encoded = np.zeros((n_rows, len(self.feature_names)), dtype=np.float64)
        position = 0
        unseen = []
        for column in self.columns:
            width = 1 if column.kind == "numeric" else len(column.categories)
            block = encoded[:, position : position + width]
            field = f"{location}.{column.name}"
            if column.kind == "numeric":
                error = _encode_numeric(table[column.name], block[:, 0], field)
            else:
                error = _encode_categorical(self._category_codes[column.name], column, table[column.name], block, field)
                if error:
                    unseen.append(column.name)
            position += width
            if error:
                errors.append(error)
        if errors:
            raise TableError("Some values cannot be encoded.", errors, unseen)
        return encoded


def _encode_numeric(values, out: np.ndarray, field: str) -> dict | None:
    try:
        out[:] = np.asarray(values, dtype=np.float64)
        return None
    except (TypeError, ValueError):
        bad = [(row, value) for row, value in enumerate(values) if not _is_number(value)]
        examples = ", ".join(f"row {row}: {value!r}" for row, value in bad[:MAX_EXAMPLES])
        return table_fault(field, f"{len(bad)} non-numeric values ({examples})", "send numbers (or null)")


def _encode_categorical(codes: dict, column: ColumnSpec, values, out: np.ndarray, field: str) -> dict | None:
    unknown = set()
    for row, value in enumerate(values):
        if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
            continue  # missing category: no indicator set
        code = codes.get(str(value))
        if code is None:
            unknown.add(str(value))
        else:
            out[row, code] = 1.0
    if unknown:
        return table_fault(
            field, f"unknown categories {sorted(unknown)[:MAX_EXAMPLES]}", f"use one of {list(column.categories)}"
        )
    return None


def two_values(values: np.ndarray) -> tuple[float, float] | None:
    """(the smaller, the larger) of a float column's values where it holds exactly two besides NaN, else None."""
    present = pd.unique(values[~np.isnan(values)])
    if len(present) != 2:
        return None
    low, high = sorted(float(value) for value in present)
    return low, high


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


def has_text_columns(frame) -> bool:
    """Whether a table needs a :class:`TableEncoding` (a DataFrame with a column that is not numbers)."""
    return isinstance(frame, pd.DataFrame) and not all(_is_numeric(frame[name]) for name in frame.columns)
