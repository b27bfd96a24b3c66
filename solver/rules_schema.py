"""The ``fire-rules`` document: a rule ensemble's rules, linear terms, intercept, link and classes, checked, and
their JSON. :class:`RulesDocument` holds them; ``solver.rules.RuleEnsemble`` is a RulesDocument that also scores
rows (its module docstring says what the rules, linear terms and links mean).

JSON schema ``fire-rules`` version 3 (``to_dict``/``from_dict``; versions 1, without ``columns``,
``importance`` and ids, and 2, without ``linear`` and members' ``node``, are read too); each rule is a
:class:`~solver.rule_types.Rule` entry, described with its conditions and members in ``solver.rule_types``,
each linear term a :class:`~solver.rule_types.LinearTerm` entry::

    {"format": "fire-rules", "version": 3, "feature_names": [...], "intercept": 2.07 | [0.1, -0.3, 0.2],
     "n_antecedents": 13 | null, "columns": TableEncoding.to_dict() | null,
     "importance": {"Sex": 0.12, "Length": 0.3, ...} | null, "response": "log-odds of 'yes'" | null,
     "link": "logit" | "log" | "softmax", "classes": ["A", "B", "C"], "rules": [Rule, ...],
     "linear": [LinearTerm, ...]}

``to_dict`` writes version 3 only where the document needs it (linear terms, or a rule or member with a
``node``), and ``linear`` only where there are linear terms: a leaves-only ensemble's document is version 2, as
before, and older readers read it. A version 1 or 2 document with ``linear`` is refused.

``link`` is written where it is not ``"identity"`` and ``classes`` where given (absent: identity, or softmax where
the intercept is a list; no classes), so a single-output document reads as before. ``classes`` are the labels
(strings, numbers or booleans, distinct as values and as text): K of them for softmax, where the intercept and
every contribution hold K numbers, or a binary classifier's two for logit; other links have none.
``response`` (optional, null where absent) says what the score is when it is not the target itself: a
classifier's ``"log-odds of 'yes'"``. ``importance`` is each column's share of the summed |contribution| (the
norm of per-class ones) over the training rows (a rule's share split evenly over its columns); a linear term's
is ``|coefficient| * |clip(x) - fill|`` summed over the training rows (0 where missing): how far it moves each
row's score from the term's mean.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal, Self, get_args

import numpy as np

from ._validation import MAX_FEATURE_NAME_LENGTH, check_feature_names, check_keys, is_integer, require_finite
from .encoding import TableEncoding
from .rule_text import label_text
from .rule_types import Amount, LinearTerm, Rule, RuleSchemaError, amount, as_json, count, reduce_conditions

RULES_FORMAT = "fire-rules"
RULES_FORMAT_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
MAX_RULES = 1_000_000

_TOP_LEVEL_KEYS = {
    "format",
    "version",
    "feature_names",
    "intercept",
    "n_antecedents",
    "columns",
    "importance",
    "rules",
    "response",
    "link",
    "baseline_hazard",
    "classes",
    "linear",
}
Link = Literal["identity", "logit", "log", "softmax"]
LINKS: tuple[Link, ...] = get_args(Link)


class RulesDocument:
    """A checked ``fire-rules`` ensemble: rules, linear terms, intercept, link and classes (what they mean:
    ``solver.rules``), read from and written to the JSON document.

    ``n_antecedents`` is the paper's interpretability count: distinct internal tree nodes on the
    paths of the selected leaves (``None`` when unknown). ``encoding``: the TableEncoding of the
    features (numeric columns named ``feature_names``, missing values unknown, where none is given);
    ``importance``: {column: share} or None (see the module docstring). Rule ids and conditions are set here: a
    rule's id is its position in ``rules`` (a tuple of :class:`~solver.rule_types.Rule`), its conditions the
    fewest that hold on the same rows (``solver.rule_types.reduce_conditions``), so a document read, even one
    written before, says each once. ``link`` (None: softmax where ``intercept`` is a sequence, else identity) and
    ``classes`` are checked against the intercept and the contributions (a RuleSchemaError naming the document's
    path, e.g. ``rules/3/contribution``). ``linear``: the linear terms (:class:`~solver.rule_types.LinearTerm`, on
    numeric features, ids set here as their positions), added after the rules (module docstring).
    """

    def __init__(
        self,
        rules: Sequence[Rule],
        intercept: Amount | Sequence[float],
        feature_names: Sequence[str],
        n_antecedents: int | None = None,
        encoding: TableEncoding | None = None,
        importance: dict[str, float] | None = None,
        response: str | None = None,
        *,
        classes: Sequence | None = None,
        link: Link | None = None,
        linear: Sequence[LinearTerm] = (),
        baseline_hazard: tuple[Sequence[float], Sequence[float]] | None = None,
    ):
        self.feature_names = list(feature_names)
        self.encoding = TableEncoding.numeric(self.feature_names) if encoding is None else encoding
        if len(self.encoding.feature_names) != len(self.feature_names):
            raise ValueError(
                f"the encoding has {len(self.encoding.feature_names)} features, the rules {len(self.feature_names)}"
            )
        self.rules = tuple(_said_once(rule, position, self.encoding) for position, rule in enumerate(rules))
        self.intercept = as_amount(intercept)
        self.classes, self.link = _check_outputs(self.rules, self.intercept, classes, link)
        self.response = response
        self.n_antecedents = n_antecedents
        self.importance = importance
        self.linear = tuple(
            term if term.id == position else replace(term, id=position) for position, term in enumerate(linear)
        )
        self._check_linear()
        self.baseline_hazard = None if baseline_hazard is None else _checked_baseline(*baseline_hazard)

    def set_baseline_hazard(self, times, cumulative_hazard) -> None:
        """Keep a Cox model's baseline cumulative hazard (checked), from which its survival curves are read."""
        self.baseline_hazard = _checked_baseline(times, cumulative_hazard)

    def _check_linear(self) -> None:
        """Linear terms on numeric features of this ensemble, their coefficients shaped as the intercept."""
        for term in self.linear:
            where = f"linear/{term.id}"
            if not 0 <= term.feature_index < self.n_features:
                raise RuleSchemaError(f"{where}/feature_index", f"must be a column index in [0, {self.n_features})")
            name = self.feature_names[term.feature_index]
            if term.feature != name:
                raise RuleSchemaError(f"{where}/feature", f"is {term.feature!r} but the feature is {name!r}")
            column, level = self.encoding.feature_column(term.feature_index)
            if level is not None:
                raise RuleSchemaError(
                    f"{where}/feature_index",
                    f"is the level {level!r} of the text column {column.name!r}: linear terms are on numeric columns",
                )
            if np.shape(term.coefficient) != np.shape(self.intercept):
                shape = "a number, as the intercept" if self.link != "softmax" else "a list of numbers, one per class"
                raise RuleSchemaError(f"{where}/coefficient", f"must be {shape}")

    @property
    def n_rules(self) -> int:
        """The number of rules (linear terms not counted: ``n_terms``)."""
        return len(self.rules)

    @property
    def n_linear(self) -> int:
        """The number of linear terms."""
        return len(self.linear)

    @property
    def n_terms(self) -> int:
        """Rules and linear terms: the terms the solver's budget counts."""
        return self.n_rules + self.n_linear

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    # -- JSON ------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """The ``fire-rules`` JSON document."""
        document = {
            "format": RULES_FORMAT,
            "version": RULES_FORMAT_VERSION if self._needs_version_3() else 2,
            "feature_names": list(self.feature_names),
            "intercept": as_json(self.intercept),
            "n_antecedents": self.n_antecedents,
            "columns": self.encoding.to_dict(),
            "importance": None if self.importance is None else dict(self.importance),
            "response": self.response,
        }
        if self.link != "identity":
            document["link"] = self.link
        if self.classes is not None:
            document["classes"] = list(self.classes)
        document["rules"] = [rule.to_dict() for rule in self.rules]
        if self.linear:
            document["linear"] = [term.to_dict() for term in self.linear]
        if self.baseline_hazard is not None:
            times, cumulative = self.baseline_hazard
            document["baseline_hazard"] = {"times": times.tolist(), "cumulative_hazard": cumulative.tolist()}
        return document

    def _needs_version_3(self) -> bool:
        """Whether the document holds what version 2 has not: linear terms, or nodes as rules' origins."""
        return (
            bool(self.linear)
            or self.baseline_hazard is not None
            or any(
                rule.node is not None or any(member.node is not None for member in rule.members or ())
                for rule in self.rules
            )
        )

    @classmethod
    def from_dict(cls, document: Mapping[str, Any]) -> Self:
        """Validate an untrusted ``fire-rules`` document; raises RuleSchemaError (ValueError)."""
        if not isinstance(document, Mapping):
            raise RuleSchemaError("", "a fire-rules document must be a JSON object")
        check_keys(
            "", document, _TOP_LEVEL_KEYS, ("format", "version", "feature_names", "intercept", "rules"), RuleSchemaError
        )
        if document["format"] != RULES_FORMAT:
            raise RuleSchemaError("format", f"must be {RULES_FORMAT!r}, got {document['format']!r}")
        if not is_integer(document["version"]) or document["version"] not in READABLE_VERSIONS:
            raise RuleSchemaError(
                "version", f"is {document['version']!r}; versions {list(READABLE_VERSIONS)} are supported"
            )
        feature_names = _check_feature_names(document["feature_names"])
        encoding = _check_columns(document.get("columns"), feature_names)
        importance = _check_importance(document.get("importance"), encoding)
        intercept = amount(document["intercept"], "intercept")
        n_antecedents = document.get("n_antecedents")
        if n_antecedents is not None:
            n_antecedents = count(n_antecedents, "n_antecedents")
        rules = _entries(document, "rules", "rule", Rule.from_dict, feature_names)
        response = document.get("response")
        if response is not None and not isinstance(response, str):
            raise RuleSchemaError("response", "must be a string or null")
        linear = _check_linear_entries(document, feature_names)
        baseline = document.get("baseline_hazard")
        if baseline is not None:
            if document["version"] < 3:
                version = document["version"]
                raise RuleSchemaError("baseline_hazard", f"is a version 3 key, but the document is version {version}")
            if not isinstance(baseline, Mapping) or set(baseline) != {"times", "cumulative_hazard"}:
                raise RuleSchemaError("baseline_hazard", "must be an object with 'times' and 'cumulative_hazard' lists")
            baseline = (baseline["times"], baseline["cumulative_hazard"])
        return cls(
            rules,
            intercept,
            feature_names,
            n_antecedents,
            encoding,
            importance,
            response,
            classes=document.get("classes"),
            link=document.get("link"),
            linear=linear,
            baseline_hazard=baseline,
        )


# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------
def _checked_baseline(times, cumulative_hazard) -> tuple[np.ndarray, np.ndarray]:
    """A Cox model's baseline cumulative hazard (``solver.losses.cox.baseline_hazard``): increasing positive event
    times, a non-decreasing non-negative hazard at each; a RuleSchemaError naming what is wrong."""
    try:
        times = np.asarray(times, dtype=np.float64)
        cumulative_hazard = np.asarray(cumulative_hazard, dtype=np.float64)
    except (TypeError, ValueError):
        raise RuleSchemaError("baseline_hazard", "times and cumulative_hazard must be lists of numbers") from None
    if times.ndim != 1 or times.shape != cumulative_hazard.shape or not times.size:
        raise RuleSchemaError("baseline_hazard", "times and cumulative_hazard must be non-empty lists of one length")
    if not (np.all(np.isfinite(times)) and times[0] > 0 and np.all(np.diff(times) > 0)):
        raise RuleSchemaError("baseline_hazard/times", "must be positive, finite and increasing")
    increasing = np.all(np.diff(cumulative_hazard) >= 0)
    if not (np.all(np.isfinite(cumulative_hazard)) and cumulative_hazard[0] >= 0 and increasing):
        raise RuleSchemaError("baseline_hazard/cumulative_hazard", "must be finite, non-negative and non-decreasing")
    return times, cumulative_hazard


