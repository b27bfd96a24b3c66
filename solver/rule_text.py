"""Rules in the data's own words: the text of :class:`solver.rules.RuleEnsemble`.

What a condition says depends on the column it is about (the ensemble's :class:`solver.encoding.TableEncoding`):

* one-hot indicators of a text column read as the column's levels, every condition of a rule on that column
  merged into one: ``Sex is M``, ``Sex in {F, I}``, ``clarity is not I1``, ``clarity not in {I1, SI2}`` (the
  positive form unless the excluded levels are fewer and more than two levels would be listed); a condition
  implied by another one (``is M`` and ``is not F``) is not a condition of the rule (``solver.rule_types``);
* a numeric column that held exactly two values (``ColumnSpec.binary``: a 0/1 flag, 1/2 codes) reads as the value a
  condition keeps, ``smoker is 1``, ``sex is 2``, where its threshold lies between the two (as the model compares
  them, in float32): on the column's values the text and the model agree; other conditions on it, and columns of
  a document without ``binary``, print their threshold;
* numbers print their threshold at the precision that separates the training values around it
  (``display_threshold``, set by :func:`display_thresholds`): the shortest decimal in the gap between the
  largest training value that satisfies ``x <= threshold`` and the smallest that does not, closest to the
  threshold. On every training row the text and the model agree; the exact threshold stays in the JSON and in
  the exports. Without training values (a document without them) the threshold prints as the shortest decimal
  that names the same float32 cut;
* ``or missing`` appears where a missing value satisfies the condition *and* can occur: ``show_missing="auto"``
  (the default) shows it for the columns that had missing values in the table the encoding was inferred from
  (or where that is unknown), ``"always"`` wherever a missing value satisfies a condition, ``"never"`` nowhere.

Column names and levels print as they are, but for characters that are not printable (line breaks, controls),
escaped as Python writes them (``\\n``): a rule is one line, and the exports' comments cannot be broken out of.

What a rule adds reads in the terms of the ensemble's ``link`` (``solver.rules``), in a column before its
conditions:

* identity and logit: the contribution, ``+0.4213``, after the intercept;
* log (counts): the factor the rule multiplies the rate by, ``×1.8`` (``exp(contribution)``), after the base rate
  ``exp(intercept)``;
* softmax (classes): what the rule adds to the scores of the (at most ``CLASSES_SHOWN``) classes it moves most,
  largest |amount| first, and how many more it moves: ``A +0.82, C -0.31, B +0.05, 2 more``; classes it adds
  exactly 0 to are left out (fusion ties a class's amount to a neighbour's zero); the intercept line lists every
  class, in class order. Rules sort by the norm of their per-class amounts.

A class label prints as :func:`label_text` writes it: a string as it is, a number or boolean as JSON (``1``,
``true``).

Linear terms (``RuleEnsemble.linear``) follow the rules, in id order (``lin0``, ``lin1``, ...), their coefficient
in the rules' amount column (per class for softmax, as a rule's amounts) and the clipped feature after it:
``lin0  +0.031 × Gr_Liv_Area (clipped to [834, 2850]; missing counts as 1500)``, the bounds and the fill at six
significant digits, ``missing counts as`` shown as ``or missing`` is (``show_missing``). For the log link the
coefficient adds to the log of the rate (the summary line says so).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from decimal import ROUND_CEILING, ROUND_HALF_EVEN, Decimal
from typing import Literal, get_args

import numpy as np

from .encoding import TableEncoding
from .rule_types import FLOAT32_MAX, Amount, Condition, LinearTerm, Rule, accepted_levels, magnitude

ShowMissing = Literal["auto", "always", "never"]
SHOW_MISSING: tuple[ShowMissing, ...] = get_args(ShowMissing)
SORTS = ("contribution", "id")
CLASSES_SHOWN = 3


def separating_threshold(below: float, above: float, threshold: float) -> float:
    """The shortest decimal ``d`` with ``below <= d < above``, the closest to ``threshold`` among the shortest.

    The bounds are read as their shortest decimals (``repr``): the numbers as the table holds them, so that a
    value read back from the text compares with ``d`` as the double does."""
    low, high = Decimal(repr(float(below))), Decimal(repr(float(above)))
    if low <= 0 < high:
        return 0.0
    exponent = max(abs(low), abs(high)).adjusted() + 1
    while True:  # coarsest decimal step first
        step = Decimal(1).scaleb(exponent)
        lowest = (low / step).to_integral_value(ROUND_CEILING)
        highest = (high / step).to_integral_value(ROUND_CEILING) - 1
        if lowest <= highest:
            nearest = (Decimal(threshold) / step).to_integral_value(ROUND_HALF_EVEN)
            shown = float(min(max(nearest, lowest), highest) * step)
            if below <= shown < above:  # as doubles too
                return shown
        exponent -= 1


def display_thresholds(rules: Sequence[Rule], X: np.ndarray) -> list[Rule]:
    """``rules`` with ``display_threshold`` set on every condition that splits the training rows ``X`` (float64):
    a decimal between the largest value the model routes to ``<= threshold`` (it compares the value as
    float32) and the smallest it routes the other way, so that the values as the table holds them compare
    with the printed number as the model decides."""
    values: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def displayed(condition: Condition) -> Condition:
        if is_unbounded(condition):
            return condition
        j = condition.feature_index
        if j not in values:
            column = np.unique(X[:, j][~np.isnan(X[:, j])])
            values[j] = column, column.astype(np.float32).astype(np.float64)  # both sorted: rounding is monotone
        column, as_compared = values[j]
        position = int(np.searchsorted(as_compared, condition.threshold, side="right"))
        if not 0 < position < len(column):
            return condition
        return replace(
            condition,
            display_threshold=separating_threshold(column[position - 1], column[position], condition.threshold),
        )

    return [replace(rule, conditions=[displayed(c) for c in rule.conditions]) for rule in rules]


def label_text(label) -> str:
    """A class label as text: a string as it is, a number or a boolean as JSON writes it."""
    return label if isinstance(label, str) else json.dumps(label)


def printable(text: str) -> str:
    """``text`` with each character that is not printable escaped (``\\n``, ``\\x1b``, ``\\u2028``)."""
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def is_unbounded(condition: Condition) -> bool:
    """Whether every finite float32 value, or none, satisfies the comparison."""
    return abs(condition.threshold) >= FLOAT32_MAX


def separates(condition: Condition, values: tuple[float, float]) -> bool:
    """Whether ``condition`` sends a two-valued column's values (the smaller first) apart, as the model compares them
    (as float32)."""
    low, high = (float(np.float32(value)) for value in values)
    return low <= condition.threshold < high


def kept_values(conditions: Sequence[Condition], values: tuple[float, float]) -> list[float]:
    """Which of a two-valued column's values satisfy every one of ``conditions``."""
    return [
        value
        for value in values
        if all((float(np.float32(value)) <= c.threshold) == (c.operator == "<=") for c in conditions)
    ]


