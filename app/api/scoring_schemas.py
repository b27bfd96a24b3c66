"""The scoring bodies at the edge of the API (pydantic), with OpenAPI examples: MLflow-style requests (records,
columns, a split dataframe; ``params``) and the answer of ``/predict``."""

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.api.schemas import StrictBody
from app.core.errors import FieldFault, Invalid
from app.core.model_scoring import Rows


class DataframeSplit(StrictBody):
    columns: list[str]
    data: list[list[Any]]
    index: list[Any] | None = None


class ScoringParams(StrictBody):
    """MLflow's ``params`` of a scoring body."""

    explain: bool = Field(False, description="as the explain query parameter of /predict (ignored by /invocations)")
    predict_method: Literal["predict", "predict_proba"] = Field(
        "predict",
        description=(
            "/invocations: predict answers the predictions; predict_proba (classifiers) a record per row of each "
            "class's probability, keyed by the class label, as MLflow serves a scikit-learn classifier logged with "
            "pyfunc_predict_fn='predict_proba'. /predict always answers both"
        ),
    )
    times: list[float] | None = Field(
        None,
        description=(
            "survival models (Cox loss): times (from 0 to the last follow-up time of the model's training rows, the "
            "last of its baseline_hazard times: a 422 past it) at which to answer each row's survival curve S(t | x) "
            "(`survival`, a row of len(times) per row) beside its hazard ratio; a 422 for other models"
        ),
    )


class PredictRequest(StrictBody):
    """MLflow scoring-server body: exactly one of the four fields, in the dataset's original columns, and
    optionally ``params``."""

    dataframe_split: DataframeSplit | None = None
    dataframe_records: list[dict[str, Any]] | None = None
    instances: list[Any] | None = None
    inputs: list[Any] | dict[str, list[Any]] | None = None
    params: ScoringParams | None = None

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "examples": [
                {
                    "dataframe_split": {
                        "columns": [
                            "Sex",
                            "Length",
                            "Diameter",
                            "Height",
                            "Whole_weight",
                            "Shucked_weight",
                            "Viscera_weight",
                            "Shell_weight",
                        ],
                        "data": [["M", 0.455, 0.365, 0.095, 0.514, 0.2245, 0.101, 0.15]],
                    }
                },
                {
                    "dataframe_records": [
                        {
                            "Sex": "F",
                            "Length": 0.53,
                            "Diameter": 0.42,
                            "Height": 0.135,
                            "Whole_weight": 0.677,
                            "Shucked_weight": 0.2565,
                            "Viscera_weight": 0.1415,
                            "Shell_weight": 0.21,
                        }
                    ]
                },
            ]
        },
    )

    @model_validator(mode="after")
    def check_exactly_one(self):
        given = [
            name
            for name in ("dataframe_split", "dataframe_records", "instances", "inputs")
            if getattr(self, name) is not None
        ]
        if len(given) != 1:
            raise ValueError(
                f"give exactly one of dataframe_split, dataframe_records, instances, inputs (got {given or 'none'})"
            )
        return self

    def table(self, column_names: list[str]) -> Rows:
        """The rows of whichever of the four shapes was sent (``column_names``: the order of a list of rows)."""
        if self.dataframe_split is not None:
            split = self.dataframe_split
            return columns_from_rows(split.columns, split.data, "dataframe_split.columns", "dataframe_split.data")
        if self.dataframe_records is not None:
            return _columns_from_records(self.dataframe_records, "dataframe_records")
        name = "instances" if self.instances is not None else "inputs"
        payload = self.instances if self.instances is not None else self.inputs
        assert payload is not None  # check_exactly_one: the body holds one of the four shapes
        if isinstance(payload, dict):
            lengths = {len(values) for values in payload.values()}
            if len(lengths) > 1:
                raise Invalid(
                    "Columns of different lengths.",
                    [FieldFault(name, f"lengths {sorted(lengths)}", "send equally long columns")],
                )
            return Rows(payload, lengths.pop() if lengths else 0, name)
        if payload and all(isinstance(row, dict) for row in payload):
            return _columns_from_records(payload, name)
        if all(isinstance(row, list) for row in payload):
            return columns_from_rows(column_names, payload, name)
        raise Invalid(
            f"'{name}' must be a list of records, a list of rows or an object of columns.",
            [FieldFault(name, "unrecognized shape", f"send rows in the column order {column_names}, or records")],
        )