def _said_once(rule: Rule, position: int, encoding: TableEncoding) -> Rule:
    """``rule`` with its id, its ``position``, and the fewest conditions that fire on the same rows
    (``solver.rule_types.reduce_conditions``)."""
    conditions = reduce_conditions(rule.conditions, encoding)
    if rule.id == position and conditions == rule.conditions:
        return rule
    return replace(rule, id=position, conditions=conditions)


def _check_linear_entries(document: Mapping[str, Any], feature_names: list[str]) -> list[LinearTerm]:
    """The linear terms of an untrusted document (none where it has no ``linear``)."""
    if "linear" not in document:
        return []
    if document["version"] < 3:
        raise RuleSchemaError("linear", f"is a version 3 key, but the document is version {document['version']}")
    return _entries(document, "linear", "linear term", LinearTerm.from_dict, feature_names)


def _entries(document, key: str, noun: str, read, feature_names) -> list:
    """The list ``document[key]`` of untrusted entries, each read by ``read(entry, field, feature_names)`` and
    holding its position as its ``id`` where it gives one."""
    entries = document[key]
    if not isinstance(entries, list):
        raise RuleSchemaError(key, f"must be a list of {noun} objects")
    if len(entries) > MAX_RULES:
        raise RuleSchemaError(key, f"has {len(entries)} entries, above the limit of {MAX_RULES}")
    read_entries = [read(entry, f"{key}/{k}", feature_names) for k, entry in enumerate(entries)]
    for k, entry in enumerate(entries):
        if entry.get("id", k) != k:
            raise RuleSchemaError(f"{key}/{k}/id", f"is {entry['id']!r}: a {noun}'s id is its position {k}")
    return read_entries