def value_text(value: float) -> str:
    """A column's value as the table wrote it: ``1``, ``0.5``, ``-0.0446``."""
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def _number(condition: Condition) -> str:
    shown = condition.display_threshold
    if shown is None:  # the float32 cut the model applies: the largest float32 <= threshold
        cut = np.float32(condition.threshold)
        if cut > condition.threshold:
            cut = np.nextafter(cut, np.float32(-np.inf))
        return np.format_float_positional(cut, unique=True, trim="-")
    return f"{shown:.15g}"


def column_groups(encoding: TableEncoding, conditions: Sequence[Condition]) -> list[tuple]:
    """The conditions of a rule grouped by the column they are about: [(ColumnSpec, [condition, ...])], in
    order of first use."""
    groups: dict[str, tuple] = {}
    for condition in conditions:
        column, _ = encoding.feature_column(condition.feature_index)
        groups.setdefault(column.name, (column, []))[1].append(condition)
    return list(groups.values())


def level_sets(encoding: TableEncoding, conditions: Sequence[Condition]) -> tuple[list, list, bool]:
    """(allowed levels, excluded levels, whether a missing level satisfies them) of conditions on the indicators
    of one text column (``solver.rule_types.accepted_levels``)."""
    column = encoding.feature_column(conditions[0].feature_index)[0]
    accepted = frozenset((*column.categories, None)).intersection(
        *(accepted_levels(encoding, condition) for condition in conditions)
    )
    allowed = [level for level in column.categories if level in accepted]
    return allowed, [level for level in column.categories if level not in accepted], None in accepted


def bounds(conditions: Sequence[Condition]) -> tuple:
    """(the ``>`` condition or None, the ``<=`` condition or None) of a numeric column's conditions, at most one of
    each (``solver.rule_types.reduce_conditions``)."""
    return (
        next((c for c in conditions if c.operator == ">"), None),
        next((c for c in conditions if c.operator == "<="), None),
    )


