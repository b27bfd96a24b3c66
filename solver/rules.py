"""Rule ensembles: the weighted leaves FIRE selects, as rules people read and score with.

A rule is a conjunction of conditions (Condition dicts)::

    {"feature": "MedInc", "feature_index": 0, "operator": "<=" | ">", "threshold": 5.03,
     "missing": False}

``missing=True`` means a NaN value satisfies the condition (text: ``MedInc > 5.03 or missing``).
Comparisons are made on float32 values against float64 thresholds, as in the trees, so a rule
fires on exactly the rows that reach its leaf. The ensemble predicts::

    intercept + sum of the contributions of the rules that fire

where a rule's ``contribution`` is ``weight * value`` summed over the leaves merged into it
(leaves whose simplified conditions are identical, e.g. the same leaf of identical trees).

JSON schema ``fire-rules`` version 1 (``to_dict``/``from_dict``)::

    {"format": "fire-rules", "version": 1, "feature_names": [...], "intercept": 2.07,
     "n_antecedents": 13 | null,
     "rules": [{"conditions": [Condition, ...], "contribution": 0.42,
                "tree": 3, "leaf": 7, "weight": 1.2, "value": 0.35, "support": 120 | null,
                "members": [{"tree": 3, "leaf": 7, "weight": 1.2, "value": 0.35,
                             "support": 120 | null}]}]}

Only ``conditions`` and ``contribution`` affect predictions; the other rule keys describe where
the rule comes from (``tree``/``leaf``/``weight``/``value``/``support`` of its first member).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
from numba import njit

from ._validation import SchemaError, check_keys, is_integer, require_finite
from .forest import as_float32_rows
from .leaf_matrix import count_antecedents
from .sklearn_adapters import as_tree_ensemble

RULES_FORMAT = "fire-rules"
RULES_FORMAT_VERSION = 1
MAX_RULES = 1_000_000
MAX_CONDITIONS_PER_RULE = 1_000
_FLOAT32_MAX = float(np.finfo(np.float32).max)

_TOP_LEVEL_KEYS = {"format", "version", "feature_names", "intercept", "n_antecedents", "rules"}
_RULE_KEYS = {"conditions", "contribution", "tree", "leaf", "weight", "value", "support",
              "members"}
_MEMBER_KEYS = {"tree", "leaf", "weight", "value", "support"}
_CONDITION_KEYS = {"feature", "feature_index", "operator", "threshold", "missing"}


class RuleSchemaError(SchemaError):
    """An invalid rule-ensemble document; ``field`` is the JSON path of the offending entry."""


@njit(cache=True)
def _rule_fires(x, start, stop, cond_feature, cond_is_upper, cond_threshold, cond_missing):
    """Whether row x satisfies conditions start:stop (NaN satisfies iff the missing flag is set)."""
    for k in range(start, stop):
        value = x[cond_feature[k]]
        if np.isnan(value):
            if not cond_missing[k]:
                return False
        elif cond_is_upper[k]:
            if not value <= cond_threshold[k]:
                return False
        elif not value > cond_threshold[k]:
            return False
    return True


@njit(cache=True)
def _predict_rules(X, intercept, contributions, rule_ptr, cond_feature, cond_is_upper,
                   cond_threshold, cond_missing):
    n_rows = X.shape[0]
    out = np.empty(n_rows)
    for i in range(n_rows):
        total = 0.0
        for r in range(contributions.shape[0]):
            if _rule_fires(X[i], rule_ptr[r], rule_ptr[r + 1], cond_feature, cond_is_upper,
                           cond_threshold, cond_missing):
                total += contributions[r]
        out[i] = intercept + total
    return out


@njit(cache=True)
def _fired_rules(X, rule_ptr, cond_feature, cond_is_upper, cond_threshold, cond_missing):
    n_rows, n_rules = X.shape[0], rule_ptr.shape[0] - 1
    fired = np.zeros((n_rows, n_rules), np.bool_)
    for i in range(n_rows):
        for r in range(n_rules):
            fired[i, r] = _rule_fires(X[i], rule_ptr[r], rule_ptr[r + 1], cond_feature,
                                      cond_is_upper, cond_threshold, cond_missing)
    return fired


class RuleEnsemble:
    """Weighted decision rules: ``predict(x) = intercept + sum of contributions of rules firing``.

    Build with :meth:`from_weights` (leaves of a forest with nonzero weight) or :meth:`from_dict`.
    ``n_antecedents`` is the paper's interpretability count: distinct internal tree nodes on the
    paths of the selected leaves (``None`` when unknown).
    """

    def __init__(self, rules: list[dict], intercept: float, feature_names: Sequence[str],
                 n_antecedents: int | None = None):
        self.rules = rules
        self.intercept = float(intercept)
        self.feature_names = list(feature_names)
        self.n_antecedents = n_antecedents
        conditions = [c for rule in rules for c in rule["conditions"]]
        self._rule_ptr = np.concatenate(
            [[0], np.cumsum([len(rule["conditions"]) for rule in rules])]).astype(np.int64)
        self._cond_feature = np.array([c["feature_index"] for c in conditions], dtype=np.int64)
        self._cond_is_upper = np.array([c["operator"] == "<=" for c in conditions], dtype=np.bool_)
        self._cond_threshold = np.array([c["threshold"] for c in conditions], dtype=np.float64)
        self._cond_missing = np.array([c["missing"] for c in conditions], dtype=np.bool_)
        self._contributions = np.array([rule["contribution"] for rule in rules], dtype=np.float64)

    @property
    def n_rules(self) -> int:
        return len(self.rules)

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    @classmethod
    def from_weights(cls, forest, weights, intercept: float) -> "RuleEnsemble":
        """Rules for the leaves with nonzero weight of ``forest`` (a TreeEnsemble or a fitted
        scikit-learn tree regressor, see ``as_tree_ensemble``); ``weights`` indexes the columns of M.

        Leaf ``j`` contributes ``weights[j] * forest.leaf_values[j]`` when it fires, so the result
        predicts exactly like ``intercept + M @ weights``. Leaves with identical simplified
        conditions are merged into one rule (contributions summed); rules whose contribution is
        exactly 0 are dropped.
        """
        forest = as_tree_ensemble(forest)
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != (forest.n_leaves,):
            raise ValueError(f"weights must have shape ({forest.n_leaves},) (one per leaf), got "
                             f"{weights.shape}")
        if not np.isfinite(weights).all():
            raise ValueError("weights must be finite")
        if not math.isfinite(intercept):
            raise ValueError("intercept must be finite")
        leaves = np.flatnonzero(weights)
        trees = forest.leaf_tree(leaves)
        merged: dict[tuple, dict] = {}
        for leaf, tree, conditions in zip(leaves, trees, forest.leaf_conditions(leaves)):
            support = int(forest.leaf_support[leaf])
            member = {"tree": int(tree), "leaf": int(leaf - forest.leaf_offsets[tree]),
                      "weight": float(weights[leaf]), "value": float(forest.leaf_values[leaf]),
                      "support": support if support >= 0 else None}
            contribution = member["weight"] * member["value"]
            key = tuple(sorted((c["feature_index"], c["operator"], c["threshold"], c["missing"])
                               for c in conditions))
            if key in merged:
                merged[key]["contribution"] += contribution
                merged[key]["members"].append(member)
            else:
                merged[key] = {**member, "conditions": conditions, "contribution": contribution,
                               "members": [member]}
        rules = [rule for rule in merged.values() if rule["contribution"] != 0.0]
        kept_leaves = np.array([forest.leaf_offsets[m["tree"]] + m["leaf"]
                                for rule in rules for m in rule["members"]], dtype=np.int64)
        n_antecedents = count_antecedents(kept_leaves, *forest.leaf_ancestors)
        return cls(rules, intercept, forest.feature_names, n_antecedents)

    # -- scoring ---------------------------------------------------------------------------

    def predict(self, X) -> np.ndarray:
        """intercept + sum of the contributions of the rules each row satisfies."""
        X32 = as_float32_rows(X, self.n_features)
        return _predict_rules(X32, self.intercept, self._contributions, self._rule_ptr,
                              self._cond_feature, self._cond_is_upper, self._cond_threshold,
                              self._cond_missing)

    def explain(self, X) -> list[list[int]]:
        """Per row, the indices (into ``rules``) of the rules that fire, in rule order."""
        X32 = as_float32_rows(X, self.n_features)
        fired = _fired_rules(X32, self._rule_ptr, self._cond_feature, self._cond_is_upper,
                             self._cond_threshold, self._cond_missing)
        return [np.flatnonzero(row).tolist() for row in fired]

    # -- rendering -------------------------------------------------------------------------

    def to_text(self, sort: str = "contribution", show_missing: bool = True) -> str:
        """One line per rule after an intercept line, e.g.
        ``+0.4213  if MedInc > 5.03 and (AveRooms <= 6.1 or missing)   [tree 3, support 120]``.

        ``sort="contribution"`` lists the largest |contribution| first, ``sort="tree"`` keeps
        tree/leaf order. ``show_missing=False`` hides the NaN routing of conditions.
        """
        if sort == "contribution":
            order = sorted(range(self.n_rules), key=lambda r: -abs(self.rules[r]["contribution"]))
        elif sort == "tree":
            order = sorted(range(self.n_rules),
                           key=lambda r: (self.rules[r].get("tree") is None,
                                          self.rules[r].get("tree") or 0,
                                          self.rules[r].get("leaf") or 0))
        else:
            raise ValueError(f"sort must be 'contribution' or 'tree', got {sort!r}")
        amounts = [f"{self.rules[r]['contribution']:+.6g}" for r in order]
        intercept = f"{self.intercept:+.6g}"
        width = max(len(a) for a in [intercept, *amounts])
        lines = [f"{intercept.rjust(width)}  intercept"]
        for r, amount in zip(order, amounts):
            rule = self.rules[r]
            body = _format_conjunction(rule["conditions"], show_missing)
            lines.append(f"{amount.rjust(width)}  if {body}{_format_origin(rule)}")
        summary = f"# {self.n_rules} rules"
        if self.n_antecedents is not None:
            summary += f", {self.n_antecedents} antecedents"
        return "\n".join([summary, *lines])

    # -- JSON ------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """The ``fire-rules`` JSON document."""
        return {"format": RULES_FORMAT, "version": RULES_FORMAT_VERSION,
                "feature_names": list(self.feature_names), "intercept": self.intercept,
                "n_antecedents": self.n_antecedents,
                "rules": [_copy_rule(rule) for rule in self.rules]}

    @classmethod
    def from_dict(cls, document: Mapping[str, Any]) -> "RuleEnsemble":
        """Validate an untrusted ``fire-rules`` document; raises RuleSchemaError (ValueError)."""
        if not isinstance(document, Mapping):
            raise RuleSchemaError("", "a fire-rules document must be a JSON object")
        check_keys("", document, _TOP_LEVEL_KEYS,
                    ("format", "version", "feature_names", "intercept", "rules"), RuleSchemaError)
        if document["format"] != RULES_FORMAT:
            raise RuleSchemaError("format", f"must be {RULES_FORMAT!r}, got "
                                  f"{document['format']!r}")
        if not is_integer(document["version"]) or document["version"] != RULES_FORMAT_VERSION:
            raise RuleSchemaError("version", f"is {document['version']!r}; only version "
                                  f"{RULES_FORMAT_VERSION} is supported")
        feature_names = _check_feature_names(document["feature_names"])
        intercept = require_finite(document["intercept"], "intercept", RuleSchemaError)
        n_antecedents = document.get("n_antecedents")
        if n_antecedents is not None:
            n_antecedents = _count(n_antecedents, "n_antecedents")
        rules = document["rules"]
        if not isinstance(rules, list):
            raise RuleSchemaError("rules", "must be a list of rule objects")
        if len(rules) > MAX_RULES:
            raise RuleSchemaError("rules", f"has {len(rules)} rules, above the limit of "
                                  f"{MAX_RULES}")
        checked = [_check_rule(rule, f"rules/{r}", feature_names) for r, rule in enumerate(rules)]
        return cls(checked, intercept, feature_names, n_antecedents)


# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------

def _is_unbounded(condition: Mapping[str, Any]) -> bool:
    """Whether every finite float32 value, or none, satisfies the comparison."""
    return abs(condition["threshold"]) >= _FLOAT32_MAX


def format_condition(condition: Mapping[str, Any], show_missing: bool = True) -> str:
    """Human-readable condition, e.g. ``AveRooms <= 6.1 or missing``.

    A bound no finite float32 value can cross reads as ``is missing``/``is not missing``.
    """
    name, operator = condition["feature"], condition["operator"]
    threshold, missing = condition["threshold"], condition["missing"]
    if _is_unbounded(condition):
        if (threshold > 0) == (operator == "<="):
            return f"{name} is any value" if missing else f"{name} is not missing"
        return f"{name} is missing" if missing else f"{name} never matches"
    text = f"{name} {operator} {threshold:.6g}"
    return f"{text} or missing" if missing and show_missing else text


def _format_conjunction(conditions: Sequence[Mapping[str, Any]], show_missing: bool) -> str:
    """Conditions joined by "and"; a ``>``/``<=`` pair on one feature reads as a range."""
    if not conditions:
        return "always"
    parts = []
    k = 0
    while k < len(conditions):
        lower = conditions[k]
        upper = conditions[k + 1] if k + 1 < len(conditions) else None
        if (upper is not None and lower["operator"] == ">" and upper["operator"] == "<="
                and lower["feature_index"] == upper["feature_index"]
                and lower["missing"] == upper["missing"]
                and not _is_unbounded(lower) and not _is_unbounded(upper)):
            text = f"{lower['threshold']:.6g} < {lower['feature']} <= {upper['threshold']:.6g}"
            parts.append(f"{text} or missing" if lower["missing"] and show_missing else text)
            k += 2
        else:
            parts.append(format_condition(lower, show_missing))
            k += 1
    if len(parts) > 1:
        parts = [f"({part})" if part.endswith(" or missing") else part for part in parts]
    return " and ".join(parts)


def _format_origin(rule: Mapping[str, Any]) -> str:
    details = []
    if rule.get("tree") is not None:
        details.append(f"tree {rule['tree']} leaf {rule['leaf']}")
    if rule.get("support") is not None:
        details.append(f"support {rule['support']}")
    n_members = len(rule.get("members") or ())
    if n_members > 1:
        details.append(f"{n_members} merged leaves")
    return f"   [{', '.join(details)}]" if details else ""


def _copy_rule(rule: Mapping[str, Any]) -> dict:
    copied = {key: value for key, value in rule.items() if key not in ("conditions", "members")}
    copied["conditions"] = [dict(c) for c in rule["conditions"]]
    if "members" in rule:
        copied["members"] = [dict(m) for m in rule["members"]]
    return copied


def _count(value, field: str) -> int:
    if not is_integer(value) or value < 0:
        raise RuleSchemaError(field, f"is {value!r} but must be an integer >= 0")
    return int(value)


def _check_feature_names(names) -> list[str]:
    if not isinstance(names, list) or not names:
        raise RuleSchemaError("feature_names", "must be a non-empty list of strings")
    seen: set[str] = set()
    for j, name in enumerate(names):
        if not isinstance(name, str) or not name or name in seen:
            raise RuleSchemaError(f"feature_names/{j}", "must be a non-empty string, unique")
        seen.add(name)
    return list(names)


def _check_condition(condition, field: str, feature_names: list[str]) -> dict:
    if not isinstance(condition, Mapping):
        raise RuleSchemaError(field, "must be a condition object")
    check_keys(field, condition, _CONDITION_KEYS, sorted(_CONDITION_KEYS), RuleSchemaError)
    index = condition["feature_index"]
    if not is_integer(index) or not 0 <= index < len(feature_names):
        raise RuleSchemaError(f"{field}/feature_index", f"is {index!r} but must be a column "
                              f"index in [0, {len(feature_names)})")
    if condition["feature"] != feature_names[index]:
        raise RuleSchemaError(f"{field}/feature", f"is {condition['feature']!r} but "
                              f"feature_names[{index}] is {feature_names[index]!r}")
    if condition["operator"] not in ("<=", ">"):
        raise RuleSchemaError(f"{field}/operator", f"is {condition['operator']!r} but must be "
                              "'<=' or '>'")
    if not isinstance(condition["missing"], bool):
        raise RuleSchemaError(f"{field}/missing", "must be true or false")
    return {"feature": feature_names[index], "feature_index": int(index),
            "operator": condition["operator"],
            "threshold": require_finite(condition["threshold"], f"{field}/threshold", RuleSchemaError),
            "missing": condition["missing"]}


def _check_origin(entry: Mapping, field: str) -> dict:
    """The optional provenance keys shared by rules and members (tree, leaf, weight, ...)."""
    checked: dict[str, Any] = {}
    for key in ("tree", "leaf", "support"):
        if entry.get(key) is not None:
            checked[key] = _count(entry[key], f"{field}/{key}")
        elif key in entry:
            checked[key] = None
    for key in ("weight", "value"):
        if key in entry:
            checked[key] = require_finite(entry[key], f"{field}/{key}", RuleSchemaError)
    return checked


def _check_rule(rule, field: str, feature_names: list[str]) -> dict:
    if not isinstance(rule, Mapping):
        raise RuleSchemaError(field, "must be a rule object")
    check_keys(field, rule, _RULE_KEYS, ("conditions", "contribution"), RuleSchemaError)
    conditions = rule["conditions"]
    if not isinstance(conditions, list) or len(conditions) > MAX_CONDITIONS_PER_RULE:
        raise RuleSchemaError(f"{field}/conditions", "must be a list of at most "
                              f"{MAX_CONDITIONS_PER_RULE} conditions")
    checked = _check_origin(rule, field)
    checked["conditions"] = [_check_condition(c, f"{field}/conditions/{k}", feature_names)
                             for k, c in enumerate(conditions)]
    checked["contribution"] = require_finite(rule["contribution"], f"{field}/contribution", RuleSchemaError)
    if "members" in rule:
        members = rule["members"]
        if not isinstance(members, list):
            raise RuleSchemaError(f"{field}/members", "must be a list of member objects")
        checked["members"] = []
        for m, member in enumerate(members):
            if not isinstance(member, Mapping):
                raise RuleSchemaError(f"{field}/members/{m}", "must be a member object")
            check_keys(f"{field}/members/{m}", member, _MEMBER_KEYS, (), RuleSchemaError)
            checked["members"].append(_check_origin(member, f"{field}/members/{m}"))
    return checked