def as_amount(value) -> Amount:
    """A number as a float, a sequence of them (one per class) as a tuple of floats."""
    return tuple(np.asarray(value, dtype=np.float64).tolist()) if np.ndim(value) else float(value)


def _check_outputs(rules: Sequence[Rule], intercept: Amount, classes, link) -> tuple[list | None, Link]:
    """(classes, link) of an ensemble, checked with its intercept and rules (module docstring): per-class amounts
    of one length K exactly where the link is softmax, and then K classes."""
    per_class = isinstance(intercept, tuple)
    if link is None:
        link = "softmax" if per_class else "identity"
    if not isinstance(link, str) or link not in LINKS:
        raise RuleSchemaError("link", f"is {link!r} but must be one of {list(LINKS)}")
    if per_class != (link == "softmax"):
        shape = "a list of numbers, one per class," if per_class else "a number"
        raise RuleSchemaError("intercept", f"is {shape} but the link is {link}: per-class scores are softmax's alone")
    size = len(intercept) if per_class else None
    if per_class and size < 2:
        raise RuleSchemaError("intercept", "must hold a number per class, for at least two classes")
    for rule in rules:
        if (len(rule.contribution) if isinstance(rule.contribution, tuple) else None) != size:
            shape = "a number, as the intercept" if size is None else f"a list of {size} numbers, one per class"
            raise RuleSchemaError(f"rules/{rule.id}/contribution", f"must be {shape} (per-class amounts: softmax)")
    return _check_classes(classes, link, size), link


def _check_classes(classes, link: str, size: int | None) -> list | None:
    """The labels of a softmax ensemble's ``size`` classes, or of a logit one's two (optional): strings, numbers
    or booleans (numpy scalars read as Python's), distinct both as values and as text (``label_text``)."""
    if classes is None:
        if link == "softmax":
            raise RuleSchemaError("classes", "are required for per-class scores: a list of the class labels")
        return None
    expected = {"softmax": size, "logit": 2}.get(link)
    if expected is None:
        raise RuleSchemaError("classes", f"must be absent for the {link} link: only classifiers have classes")
    if not isinstance(classes, (list, tuple, np.ndarray)) or len(classes) != expected:
        raise RuleSchemaError("classes", f"must be a list of {expected} labels, as the {link} link's scores say")
    labels: list = []
    texts: set[str] = set()
    for k, label in enumerate(classes):
        label = label.item() if isinstance(label, np.generic) else label
        valid = (
            (isinstance(label, str) and len(label) <= MAX_FEATURE_NAME_LENGTH)
            or isinstance(label, bool)
            or is_integer(label)
            or (isinstance(label, float) and math.isfinite(label))
        )
        if not valid:
            raise RuleSchemaError(
                f"classes/{k}",
                f"must be a string of at most {MAX_FEATURE_NAME_LENGTH} characters, a finite number or a boolean",
            )
        text = label_text(label)
        if text in texts or label in labels:
            raise RuleSchemaError(f"classes/{k}", f"{label!r} repeats an earlier class; class labels must be distinct")
        texts.add(text)
        labels.append(label)
    return labels


def _check_feature_names(names) -> list[str]:
    if not isinstance(names, list) or not names:
        raise RuleSchemaError("feature_names", "must be a non-empty list of strings")
    check_feature_names(names, "feature_names", RuleSchemaError)
    return list(names)


def _check_columns(columns, feature_names: list[str]) -> TableEncoding | None:
    """The encoding of a document's ``columns`` (None where absent): its features must be ``feature_names``."""
    if columns is None:
        return None
    try:
        encoding = TableEncoding.from_dict(columns)
        valid = all(
            isinstance(c.name, str)
            and c.kind in ("numeric", "categorical")
            and all(isinstance(level, str) for level in c.categories)
            and c.missing in (None, True, False)
            and (c.binary is None or (c.kind == "numeric" and math.isfinite(c.binary[0]) and c.binary[0] < c.binary[1]))
            for c in encoding.columns
        )
    except (TypeError, KeyError, AttributeError, IndexError, ValueError):
        valid = False
    if not valid:
        raise RuleSchemaError("columns", "must be a list of {name, kind, categories, missing, values} column objects")
    if encoding.feature_names != feature_names:
        raise RuleSchemaError("columns", "encode other features than feature_names")
    return encoding


def _check_importance(importance, encoding: TableEncoding | None) -> dict[str, float] | None:
    if importance is None:
        return None
    if not isinstance(importance, Mapping) or (
        encoding is not None and sorted(importance) != sorted(encoding.column_names)
    ):
        raise RuleSchemaError("importance", "must map every column name to its share")
    return {name: require_finite(share, f"importance/{name}", RuleSchemaError) for name, share in importance.items()}