class RuleWording:
    """Conditions of one ensemble as text, in the words of its encoding."""

    def __init__(self, encoding: TableEncoding, show_missing: str = "auto"):
        if show_missing not in SHOW_MISSING:
            raise ValueError(f"show_missing must be one of {list(SHOW_MISSING)}, got {show_missing!r}")
        self.encoding = encoding
        self.show_missing = show_missing

    def _or_missing(self, text: str, satisfied_by_missing: bool, column) -> str:
        shown = satisfied_by_missing and (
            self.show_missing == "always" or (self.show_missing == "auto" and column.missing is not False)
        )
        return f"{text} or missing" if shown else text

    def conjunction(self, conditions: Sequence[Condition]) -> str:
        """The conditions of a rule joined by "and": one phrase per column, in order of first use."""
        if not conditions:
            return "always"
        parts = [
            self._levels(column, group) if column.kind == "categorical" else self._numbers(column, group)
            for column, group in column_groups(self.encoding, conditions)
        ]
        if len(parts) > 1:
            parts = [f"({part})" if " or " in part else part for part in parts]
        return " and ".join(parts)

    def _levels(self, column, conditions: Sequence[Condition]) -> str:
        """One phrase for the conditions on the indicators of one text column."""
        allowed, excluded, missing_ok = level_sets(self.encoding, conditions)
        name, allowed, excluded = printable(column.name), list(map(printable, allowed)), list(map(printable, excluded))
        if not excluded:
            text = f"{name} is any value" if missing_ok else f"{name} is not missing"
        elif not allowed:
            text = f"{name} is missing" if missing_ok else f"{name} matches no value"
        elif len(allowed) == 1:
            text = f"{name} is {allowed[0]}"
        elif len(allowed) <= max(2, len(excluded)):
            text = f"{name} in {{{', '.join(allowed)}}}"
        elif len(excluded) == 1:
            text = f"{name} is not {excluded[0]}"
        else:
            text = f"{name} not in {{{', '.join(excluded)}}}"
        return self._or_missing(text, missing_ok and bool(allowed) and bool(excluded), column)

    def _numbers(self, column, conditions: Sequence[Condition]) -> str:
        """At most one ``>`` and one ``<=`` bound of one feature (``solver.rule_types.reduce_conditions``), as a
        phrase."""
        name = printable(column.name)
        if column.binary is not None and all(separates(c, column.binary) for c in conditions):
            kept = kept_values(conditions, column.binary)
            text = f"{name} is {value_text(kept[0])}" if len(kept) == 1 else f"{name} matches no value"
            return self._or_missing(text, bool(kept) and all(c.missing for c in conditions), column)
        lower, upper = bounds(conditions)
        if lower is not None and upper is not None and not is_unbounded(lower) and not is_unbounded(upper):
            text = f"{_number(lower)} < {name} <= {_number(upper)}"
            return self._or_missing(text, lower.missing and upper.missing, column)
        return " and ".join(self._bound(c, name, column) for c in (lower, upper) if c is not None)

    def linear(self, term: LinearTerm) -> str:
        """A linear term's feature and how it is read: ``Gr_Liv_Area (clipped to [834, 2850])``, with
        ``; missing counts as 1500`` where missing values show (as ``or missing`` does)."""
        column, _ = self.encoding.feature_column(term.feature_index)
        text = f"{printable(column.name)} (clipped to [{term.lower:.6g}, {term.upper:.6g}]"
        if self.show_missing == "always" or (self.show_missing == "auto" and column.missing is not False):
            text += f"; missing counts as {term.fill:.6g}"
        return text + ")"

    def _bound(self, condition: Condition, name: str, column) -> str:
        missing = condition.missing
        if is_unbounded(condition):
            if (condition.threshold > 0) == (condition.operator == "<="):
                return f"{name} is any value" if missing else f"{name} is not missing"
            return f"{name} is missing" if missing else f"{name} matches no value"
        return self._or_missing(f"{name} {condition.operator} {_number(condition)}", missing, column)


