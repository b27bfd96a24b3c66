"""One chunk of a batch scored (a chunk job's work, ``worker/batch.py``): its columns read as the model reads them,
a row that cannot be scored named by its column and its row in the file."""

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from app.core.batch.files import NUMERIC_TYPES, input_columns
from app.core.errors import Invalid
from app.core.model_scoring import Rows, ScoringModel, score_rows
from app.core.tables import EXPOSURE_RANGE, MAX_ABS_VALUE, exposure_in_range, max_offset
from solver.encoding import TableEncoding


class BatchRowsInvalid(Exception):
    """Rows of a chunk that cannot be scored: the message names the column and the file's first bad row."""


@dataclass
class ScoredChunk:
    """One chunk scored: the encoded rows (as the model's forest splits on them) and the result's columns."""

    X: np.ndarray
    table: pa.Table


class _KeepEncoded(TableEncoding):
    """The model's encoding, keeping the matrix that ``score_rows`` encodes (for :attr:`ScoredChunk.X`)."""

    def __init__(self, encoding: TableEncoding):
        self.__dict__.update(encoding.__dict__)
        self.encoded: np.ndarray | None = None

    def encode(self, table, n_rows, location="columns"):
        self.encoded = super().encode(table, n_rows, location)
        return self.encoded


def score_chunk(
    scoring: ScoringModel,
    chunk: pa.Table,
    *,
    first_row: int = 0,
    explain: bool = False,
    times: Sequence[float] | None = None,
    id_column: str | None = None,
) -> ScoredChunk:
    """Score one chunk of a batch (its rows in the model's original columns, as a pyarrow table) with the service's
    scoring (``score_rows``: the model's TableEncoding and RuleEnsemble): the encoded rows and the result's columns.
    ``first_row``: the number of the chunk's first row in the file. A value that cannot be scored raises
    :class:`BatchRowsInvalid` naming the column and the file's first bad row. The one place a batch's rows are
    scored; the result's ``X`` is the chunk's encoded rows (the chunk job counts them for drift once stored)."""
    n_rows = chunk.num_rows
    table = {name: _column_values(scoring, name, chunk.column(name), first_row) for name in chunk.column_names}
    if id_column is not None and id_column not in input_columns(scoring, None):
        table.pop(id_column, None)  # not a feature: copied into the result as it is
    keep = _KeepEncoded(scoring.encoding)
    try:
        scores = score_rows(
            replace(scoring, encoding=keep), lambda names: Rows(table, n_rows, "columns"), explain, n_rows, times
        )
    except Invalid as error:
        raise BatchRowsInvalid(_located(error, scoring, table, first_row)) from error
    assert keep.encoded is not None
    columns: dict[str, pa.Array] = {"row": pa.array(np.arange(first_row, first_row + n_rows, dtype=np.int64))}
    if id_column is not None:
        columns[id_column] = chunk.column(id_column).combine_chunks()
    columns["prediction"] = pa.array(scores.predictions)
    if scores.probabilities is not None and scores.classes is not None:
        probabilities = np.asarray(scores.probabilities, dtype=np.float64)
        if probabilities.ndim == 1:  # a binary classifier's P(classes[1])
            probabilities = np.column_stack([1.0 - probabilities, probabilities])
        for k, label in enumerate(scores.classes):
            columns[f"probability_{label}"] = pa.array(probabilities[:, k])
    if scores.survival is not None and scores.times is not None:
        survival = np.asarray(scores.survival, dtype=np.float64)
        for k, time in enumerate(scores.times):
            columns[f"survival_{time:g}"] = pa.array(survival[:, k])
    if scores.explanations is not None:
        columns["rules"] = pa.array(scores.explanations, type=pa.list_(pa.int64()))
        columns["contributions"] = pa.array(scores.contributions)
        if scores.linear_contributions is not None:
            columns["linear_contributions"] = pa.array(scores.linear_contributions)
    return ScoredChunk(keep.encoded, pa.table(columns))


def _column_values(scoring: ScoringModel, name: str, values: pa.ChunkedArray, first_row: int):
    """A chunk's column as ``score_rows`` reads it: float64 numbers for a number column (text read as numbers by
    Arrow's cast, or where it refuses a cell (spaces around it) by ``float``: both correctly rounded, as every
    entrance reads numbers, ``app.core.tables``; a cell that is none raises :class:`BatchRowsInvalid` with its row),
    text or None per row for a categorical one."""
    kinds = {column.name: column.kind for column in scoring.encoding.columns}
    numeric = kinds.get(name) == "numeric" or name in scoring.row_columns
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    if numeric:
        if pa.types.is_boolean(values.type):
            raise BatchRowsInvalid(f"column '{name}': true/false in a number column (row {first_row}); send numbers")
        if any(test(values.type) for test in NUMERIC_TYPES):
            return values.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        try:  # text read as numbers by Arrow at once; where it refuses a cell, cell by cell to name the row
            return pc.cast(values, pa.float64()).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
        text = values.cast(pa.string()).to_numpy(zero_copy_only=False)
        numbers = np.full(len(text), np.nan)
        for row, cell in enumerate(text):
            if cell is None:
                continue
            try:
                numbers[row] = float(cell)
            except ValueError:
                raise BatchRowsInvalid(
                    f"column '{name}': row {first_row + row} has {cell!r}, not a number; send numbers "
                    "(or an empty cell for a missing value)"
                ) from None
        return numbers
    if pa.types.is_integer(values.type) or pa.types.is_floating(values.type):
        cells = values.to_pylist()
        return np.array([None if cell is None else str(cell) for cell in cells], dtype=object)
    return values.cast(pa.string()).to_numpy(zero_copy_only=False)


def _located(error: Invalid, scoring: ScoringModel, table: dict, first_row: int) -> str:
    """A scoring error of a chunk as a sentence naming each column at fault and the file's first bad row in it."""
    parts = []
    categories = {column.name: set(column.categories) for column in scoring.encoding.columns if column.categories}
    for fault in error.faults:
        if "." not in fault.field:  # rows of the chunk, no column (score_rows' guard of a score that is not finite)
            parts.append(f"the chunk from row {first_row}: {fault.message}; {fault.fix}")
            continue
        column = fault.field.split(".", 1)[1]
        row = None
        values = table.get(column)
        if column in categories and values is not None:
            known = categories[column]
            row = next((r for r, value in enumerate(values) if value is not None and str(value) not in known), None)
        elif values is not None and isinstance(values, np.ndarray) and values.dtype == np.float64:
            # score_rows names the chunk's row: the file's is named here, by score_rows' own bounds
            if column == scoring.exposure:
                fine = exposure_in_range(values)
            elif column == scoring.offset:
                fine = np.abs(np.nan_to_num(values, nan=0.0)) <= max_offset(scoring.ensemble.link)
            else:
                fine = np.isnan(values) | (np.abs(values) <= MAX_ABS_VALUE)  # a missing value is no fault
            bad = np.flatnonzero(~fine)
            row = int(bad[0]) if len(bad) else None
        message = fault.message
        if row is not None and column in scoring.row_columns:
            message = (
                f"not a valid exposure (a number {EXPOSURE_RANGE})"
                if column == scoring.exposure
                else f"not a valid offset (within ±{max_offset(scoring.ensemble.link):.4g})"
            )
        value = None if row is None or values is None else values[row]
        value = value.item() if isinstance(value, np.generic) else value
        where = "" if row is None else f" row {first_row + row} has {value!r}:"
        parts.append(f"column '{column}':{where} {message}; {fault.fix}")
    return f"{error.detail} " + "; ".join(parts)
