"""Scoring with a model: rows in the training table's original columns, encoded as it was, into predictions,
probabilities of a classifier's classes, and the rules (and linear terms) that explain each row."""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from app.core.errors import FieldFault, Invalid, TooLarge
from app.core.tables import MAX_ABS_VALUE, table_invalid
from solver import RuleEnsemble, probability
from solver.encoding import TableEncoding, TableError
from solver.rules import INVERSE_LINKS

# column names in the model's order -> (column -> values, n_rows, the field holding the rows)
TableReader = Callable[[list[str]], tuple[Mapping[str, Sequence], int, str]]


@dataclass
class ScoringModel:
    id: str
    name: str
    version: int
    tenant: str
    ensemble: RuleEnsemble
    encoding: TableEncoding
    checked_at: float = 0.0  # when the stored model was last seen to exist (time.monotonic)
    classes: list | None = None  # a classifier's labels (binary: its rules add log-odds of classes[1])


@dataclass
class Scores:
    # numbers (regression), rates (counts), or labels (a binary classifier: classes[1] where its log-odds are > 0;
    # K classes: the class of the largest score, the first on ties)
    predictions: list
    explanations: list[list[int]] | None  # indices of the rules that fired, per row, where asked for
    # what each of those rules adds: to the score (log-odds for a binary classifier, log rate for counts), or a
    # list of K amounts, one per class
    contributions: list[list] | None = None
    # a binary classifier's: of classes[1] (solver.probability of the log-odds); K classes: a row of K per row
    probabilities: list[float] | list[list[float]] | None = None
    classes: list | None = None
    # a model with linear terms, where explanations were asked for: what each linear term adds, per row, in the
    # order of the model's linear terms (with the rules' contributions, the score minus the intercept)
    linear_contributions: list[list] | None = None


def score_rows(scoring: ScoringModel, read_table: TableReader, explain: bool, max_rows: int) -> Scores:
    """Predictions for rows in the training table's original columns. ``read_table(column_names)`` gives
    (column -> values, n_rows, the field holding the rows, which faults name as ``{field}.{column}``); more than
    ``max_rows`` rows (FIRE_MAX_SCORING_ROWS) are refused."""
    table, n_rows, location = read_table(scoring.encoding.column_names)
    if n_rows > max_rows:
        raise TooLarge(
            f"{n_rows} rows in one request, more than the limit of {max_rows}.",
            [
                FieldFault(
                    location,
                    f"{n_rows} rows",
                    "split the rows over several requests or raise FIRE_MAX_SCORING_ROWS",
                )
            ],
        )
    check_numeric_values(scoring.encoding, table, location)
    try:
        X = scoring.encoding.encode(table, n_rows, location)
    except TableError as error:
        raise table_invalid(error) from error
    outside = np.abs(X) > MAX_ABS_VALUE
    if outside.any():
        names = sorted({scoring.encoding.feature_names[j] for j in np.flatnonzero(outside.any(axis=0))})
        raise Invalid(
            "Some values are infinite or out of range.",
            [
                FieldFault(
                    f"{location}.{name.split('=')[0]}",
                    f"infinite or beyond ±{MAX_ABS_VALUE:.3g}",
                    "send finite numbers in range, or null for a missing value",
                )
                for name in names
            ],
        )
    explanations = contributions = linear_contributions = None
    if explain:
        # per row the rules that fired, then every linear term ({"linear": id}); a contribution is a list of K
        # amounts for K classes
        explained = scoring.ensemble.explain(X)
        explanations = [[entry["id"] for entry in row if "id" in entry] for row in explained]
        contributions = [[entry["contribution"] for entry in row if "id" in entry] for row in explained]
        if scoring.ensemble.linear:
            linear_contributions = [[entry["contribution"] for entry in row if "linear" in entry] for row in explained]
    ensemble = scoring.ensemble
    scores = ensemble.predict(X)  # (n,), or (n, K) per class
    if ensemble.link == "softmax":  # K classes: the label of the largest score, as FireClassifier.predict
        classes = list(ensemble.classes or ())  # the model's classes: those of its rules
        labels = [classes[k] for k in np.argmax(scores, axis=1).tolist()]
        probabilities = INVERSE_LINKS["softmax"](scores)  # RuleEnsemble.predict_mean of these scores
        return Scores(labels, explanations, contributions, probabilities.tolist(), classes, linear_contributions)
    if scoring.classes is None:  # the prediction, or the rate exp(score) of counts (predict_mean)
        predictions = INVERSE_LINKS[ensemble.link](scores).tolist()
        return Scores(predictions, explanations, contributions, linear_contributions=linear_contributions)
    labels = [scoring.classes[positive] for positive in (scores > 0.0).tolist()]
    return Scores(
        labels, explanations, contributions, probability(scores).tolist(), scoring.classes, linear_contributions
    )


def check_numeric_values(encoding: TableEncoding, table: Mapping[str, Sequence], location: str) -> None:
    """Refuse booleans in numeric columns (JSON ``true`` is no number, though Python would read it as 1)."""
    faults = [
        FieldFault(f"{location}.{column.name}", "true/false in a numeric column", "send numbers (or null)")
        for column in encoding.columns
        if column.kind == "numeric"
        and column.name in table
        and any(isinstance(value, bool) for value in table[column.name])
    ]
    if faults:
        raise Invalid("Some values are not numbers.", faults)