def rules_text(ensemble, sort: str = "contribution", show_missing: str = "auto") -> str:
    """The text of ``RuleEnsemble.to_text``: a summary line, the intercept, then one line per rule that starts
    with its id (``r3``), what it adds (module docstring) and its conditions."""
    if sort not in SORTS:
        raise ValueError(f"sort must be one of {list(SORTS)}, got {sort!r}")
    wording = RuleWording(ensemble.encoding, show_missing)
    rules = ensemble.rules
    if sort == "contribution":
        rules = sorted(rules, key=lambda rule: (-magnitude(rule.contribution), rule.id))
    linear = ensemble.linear
    ids = [f"r{rule.id}" for rule in rules]
    linear_ids = [f"lin{term.id}" for term in linear]
    id_width = max(map(len, ids + linear_ids), default=0)
    summary = f"# {ensemble.n_rules} rules"
    if linear:
        summary += f", {len(linear)} linear term{'s' if len(linear) > 1 else ''}"
    if ensemble.n_antecedents is not None:
        summary += f", {ensemble.n_antecedents} antecedents"
    quantity = log_link_quantity(ensemble)
    if ensemble.link == "log":
        summary += f"; the {quantity} is the base {quantity} times the factor (×) of each rule that fires"
        if linear:
            summary += f", and exp of the linear terms (which add to the log of the {quantity})"
    elif ensemble.link == "softmax":
        summary += "; each rule adds to every class's score (shown: the classes it moves most), probabilities: softmax"
    if ensemble.response is not None:
        summary += f"; {'amounts' if ensemble.link in ('identity', 'logit') else 'scores'} in {ensemble.response}"
    if ensemble.link == "softmax":
        labels = [printable(label_text(label)) for label in ensemble.classes]
        amounts = [_per_class(labels, rule.contribution) for rule in rules]
        coefficients = [_per_class(labels, term.coefficient) for term in linear]
        width = max(map(len, amounts + coefficients), default=0)
        intercept = ", ".join(f"{label} {value:+.4g}" for label, value in zip(labels, ensemble.intercept))
        head = f"{'':{id_width}}  intercept: {intercept}"
        align = "<"
    else:
        if ensemble.link == "log":
            amounts = [f"×{np.exp(rule.contribution):.4g}" for rule in rules]
            intercept, name = f"{np.exp(ensemble.intercept):.4g}", f"base {quantity}"
        else:
            amounts = [f"{rule.contribution:+.4g}" for rule in rules]
            intercept, name = f"{ensemble.intercept:+.4g}", "intercept"
        coefficients = [f"{term.coefficient:+.4g}" for term in linear]
        width = max(len(amount) for amount in [intercept, *amounts, *coefficients])
        head = f"{'':{id_width}}  {intercept:>{width}}  {name}"
        align = ">"
    lines = [summary, head]
    for rule_id, amount, rule in zip(ids, amounts, rules):
        lines.append(
            f"{rule_id:<{id_width}}  {amount:{align}{width}}  if {wording.conjunction(rule.conditions)}{_origin(rule)}"
        )
    for term_id, coefficient, term in zip(linear_ids, coefficients, linear):
        support = "" if term.support is None else f"   [support {term.support}]"
        lines.append(f"{term_id:<{id_width}}  {coefficient:{align}{width}} × {wording.linear(term)}{support}")
    return "\n".join(lines)


def _per_class(labels: Sequence[str], amounts: Amount) -> str:
    """The amounts of the ``CLASSES_SHOWN`` classes a rule moves most, largest |amount| first (ties in class
    order), and how many classes more: ``A +0.82, C -0.31, B +0.05, 2 more``."""
    order = sorted((k for k in range(len(labels)) if amounts[k] != 0.0), key=lambda k: -abs(amounts[k]))
    shown = [f"{labels[k]} {amounts[k]:+.4g}" for k in order[:CLASSES_SHOWN]]
    if len(order) > CLASSES_SHOWN:
        shown.append(f"{len(order) - CLASSES_SHOWN} more")
    return ", ".join(shown)


def _origin(rule: Rule) -> str:
    details = []
    if rule.support is not None:
        details.append(f"support {rule.support}")
    n_members = len(rule.members or ())
    if n_members > 1:
        details.append(f"{n_members} merged leaves")
    return f"   [{', '.join(details)}]" if details else ""


def log_link_quantity(ensemble) -> str:
    """What a log-link ensemble's ``exp(score)`` is, in words: its response without "log " and what it is of ("log
    rate of 'visits'": the rate, "log mean": the mean, "log hazard ratio": a Cox model's hazard ratio against its
    baseline hazard); "rate" where it has no such response."""
    response = ensemble.response
    if not (response and response.startswith("log ")):
        return "rate"
    return response[len("log ") :].split(" of ")[0]
