"""A rule ensemble as code a user deploys without us: a SQL expression and a dependency-free Python function.

Both read the *original* columns of the table (the ensemble's :class:`solver.encoding.TableEncoding`): a text
column by its levels, a number as the table holds it, and compute the model's scores exactly (the sum of the
fired rules' contributions, added in id order, then the linear terms' amounts in id order, then the intercept, as
:meth:`RuleEnsemble.predict` does):

* the model compares ``float32(x) <= threshold``; a double ``x`` satisfies that exactly when it lies below the
  midpoint between the largest float32 ``c <= threshold`` and the next float32 (at the midpoint, when rounding
  to even goes to ``c``), so each comparison is written against that midpoint;
* a missing value (SQL ``NULL``; Python ``None`` or NaN) satisfies a condition where the model routes it there;
  for a text column a missing or unknown level sets no indicator, as in the encoding (which refuses unknown
  levels where these exports cannot);
* a linear term (``lin0``) adds ``coefficient * clip(x, lower, upper)`` with the double ``x`` as the table holds
  it, ``coefficient * fill`` where it is missing: SQL clips with ``CASE`` (``WHEN x IS NULL THEN fill WHEN x <
  lower THEN lower WHEN x > upper THEN upper ELSE x``, the same in every dialect), Python with ``min``/``max``.

What they give depends on the ensemble's ``link`` (``solver.rules``):

* identity and logit: the score (a binary classifier's log-odds: the positive class where it is > 0, with
  probability ``1 / (1 + exp(-score))``);
* log: ``exp(score)``, as :meth:`RuleEnsemble.predict_mean` (Python gives ``inf`` where the double overflows, as
  numpy does): the rate (Poisson), the mean (Tweedie, Gamma), or a Cox model's hazard ratio relative to the
  baseline hazard, ``h(t | x) / h0(t)`` (:func:`log_link_quantity`): the risk score that ranks rows, all the SQL
  gives; the survival curves also need the baseline hazard, which the Python module carries (below);
* softmax (classes): the class probabilities, as :meth:`RuleEnsemble.predict_mean`: Python returns a dict
  ``{class: probability}`` in class order (``exp(score - max) / sum``; the predicted class is
  ``max(p, key=p.get)``, the first of equal ones); SQL gives one column per class, named by its label
  (``solver.rule_text.label_text``), each ``1 / (1 + sum over the other classes j of exp(score_j - score_k))``:
  stable without a ``max`` of several arguments, which SQL dialects spell differently, but every column holds
  all K scores, so the text grows as K² times the rules.

``export_rules(ensemble, "sql")`` is an expression (K comma-separated ``expression AS "class"`` columns for
softmax) to put in a ``SELECT`` over a table with the original columns; ``export_rules(ensemble, "python")``
the source of a module defining ``predict(row)``, ``row`` a mapping from column name to value. A Cox model's
module (one with a ``baseline_hazard``) also defines ``survival(row, times)``: the list of ``S(t | row) =
exp(-H0(t) * predict(row))`` for ``t`` in ``times``, as :meth:`RuleEnsemble.predict_survival`, from Breslow's
baseline cumulative hazard of the training rows written into the module (``H0`` a step function: 0 before the
first event time, at ``t`` its value at the last event time ``<= t``, found with ``bisect``), for ``t`` from 0 to
the last follow-up time of the training rows, a ValueError outside (as the library). The log and
softmax SQL calls ``exp``: SQLite has it from version 3.35 where built with its math functions (the tests run it
on Python's sqlite3); an ``exp`` that raises on overflow (PostgreSQL) fails on rows whose rate, or gap between
two class scores, exceeds ``exp(709)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .rule_text import (
    RuleWording,
    bounds,
    column_groups,
    is_unbounded,
    label_text,
    level_sets,
    log_link_quantity,
)
from .rule_types import Condition, LinearTerm

EXPORT_FORMATS = ("sql", "python")


def float32_cut(threshold: float) -> tuple[float, bool]:
    """(midpoint, inclusive): for a double ``x``, ``float32(x) <= threshold`` exactly when ``x < midpoint``, or
    ``x <= midpoint`` where ``inclusive``."""
    cut = np.float32(threshold)
    if float(cut) > threshold:
        cut = np.nextafter(cut, np.float32(-np.inf))
    above = np.nextafter(cut, np.float32(np.inf))
    midpoint = (float(cut) + float(above)) / 2.0  # exact: float32 neighbours are 25-bit numbers
    return midpoint, int(cut.view(np.uint32)) % 2 == 0  # a tie rounds to the even neighbour


class _Dialect:
    """How one language writes the pieces of a condition."""

    true: str
    false: str
    conjunction: str
    disjunction: str

    def column(self, name: str) -> str:
        raise NotImplementedError

    def compare(self, column: str, condition: Condition) -> str:
        midpoint, inclusive = float32_cut(condition.threshold)
        below = "<=" if inclusive else "<"
        above = ">" if inclusive else ">="
        return f"{column} {below if condition.operator == '<=' else above} {midpoint!r}"

    def numbers(self, name: str, conditions: Sequence[Condition]) -> list[str]:
        column = self.column(name)
        parts = []
        for condition in bounds(conditions):
            if condition is None:
                continue
            if is_unbounded(condition):
                everything = (condition.threshold > 0) == (condition.operator == "<=")
                parts.append(
                    self.true
                    if everything and condition.missing
                    else self.present(column)
                    if everything
                    else self.missing(column)
                    if condition.missing
                    else self.false
                )
            elif condition.missing:
                parts.append(f"({self.missing(column)} {self.disjunction} {self.compare(column, condition)})")
            else:
                parts.append(self.compare(column, condition))
        return parts


class _SQL(_Dialect):
    true, false, conjunction, disjunction = "1 = 1", "1 = 0", "AND", "OR"

    def column(self, name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    def missing(self, column: str) -> str:
        return f"{column} IS NULL"

    def present(self, column: str) -> str:
        return f"{column} IS NOT NULL"

    def levels(self, name: str, allowed: list[str], excluded: list[str], missing_ok: bool) -> str:
        column = self.column(name)
        if missing_ok:
            listed = ", ".join(_sql_text(level) for level in excluded)
            return f"({column} IS NULL OR {column} NOT IN ({listed}))" if excluded else self.true
        listed = ", ".join(_sql_text(level) for level in allowed)
        return f"{column} IN ({listed})" if allowed else self.false


class _Python(_Dialect):
    true, false, conjunction, disjunction = "True", "False", "and", "or"

    def column(self, name: str) -> str:
        return f"_number(row[{name!r}])"

    def missing(self, column: str) -> str:
        return f"_missing({column})"

    def present(self, column: str) -> str:
        return f"not _missing({column})"

    def levels(self, name: str, allowed: list[str], excluded: list[str], missing_ok: bool) -> str:
        value = f"_level(row[{name!r}])"
        if missing_ok:
            return f"{value} not in {tuple(excluded)!r}" if excluded else self.true
        return f"{value} in {tuple(allowed)!r}" if allowed else self.false


def _sql_text(level: str) -> str:
    return "'" + level.replace("'", "''") + "'"


def _condition(dialect: _Dialect, ensemble, conditions: Sequence[Condition]) -> str:
    parts = []
    for column, group in column_groups(ensemble.encoding, conditions):
        if column.kind == "categorical":
            parts.append(dialect.levels(column.name, *level_sets(ensemble.encoding, group)))
        else:
            parts.extend(dialect.numbers(column.name, group))
    return f" {dialect.conjunction} ".join(parts) or dialect.true


def to_sql(ensemble) -> str:
    """A SQL expression of the original columns giving the ensemble's output (module docstring; tested on
    SQLite)."""
    dialect = _SQL()
    wording = RuleWording(ensemble.encoding)
    rules = [
        (rule.id, _condition(dialect, ensemble, rule.conditions), wording.conjunction(rule.conditions))
        for rule in ensemble.rules
    ]
    linear = [(term.id, _sql_clipped(dialect, ensemble, term), wording.linear(term)) for term in ensemble.linear]

    def score(intercept: float, amounts: Sequence[float], coefficients: Sequence[float]) -> str:
        terms = [
            f"  + CASE WHEN {condition} THEN {amount!r} ELSE 0.0 END  -- r{rule_id}: {text}"
            for (rule_id, condition, text), amount in zip(rules, amounts)
        ]
        terms += [
            f"  + {coefficient!r} * {clipped}  -- lin{term_id}: {text}"
            for (term_id, clipped, text), coefficient in zip(linear, coefficients)
        ]
        return "\n".join([f"{intercept!r} + (0.0", *terms, ")"])

    if ensemble.link != "softmax":
        total = score(
            ensemble.intercept,
            [rule.contribution for rule in ensemble.rules],
            [term.coefficient for term in ensemble.linear],
        )
        return f"exp({total})" if ensemble.link == "log" else total
    scores = [
        score(
            intercept,
            [rule.contribution[k] for rule in ensemble.rules],
            [term.coefficient[k] for term in ensemble.linear],
        )
        for k, intercept in enumerate(ensemble.intercept)
    ]
    columns = []
    for k, label in enumerate(ensemble.classes):
        others = [f"  + exp(({other}) - ({scores[k]}))" for j, other in enumerate(scores) if j != k]
        columns.append("\n".join(["1.0 / (1.0", *others, f") AS {dialect.column(label_text(label))}"]))
    return ",\n".join(columns)


def _feature_column(ensemble, term: LinearTerm) -> str:
    """The name of the numeric column of a linear term (the ensemble checks that it is one)."""
    column, level = ensemble.encoding.feature_column(term.feature_index)
    if level is not None:
        raise ValueError(f"linear term lin{term.id} is on a level of the text column {column.name!r}")
    return column.name


def _sql_clipped(dialect: _SQL, ensemble, term: LinearTerm) -> str:
    x = dialect.column(_feature_column(ensemble, term))
    lower, upper, fill = term.lower, term.upper, term.fill
    return (
        f"(CASE WHEN {x} IS NULL THEN {fill!r} WHEN {x} < {lower!r} THEN {lower!r} "
        f"WHEN {x} > {upper!r} THEN {upper!r} ELSE {x} END)"
    )


_PYTHON_HELPERS = """

