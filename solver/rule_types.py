"""Rules as types: the conditions, merged leaves and rules of a :class:`solver.rules.RuleEnsemble`.

Frozen dataclasses, each the entry of the ``fire-rules`` document (``solver.rules``) it is written as by
``to_dict`` and read from by ``from_dict``, which checks an untrusted entry and names what is wrong by its JSON
path (:class:`RuleSchemaError`)::

    Condition  {"feature": "MedInc", "feature_index": 0, "operator": "<=" | ">", "threshold": 5.03,
                "missing": false, "display_threshold": 5.03}
    Member     {"tree": 3, "leaf": 7, "node": 12, "weight": 1.2, "value": 0.35, "support": 120 | null}
    Rule       {"tree": 3, "leaf": 7, "node": 12, "weight": 1.2, "value": 0.35, "support": 120 | null,
                "contribution": 0.42, "id": 0, "conditions": [Condition, ...], "members": [Member, ...]}
    LinearTerm {"id": 0, "feature": "Gr_Liv_Area", "feature_index": 3, "coefficient": 0.031 | [..per class..],
                "lower": 834.0, "upper": 2850.0, "fill": 1500.2, "weight": 1.9, "support": 1400 | null}

A **condition** holds where the feature ``feature_index`` (named ``feature``), compared as a float32 against the
float64 ``threshold``, is ``<=`` or ``>`` it, as in the trees; ``missing=True``: a NaN satisfies it.
``display_threshold`` (optional) is what the text shows (``solver.rule_text``).

**Each condition said once.** A rule's conditions are the fewest that hold on the same rows
(:func:`reduce_conditions`, applied by ``solver.rules_schema.RulesDocument`` to every rule it holds, and by
``RuleEnsemble.from_weights`` before it merges rules), so the document, the text, the exports and the dashboard
say each once: of several ``<=`` (or ``>``) bounds of one feature the tightest is kept (``x > 3 and x > 5``: ``x >
5``; ``x > 2 and x is not missing``: ``x > 2``), and of conditions on the one-hot indicators of one text column
those that the others imply are dropped (``is not J and is not I and is C``: ``is C``). A text column's
conditions are judged on the rows its encoding writes (``solver.encoding``): one indicator 1 for a level, none
for a missing one, which is also how the exports read a level the encoding never saw; ``is not A and is not B``
stays two conditions, as no one condition on an indicator also holds for a missing level (the text says ``not
in {A, B}``).

A **member** is one forest leaf merged into a rule: its ``tree``, its ``leaf`` within that tree, the ``weight``
FIRE gave it, its ``value`` in the forest and the forest's count of training samples that reach it
(``support``, null where unknown); it adds ``weight * value`` where it fires. Every key is optional. A member
may also be a node of any depth (rules from every node, ``solver.candidates``): then ``node`` is its node id
within the tree (as in the forest's arrays), ``leaf`` is absent unless the node is a leaf, and its ``value`` is
1 (a node's column is its indicator). ``node`` is written only where known (version 3; version 1 and 2 documents
have none).

A **rule** fires on the rows that satisfy all its ``conditions`` (none: every row) and then adds its
``contribution``: the ``weight * value`` of its ``members`` (leaves whose simplified conditions are identical),
summed in member order. Its ``id`` is its position in the ensemble. Only ``conditions`` and ``contribution``
affect predictions (both required); ``support`` counts the training rows the rule fires on (the forest's leaf
count where no training rows were given); ``tree``, ``leaf``, ``weight`` and ``value`` are its first member's
and, like ``support``, ``node`` and ``members``, optional (version 1 documents may lack them; what a document
leaves out, ``to_dict`` leaves out).

A **linear term** (version 3) adds ``coefficient * clip(x, lower, upper)`` for the value ``x`` of the numeric
feature ``feature_index`` (named ``feature``), read as a float64 (not rounded to float32 as conditions are), and
``coefficient * fill`` where ``x`` is missing: it is FIRE's winsorized linear term (``solver.candidates``), in raw
units, its centring moved into the ensemble's intercept, so a missing value, scored at the training mean
``fill``, adds the same as the intercept's share of the term. ``weight`` (optional) is the weight FIRE gave the
standardized term and ``support`` (optional, null where unknown) the training rows where ``x`` is present.
``id`` is its position among the ensemble's linear terms (``lin0`` in the text and the exports).

**Per-class rules** (multiclass targets, ``RuleEnsemble.link == "softmax"``). A rule fires or not for every
class at once: its conditions are shared. What it adds is then one amount per class: its ``contribution`` a tuple
with one float per class, in the ensemble's class order, and so a member's ``weight`` (and its ``value`` where a
leaf holds one value per class); the document holds a list of numbers there (at least two). Within a rule every
such list has the contribution's length, and a list where the contribution is one number is refused. A linear
term's ``coefficient`` (and ``weight``) is likewise one number per class. :data:`Amount` types these fields for
both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ._validation import SchemaError, check_keys, is_integer, require_finite
from .encoding import TableEncoding

MAX_CONDITIONS_PER_RULE = 1_000
OPERATORS = ("<=", ">")
FLOAT32_MAX = float(np.finfo(np.float32).max)

Amount = float | tuple[float, ...]
"""What a rule or a leaf adds: one number, or (multiclass) one number per class."""

_CONDITION_KEYS = {"feature", "feature_index", "operator", "threshold", "missing", "display_threshold"}
_REQUIRED_CONDITION_KEYS = ("feature", "feature_index", "operator", "threshold", "missing")
_MEMBER_KEYS = {"tree", "leaf", "node", "weight", "value", "support"}
_RULE_KEYS = _MEMBER_KEYS | {"id", "conditions", "contribution", "members"}
_NULLABLE = ("tree", "leaf", "support")  # null in a document; weight and value are numbers where present
_LINEAR_KEYS = {"id", "feature", "feature_index", "coefficient", "lower", "upper", "fill", "weight", "support"}
_REQUIRED_LINEAR_KEYS = ("feature", "feature_index", "coefficient", "lower", "upper", "fill")


class RuleSchemaError(SchemaError):
    """An invalid rule-ensemble document; ``field`` is the JSON path of the offending entry."""


@dataclass(frozen=True, slots=True)
class Condition:
    """``x[feature_index] <= threshold`` or ``> threshold`` (``operator``), compared as float32; a NaN satisfies
    it where ``missing``. ``display_threshold``: the number the text shows (None: the float32 cut)."""

    feature: str
    feature_index: int
    operator: str  # "<=" or ">"
    threshold: float
    missing: bool
    display_threshold: float | None = None

    def to_dict(self) -> dict:
        entry = {
            "feature": self.feature,
            "feature_index": self.feature_index,
            "operator": self.operator,
            "threshold": self.threshold,
            "missing": self.missing,
        }
        if self.display_threshold is not None:
            entry["display_threshold"] = self.display_threshold
        return entry

    def satisfied_by(self, value: float) -> bool:
        """Whether a present ``value`` satisfies the condition, compared as float32 as the trees compare it."""
        compared = float(np.float32(value))
        return compared <= self.threshold if self.operator == "<=" else compared > self.threshold

    @classmethod
    def from_dict(cls, entry, field: str, feature_names: Sequence[str]) -> Condition:
        """The condition of an untrusted entry at ``field``, on one of ``feature_names``."""
        if not isinstance(entry, Mapping):
            raise RuleSchemaError(field, "must be a condition object")
        check_keys(field, entry, _CONDITION_KEYS, _REQUIRED_CONDITION_KEYS, RuleSchemaError)
        index = _feature_index(entry, field, feature_names)
        if entry["operator"] not in OPERATORS:
            raise RuleSchemaError(f"{field}/operator", f"is {entry['operator']!r} but must be '<=' or '>'")
        if not isinstance(entry["missing"], bool):
            raise RuleSchemaError(f"{field}/missing", "must be true or false")
        threshold = require_finite(entry["threshold"], f"{field}/threshold", RuleSchemaError)
        shown = None
        if "display_threshold" in entry:
            shown = require_finite(entry["display_threshold"], f"{field}/display_threshold", RuleSchemaError)
        return cls(feature_names[index], int(index), entry["operator"], threshold, entry["missing"], shown)


@dataclass(frozen=True, slots=True)
class Member:
    """One forest leaf (or node) merged into a rule (see the module docstring); None where unknown.
    ``omitted``: which of ``tree``, ``leaf`` and ``support`` the document left out (rather than writing null):
    ``to_dict`` leaves them out too, and ``weight``, ``value`` and ``node`` where None."""

    tree: int | None = None
    leaf: int | None = None
    weight: Amount | None = None
    value: Amount | None = None
    support: int | None = None
    omitted: frozenset[str] = field(default=frozenset(), repr=False)
    node: int | None = None

    def to_dict(self) -> dict:
        return _origin_to_dict(self)

    @classmethod
    def from_dict(cls, entry, field: str) -> Member:
        if not isinstance(entry, Mapping):
            raise RuleSchemaError(field, "must be a member object")
        check_keys(field, entry, _MEMBER_KEYS, (), RuleSchemaError)
        return cls(**_origin_from_dict(entry, field))


@dataclass(frozen=True, slots=True)
class Rule:
    """Conditions and what the rule adds where they all hold (see the module docstring). The origin fields
    (``tree``, ``leaf``, ``node``, ``weight``, ``value``; ``omitted`` as :class:`Member`'s) are its first member's,
    ``support`` the training rows it fires on, ``members`` None where a document gives none. ``id`` is given by
    the ensemble (the rule's position). Sequences of conditions and members are kept as tuples."""

    conditions: tuple[Condition, ...]
    contribution: Amount
    id: int | None = None
    tree: int | None = None
    leaf: int | None = None
    weight: Amount | None = None
    value: Amount | None = None
    support: int | None = None
    members: tuple[Member, ...] | None = None
    omitted: frozenset[str] = field(default=frozenset(), repr=False)
    node: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "conditions", tuple(self.conditions))
        if self.members is not None:
            object.__setattr__(self, "members", tuple(self.members))

    @classmethod
    def merged(cls, conditions: Sequence[Condition], members: Sequence[Member]) -> Rule:
        """The rule of leaves that share ``conditions``: its contribution their ``weight * value`` summed in
        order (per class where either is a tuple), its origin the first member's."""
        first = members[0]
        total = np.multiply(first.weight, first.value)
        for member in members[1:]:
            total = total + np.multiply(member.weight, member.value)
        return cls(
            conditions,
            float(total) if total.ndim == 0 else tuple(total.tolist()),
            tree=first.tree,
            leaf=first.leaf,
            node=first.node,
            weight=first.weight,
            value=first.value,
            support=first.support,
            members=members,
        )

    def to_dict(self) -> dict:
        entry = _origin_to_dict(self)
        entry["contribution"] = as_json(self.contribution)
        if self.id is not None:
            entry["id"] = self.id
        entry["conditions"] = [condition.to_dict() for condition in self.conditions]
        if self.members is not None:
            entry["members"] = [member.to_dict() for member in self.members]
        return entry

    @classmethod
    def from_dict(cls, entry, field: str, feature_names: Sequence[str]) -> Rule:
        """The rule of an untrusted entry at ``field`` (its conditions on ``feature_names``). Its ``id`` is left
        to the ensemble, which checks the entry's against the rule's position."""
        if not isinstance(entry, Mapping):
            raise RuleSchemaError(field, "must be a rule object")
        check_keys(field, entry, _RULE_KEYS, ("conditions", "contribution"), RuleSchemaError)
        conditions = entry["conditions"]
        if not isinstance(conditions, list) or len(conditions) > MAX_CONDITIONS_PER_RULE:
            raise RuleSchemaError(
                f"{field}/conditions", f"must be a list of at most {MAX_CONDITIONS_PER_RULE} conditions"
            )
        origin = _origin_from_dict(entry, field)
        conditions = [
            Condition.from_dict(c, f"{field}/conditions/{k}", feature_names) for k, c in enumerate(conditions)
        ]
        contribution = amount(entry["contribution"], f"{field}/contribution")
        members = entry.get("members")
        if "members" in entry:
            if not isinstance(members, list):
                raise RuleSchemaError(f"{field}/members", "must be a list of member objects")
            members = [Member.from_dict(member, f"{field}/members/{m}") for m, member in enumerate(members)]
        size = len(contribution) if isinstance(contribution, tuple) else None
        _check_size(field, origin.get("weight"), origin.get("value"), size)
        for m, member in enumerate(members or ()):
            _check_size(f"{field}/members/{m}", member.weight, member.value, size)
        return cls(conditions, contribution, members=members, **origin)


@dataclass(frozen=True, slots=True)
class LinearTerm:
    """``coefficient * clip(x[feature_index], lower, upper)``, ``coefficient * fill`` where x is missing (see the
    module docstring): one number, or a tuple of one per class (softmax). ``weight``: the solver's weight on the
    standardized term (None where unknown); ``support``: training rows where x is present (None where unknown).
    ``id`` is given by the ensemble (the term's position among its linear terms)."""

    feature: str
    feature_index: int
    coefficient: Amount
    lower: float
    upper: float
    fill: float
    id: int | None = None
    weight: Amount | None = None
    support: int | None = None

    def values(self, X: np.ndarray) -> np.ndarray:
        """(n,) float64: the clipped value of each row of ``X`` (encoded, float64), ``fill`` where missing."""
        column = np.asarray(X, dtype=np.float64)[:, self.feature_index]
        return np.where(np.isnan(column), self.fill, np.clip(column, self.lower, self.upper))

    def to_dict(self) -> dict:
        entry: dict[str, Any] = {}
        if self.id is not None:
            entry["id"] = self.id
        entry.update(
            feature=self.feature,
            feature_index=self.feature_index,
            coefficient=as_json(self.coefficient),
            lower=self.lower,
            upper=self.upper,
            fill=self.fill,
        )
        if self.weight is not None:
            entry["weight"] = as_json(self.weight)
        entry["support"] = self.support
        return entry

    @classmethod
    def from_dict(cls, entry, field: str, feature_names: Sequence[str]) -> LinearTerm:
        """The linear term of an untrusted entry at ``field``, on one of ``feature_names``. Its ``id`` is left to
        the ensemble, which checks it against the term's position (and the feature's kind: numeric)."""
        if not isinstance(entry, Mapping):
            raise RuleSchemaError(field, "must be a linear term object")
        check_keys(field, entry, _LINEAR_KEYS, _REQUIRED_LINEAR_KEYS, RuleSchemaError)
        index = _feature_index(entry, field, feature_names)
        coefficient = amount(entry["coefficient"], f"{field}/coefficient")
        lower = require_finite(entry["lower"], f"{field}/lower", RuleSchemaError)
        upper = require_finite(entry["upper"], f"{field}/upper", RuleSchemaError)
        if not lower <= upper:
            raise RuleSchemaError(f"{field}/upper", f"is {upper!r} but must be >= lower ({lower!r})")
        fill = require_finite(entry["fill"], f"{field}/fill", RuleSchemaError)
        weight = amount(entry["weight"], f"{field}/weight") if "weight" in entry else None
        if weight is not None and np.shape(weight) != np.shape(coefficient):
            raise RuleSchemaError(f"{field}/weight", "must hold as many numbers as the coefficient (one per class)")
        support = None if entry.get("support") is None else count(entry["support"], f"{field}/support")
        return cls(feature_names[index], int(index), coefficient, lower, upper, fill, weight=weight, support=support)


def accepted_levels(encoding: TableEncoding, condition: Condition) -> frozenset[str | None]:
    """The levels of a text column whose rows satisfy ``condition``, on one of the column's one-hot indicators:
    the indicator is 1 for its level and 0 for the others; ``None`` in the set stands for a missing level, where
    every indicator is 0."""
    column, indicated = encoding.feature_column(condition.feature_index)
    return frozenset(
        level for level in (*column.categories, None) if condition.satisfied_by(1.0 if level == indicated else 0.0)
    )


def conditions_key(conditions: Sequence[Condition]) -> tuple:
    """What makes two conjunctions the same rule: their (feature, operator, threshold, missing) sorted, whatever the
    order they were said in (names and display thresholds aside)."""
    return tuple(sorted((c.feature_index, c.operator, c.threshold, c.missing) for c in conditions))


def reduce_conditions(conditions: Sequence[Condition], encoding: TableEncoding) -> tuple[Condition, ...]:
    """The fewest of ``conditions`` (on the features of ``encoding``) that hold on the same rows, in their order
    (module docstring): per numeric feature at most one ``>`` and one ``<=`` bound (:func:`_bounds`), per text
    column the conditions its other ones do not imply (:func:`_unimplied_levels`); none that every row
    satisfies. ``conditions`` themselves (a tuple) where that is all of them."""
    conditions = tuple(conditions)
    groups: dict[tuple, list[int]] = {}
    for position, condition in enumerate(conditions):
        column, level = encoding.feature_column(condition.feature_index)
        key = ("bounds", condition.feature_index) if level is None else ("levels", column.name)
        groups.setdefault(key, []).append(position)
    kept: dict[int, Condition] = {}
    for (kind, _), positions in groups.items():
        group = [conditions[position] for position in positions]
        reduced = _bounds(group) if kind == "bounds" else _unimplied_levels(group, encoding)
        kept.update((positions[k], condition) for k, condition in reduced.items())
    reduced = tuple(kept[position] for position in sorted(kept))
    return conditions if reduced == conditions else reduced


def _bounds(group: list[Condition]) -> dict[int, Condition]:
    """{position: condition} of the bounds that say what the conditions ``group`` on one numeric feature say:
    the tightest ``<=`` and the tightest ``>`` (the first of equal ones), or one of the two where it implies the
    other: no present value satisfies it, or every one satisfies the other (a present value is a finite float32;
    larger ones are refused, ``solver.forest.as_float32_rows``). A NaN satisfies the kept bounds where it
    satisfied them all, as in a tree's simplified path (``TreeEnsemble.leaf_conditions``)."""
    upper = min((k for k, c in enumerate(group) if c.operator == "<="), key=lambda k: group[k].threshold, default=None)
    lower = max((k for k, c in enumerate(group) if c.operator == ">"), key=lambda k: group[k].threshold, default=None)
    if upper is not None and lower is not None:
        upper_some, upper_every = _present_values(group[upper])
        lower_some, lower_every = _present_values(group[lower])
        if not upper_some or lower_every:
            lower = None
        elif not lower_some or upper_every:
            upper = None
    missing = all(condition.missing for condition in group)
    # a lone bound that every value satisfies, a missing one too, says nothing
    kept = [k for k in (upper, lower) if k is not None and not (missing and _present_values(group[k])[1])]
    return {k: replace(group[k], missing=missing) for k in kept}


def _present_values(condition: Condition) -> tuple[bool, bool]:
    """(whether some finite float32 value satisfies a bound, whether every one does): the values that do are a
    ray, reaching the largest or the smallest."""
    at_smallest, at_largest = condition.satisfied_by(-FLOAT32_MAX), condition.satisfied_by(FLOAT32_MAX)
    return at_smallest or at_largest, at_smallest and at_largest


def _unimplied_levels(group: list[Condition], encoding: TableEncoding) -> dict[int, Condition]:
    """{position: condition} of the conditions ``group`` on the indicators of one text column that the others
    kept do not imply: each is dropped where the rest accept the same levels (a missing one included), those
    that accept the most levels tried first, the last of equal ones first (so ``is not J`` goes before ``is C``,
    a repeated condition keeps its first place, and one condition that accepts no level stays rather than two
    that contradict each other)."""
    accepted = [accepted_levels(encoding, condition) for condition in group]
    every_level = frozenset((*encoding.feature_column(group[0].feature_index)[0].categories, None))

    def levels(positions) -> frozenset[str | None]:
        return every_level.intersection(*(accepted[k] for k in positions))

    whole = levels(range(len(group)))
    kept = set(range(len(group)))
    for position in sorted(kept, key=lambda k: (-len(accepted[k]), -k)):
        if levels(kept - {position}) == whole:
            kept.discard(position)
    return {position: group[position] for position in sorted(kept)}


def count(value, field: str) -> int:
    """An integer >= 0 at ``field``."""
    if not is_integer(value) or value < 0:
        raise RuleSchemaError(field, f"is {value!r} but must be an integer >= 0")
    return int(value)


def amount(value, field: str) -> Amount:
    """A finite number at ``field``, or a list of at least two (one per class) as a tuple."""
    if not isinstance(value, (list, tuple)):
        return require_finite(value, field, RuleSchemaError)
    if len(value) < 2:
        raise RuleSchemaError(field, "must be a number or a list of at least two numbers (one per class)")
    return tuple(require_finite(number, f"{field}/{k}", RuleSchemaError) for k, number in enumerate(value))


def magnitude(value: Amount) -> float:
    """How much an amount adds: ``|value|``, or the Euclidean norm of per-class amounts."""
    return math.hypot(*value) if isinstance(value, tuple) else abs(value)


def is_zero(value: Amount) -> bool:
    """Whether an amount adds nothing: 0, or 0 for every class."""
    return all(number == 0.0 for number in value) if isinstance(value, tuple) else value == 0.0


def as_json(value: Amount | None):
    """An amount as the document holds it: a number, or a list of per-class numbers."""
    return list(value) if isinstance(value, tuple) else value


def _check_size(field: str, weight: Amount | None, value: Amount | None, size: int | None) -> None:
    """Per-class weight and value at ``field`` have the rule's number of classes (``size``; None: one number)."""
    for key, number in (("weight", weight), ("value", value)):
        if isinstance(number, tuple) and len(number) != size:
            has = "is one number" if size is None else f"has {size} classes"
            raise RuleSchemaError(f"{field}/{key}", f"has {len(number)} per-class numbers but the contribution {has}")


def _origin_from_dict(entry: Mapping, field: str) -> dict[str, Any]:
    """The origin fields shared by rules and members (tree, leaf, weight, value, support), as keywords."""
    origin: dict[str, Any] = {}
    for key in _NULLABLE:
        if entry.get(key) is not None:
            origin[key] = count(entry[key], f"{field}/{key}")
    for key in ("weight", "value"):
        if key in entry:
            origin[key] = amount(entry[key], f"{field}/{key}")
    if entry.get("node") is not None:
        origin["node"] = count(entry["node"], f"{field}/node")
    origin["omitted"] = frozenset(key for key in _NULLABLE if key not in entry)
    return origin


def _origin_to_dict(origin: Member | Rule) -> dict:
    values = {
        "tree": origin.tree,
        "leaf": origin.leaf,
        "node": origin.node,
        "weight": as_json(origin.weight),
        "value": as_json(origin.value),
        "support": origin.support,
    }
    return {
        key: value
        for key, value in values.items()
        if key not in origin.omitted and (value is not None or key in _NULLABLE)
    }


def _feature_index(entry, field: str, feature_names: Sequence[str]) -> int:
    """The checked ``feature_index`` of an entry naming its feature (``feature``) among ``feature_names``."""
    index = entry["feature_index"]
    if not is_integer(index) or not 0 <= index < len(feature_names):
        raise RuleSchemaError(
            f"{field}/feature_index", f"is {index!r} but must be a column index in [0, {len(feature_names)})"
        )
    if entry["feature"] != feature_names[index]:
        raise RuleSchemaError(
            f"{field}/feature", f"is {entry['feature']!r} but feature_names[{index}] is {feature_names[index]!r}"
        )
    return index