def _columns_from_records(records: list[dict], location: str) -> Rows:
    names = list(records[0]) if records else []
    faults = [
        FieldFault(
            f"{location}[{i}]",
            f"columns {sorted(set(row) ^ set(names))} differ from row 0's",
            "send the same columns in every record",
        )
        for i, row in enumerate(records)
        if row.keys() != records[0].keys()
    ][:10]
    if faults:
        raise Invalid("The records do not share their columns.", faults)
    return Rows({name: [row[name] for row in records] for name in names}, len(records), location)


def columns_from_rows(names: list[str], rows: list[list], location: str, rows_location: str | None = None) -> Rows:
    """Rows of values in the order of ``names`` (at ``rows_location``, default ``location``) as the columns named at
    ``location``; a name given twice is kept in ``Rows.names`` (the column rule refuses it)."""
    at = rows_location or location
    faults = [
        FieldFault(f"{at}[{i}]", f"{len(row)} values for {len(names)} columns", "send one value per column")
        for i, row in enumerate(rows)
        if len(row) != len(names)
    ][:10]
    if faults:
        raise Invalid("Rows and columns do not match.", faults)
    values: list[Sequence[Any]] = list(zip(*rows)) if rows else [[] for _ in names]
    return Rows(dict(zip(names, values)), len(rows), location, names)


class AnsweringModel(BaseModel):
    id: str
    name: str
    version: int


class PredictResponse(BaseModel):
    """A regression model's predictions are numbers, a count model's (Poisson loss) rates; a classifier's are
    labels, with probabilities: a binary classifier's (logistic loss) the probability of classes[1] per row (as
    before K classes were supported), a K-class classifier's (multinomial loss) one row of K per row."""

    predictions: list[float | str | bool | int] = Field(
        description=(
            "per row: the prediction; a count model's rate exp(log rate); a classifier's label (a binary one's "
            "classes[1] where its probability is above 0.5; a K-class one's most probable class, the first of equal "
            "ones)"
        )
    )
    probabilities: list[float] | list[list[float]] | None = Field(
        None,
        description=(
            "a classifier's: a binary one's probability of classes[1] per row, 1 / (1 + exp(-log-odds)) (that of "
            "classes[0] is 1 minus it); a K-class one's probability of every class per row, in the order of "
            "classes, each row summing to 1 (the softmax of the class scores)"
        ),
    )
    classes: list[str | bool | int | float] | None = Field(None, description="a classifier's labels, sorted")
    explanations: list[list[int]] | None = Field(None, description="explain=true: ids of the rules that fired, per row")
    contributions: list[list[float] | list[list[float]]] | None = Field(
        None,
        description=(
            "explain=true: what each of those rules adds, per row: to the score (log-odds for a binary classifier, "
            "log rate for counts: the rate is multiplied by exp(contribution)), or for a K-class classifier a list "
            "of K amounts, one per class in the order of classes; they sum to the score minus the model's "
            "intercept (per class), with linear_contributions where the model has linear terms"
        ),
    )
    linear_contributions: list[list[float] | list[list[float]]] | None = Field(
        None,
        description=(
            "explain=true, a model with linear terms (its ensemble's `linear`): what each linear term adds per row, "
            "coefficient * clip(value, lower, upper) (coefficient * fill where the value is missing), one entry per "
            "term in the order of `linear` (lin0, lin1, ...), a list of K for a K-class model"
        ),
    )
    times: list[float] | None = Field(None, description="survival models, params.times: the times asked for")
    survival: list[list[float]] | None = Field(
        None, description="survival models, params.times: each row's S(t | x) at each of times"
    )
    model: AnsweringModel = Field(description="the model version that answered (also in the X-Model-* headers)")