def _number(value):
    return float("nan") if value is None else float(value)


def _missing(value):
    return value != value  # NaN


def _level(value):
    return None if value is None or (isinstance(value, float) and value != value) else str(value)
"""
_LINEAR_HELPER = """

def _clip(value, lower, upper, fill):
    return fill if value != value else min(max(value, lower), upper)
"""
_ROW = "``row``, a mapping from column name to value (None or NaN: missing)"
_EXP_HELPER = """

def _exp(score):
    try:
        return math.exp(score)
    except OverflowError:
        return math.inf
"""
_SOFTMAX_HELPERS = """

def _add(total, amounts):
    return [t + a for t, a in zip(total, amounts)]


def _add_times(total, amounts, value):
    return [t + a * value for t, a in zip(total, amounts)]


def _softmax(scores, classes):
    top = max(scores)
    weights = [math.exp(score - top) for score in scores]
    norm = sum(weights)
    return {label: weight / norm for label, weight in zip(classes, weights)}
"""


def _python_output(ensemble) -> tuple[str, str, str, str, str, str]:
    """(helpers, docstring, the initial total, how a rule adds its contribution ``{}``, how a linear term adds
    its coefficient ``{0}`` times the value ``{1}``, the return statement) of the Python function for the
    ensemble's link; helpers use ``math``."""
    intercept = ensemble.intercept
    if ensemble.link == "softmax":
        classes = tuple(ensemble.classes)
        return (
            _SOFTMAX_HELPERS,
            f"{{class: probability}} for {_ROW}; the predicted class is max(p, key=p.get).",
            f"[0.0] * {len(classes)}",
            "total = _add(total, {!r})",
            "total = _add_times(total, {0!r}, {1})",
            f"return _softmax([b + t for b, t in zip({intercept!r}, total)], {classes!r})",
        )
    if ensemble.link == "log":
        quantity = log_link_quantity(ensemble)
        if ensemble.baseline_hazard is not None:
            quantity += " relative to the baseline hazard"
        return (
            _EXP_HELPER,
            f"The {quantity} for {_ROW}: exp of the score.",
            "0.0",
            "total += {!r}",
            "total += {0!r} * {1}",
            f"return _exp({intercept!r} + total)",
        )
    return (
        "",
        f"The prediction for {_ROW}.",
        "0.0",
        "total += {!r}",
        "total += {0!r} * {1}",
        f"return {intercept!r} + total",
    )


def _survival_source(ensemble, name: str) -> list[str]:
    """The lines of ``survival(row, times)`` and the baseline hazard it reads, for a Cox model whose hazard ratio
    is ``name(row)``: the same operations as ``solver.losses.cox.survival_function`` (``exp(-(ratio * H0(t)))``)."""
    times, cumulative = ensemble.baseline_hazard
    return [
        "",
        "# Breslow's baseline cumulative hazard of the training rows: (event time, H0 from that time on); the last",
        "# time is their last follow-up, where the curves end",
        "_BASELINE_HAZARD = (",
        *(f"    ({float(t)!r}, {float(h)!r})," for t, h in zip(times, cumulative)),
        ")",
        "_TIMES = [time for time, _ in _BASELINE_HAZARD]",
        "",
        "",
        "def _baseline_hazard(time):",
        "    position = bisect.bisect_right(_TIMES, time)",
        "    return _BASELINE_HAZARD[position - 1][1] if position else 0.0",
        "",
        "",
        "def survival(row, times):",
        f'    """[S(t | row) for t in times]: the probability of no event by t, exp(-H0(t) * {name}(row)), H0 the',
        "    baseline cumulative hazard (0 before the first event time), for t from 0 to the last follow-up time of",
        '    the training rows: a ValueError past it (nothing estimates S there)."""',
        "    times = [float(time) for time in times]",
        "    outside = [time for time in times if not 0.0 <= time <= _TIMES[-1]]",
        "    if outside:",
        "        last = _TIMES[-1]",
        "        raise ValueError(",
        '            f"survival time {outside[0]:g} is outside [0, {last:g}]: the curves are estimated up to "',
        '            f"the last follow-up time of the training rows, {last:g}"',
        "        )",
        f"    ratio = {name}(row)",
        "    return [math.exp(-(ratio * _baseline_hazard(time))) for time in times]",
        "",
    ]


def to_python(ensemble, name: str = "predict") -> str:
    """The source of a dependency-free Python module defining ``name(row)`` -> the ensemble's output, and a Cox
    model's ``survival(row, times)`` (module docstring)."""
    if not name.isidentifier():
        raise ValueError(f"name must be a Python identifier, got {name!r}")
    survival = ensemble.baseline_hazard is not None
    if survival and name in ("survival", "bisect"):
        raise ValueError(f"name {name!r} is taken by the survival function of a Cox model's module")
    helpers, doc, start, add, add_linear, result = _python_output(ensemble)
    dialect = _Python()
    wording = RuleWording(ensemble.encoding)
    body = []
    for rule in ensemble.rules:
        body.append(f"    # r{rule.id}: {wording.conjunction(rule.conditions)}")
        body.append(f"    if {_condition(dialect, ensemble, rule.conditions)}:")
        body.append(f"        {add.format(rule.contribution)}")
    for term in ensemble.linear:
        value = (
            f"_clip({dialect.column(_feature_column(ensemble, term))}, {term.lower!r}, {term.upper!r}, {term.fill!r})"
        )
        body.append(f"    # lin{term.id}: {wording.linear(term)}")
        body.append(f"    {add_linear.format(term.coefficient, value)}")
    counted = f"{ensemble.n_rules} rules"
    if ensemble.linear:
        counted += f" and {ensemble.n_linear} linear term{'s' if ensemble.n_linear > 1 else ''}"
    imports = (["import bisect"] if survival else []) + (["import math"] if helpers else [])
    return "\n".join(
        [
            f'"""FIRE rule set: {counted} (generated; needs nothing but Python)."""',
            f"# columns: {ensemble.encoding.column_names!r}",
            *(["", *imports] if imports else []),
            _PYTHON_HELPERS + (_LINEAR_HELPER if ensemble.linear else "") + helpers,
            "",
            f"def {name}(row):",
            f'    """{doc}"""',
            f"    total = {start}",
            *body,
            f"    {result}",
            "",
            *(_survival_source(ensemble, name) if survival else []),
        ]
    )


def export_rules(ensemble, format: str) -> str:
    """The ensemble as ``format``: "sql" (:func:`to_sql`) or "python" (:func:`to_python`)."""
    if format not in EXPORT_FORMATS:
        raise ValueError(f"format must be one of {list(EXPORT_FORMATS)}, got {format!r}")
    return to_sql(ensemble) if format == "sql" else to_python(ensemble)
