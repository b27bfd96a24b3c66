"""Rule ensembles: the weighted leaves FIRE selects, as rules people read and score with.

A rule (:class:`solver.rule_types.Rule`) is a conjunction of conditions on the encoded features (``Sex=M > 0.5``,
``Length <= 0.45``), compared on float32 values against float64 thresholds as in the trees, so that a rule fires
on exactly the rows that reach its leaf. The ensemble predicts::

    intercept + sum of the contributions of the rules that fire

where a rule's ``contribution`` is ``weight * value`` summed over the leaves merged into it (leaves whose
simplified conditions are identical, e.g. the same leaf of identical trees). Each rule has a stable ``id``: its
position in ``rules`` (tree order), the same in the JSON, the text (``r3``), the explanations and the exports
(``solver.export``).

The ensemble keeps the :class:`solver.encoding.TableEncoding` of its features (``encoding``: which features
are one-hot levels of which text column, which columns had missing values), so rules read in the data's own
words (``Sex is M``) and export over the original columns.

JSON schema ``fire-rules`` version 2 (``to_dict``/``from_dict``; version 1, without ``columns``,
``importance`` and ids, is read too); each rule is a :class:`~solver.rule_types.Rule` entry, described with its
conditions and members in ``solver.rule_types``::

    {"format": "fire-rules", "version": 2, "feature_names": [...], "intercept": 2.07,
     "n_antecedents": 13 | null, "columns": TableEncoding.to_dict() | null,
     "importance": {"Sex": 0.12, "Length": 0.3, ...} | null, "response": "log-odds of 'yes'" | null,
     "rules": [Rule, ...]}

``response`` (optional, null where absent) says what the intercept and contributions add up to when it is not
the target itself: a classifier's ``"log-odds of 'yes'"`` (its probability is the sigmoid of the prediction).
``importance`` is each column's share of the summed |contribution| over the training rows (a rule's share split
evenly over its columns).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from numba import njit

from ._validation import check_feature_names, check_keys, is_integer, require_finite
from .encoding import TableEncoding
from .forest import as_float32_rows
from .leaf_matrix import count_antecedents
from .rule_text import display_thresholds, rules_text
from .rule_types import Member, Rule, RuleSchemaError, count
from .sklearn_adapters import as_tree_ensemble

RULES_FORMAT = "fire-rules"
RULES_FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
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
}


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
def _predict_rules(X, intercept, contributions, rule_ptr, cond_feature, cond_is_upper, cond_threshold, cond_missing):
    n_rows = X.shape[0]
    out = np.empty(n_rows)
    for i in range(n_rows):
        total = 0.0
        for r in range(contributions.shape[0]):
            if _rule_fires(
                X[i], rule_ptr[r], rule_ptr[r + 1], cond_feature, cond_is_upper, cond_threshold, cond_missing
            ):
                total += contributions[r]
        out[i] = intercept + total
    return out


@njit(cache=True)
def _fired_rules(X, rule_ptr, cond_feature, cond_is_upper, cond_threshold, cond_missing):
    n_rows, n_rules = X.shape[0], rule_ptr.shape[0] - 1
    fired = np.zeros((n_rows, n_rules), np.bool_)
    for i in range(n_rows):
        for r in range(n_rules):
            fired[i, r] = _rule_fires(
                X[i], rule_ptr[r], rule_ptr[r + 1], cond_feature, cond_is_upper, cond_threshold, cond_missing
            )
    return fired


class RuleEnsemble:
    """Weighted decision rules: ``predict(x) = intercept + sum of contributions of rules firing``.

    Build with :meth:`from_weights` (leaves of a forest with nonzero weight) or :meth:`from_dict`.
    ``n_antecedents`` is the paper's interpretability count: distinct internal tree nodes on the
    paths of the selected leaves (``None`` when unknown). ``encoding``: the TableEncoding of the
    features (numeric columns named ``feature_names``, missing values unknown, where none is given);
    ``importance``: {column: share} or None (see the module docstring). Rule ids are set here: a rule's
    id is its position in ``rules`` (a tuple of :class:`~solver.rule_types.Rule`). One output only: a rule with
    per-class contributions is refused (``solver.rule_types`` says how one is represented).
    """

    def __init__(
        self,
        rules: Sequence[Rule],
        intercept: float,
        feature_names: Sequence[str],
        n_antecedents: int | None = None,
        encoding: TableEncoding | None = None,
        importance: dict[str, float] | None = None,
        response: str | None = None,
    ):
        self.rules = tuple(
            rule if rule.id == position else replace(rule, id=position) for position, rule in enumerate(rules)
        )
        per_class = next((rule.id for rule in self.rules if isinstance(rule.contribution, tuple)), None)
        if per_class is not None:
            raise ValueError(f"rule {per_class} has per-class contributions: a RuleEnsemble scores one output")
        self.response = response
        self.intercept = float(intercept)
        self.feature_names = list(feature_names)
        self.n_antecedents = n_antecedents
        self.encoding = TableEncoding.numeric(self.feature_names) if encoding is None else encoding
        if len(self.encoding.feature_names) != len(self.feature_names):
            raise ValueError(
                f"the encoding has {len(self.encoding.feature_names)} features, the rules {len(self.feature_names)}"
            )
        self.importance = importance
        conditions = [c for rule in self.rules for c in rule.conditions]
        self._rule_ptr = np.concatenate([[0], np.cumsum([len(rule.conditions) for rule in self.rules])]).astype(
            np.int64
        )
        self._cond_feature = np.array([c.feature_index for c in conditions], dtype=np.int64)
        self._cond_is_upper = np.array([c.operator == "<=" for c in conditions], dtype=np.bool_)
        self._cond_threshold = np.array([c.threshold for c in conditions], dtype=np.float64)
        self._cond_missing = np.array([c.missing for c in conditions], dtype=np.bool_)
        self._contributions = np.array([rule.contribution for rule in self.rules], dtype=np.float64)

    @property
    def n_rules(self) -> int:
        return len(self.rules)

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    @classmethod
    def from_weights(
        cls,
        forest,
        weights,
        intercept: float,
        *,
        encoding: TableEncoding | None = None,
        X=None,
        response: str | None = None,
    ) -> RuleEnsemble:
        """Rules for the leaves with nonzero weight of ``forest`` (a TreeEnsemble or a fitted
        scikit-learn tree regressor, see ``as_tree_ensemble``); ``weights`` indexes the columns of M.

        Leaf ``j`` contributes ``weights[j] * forest.leaf_values[j]`` when it fires, so the result
        predicts exactly like ``intercept + M @ weights``. Leaves with identical simplified
        conditions are merged into one rule (contributions summed); rules whose contribution is
        exactly 0 are dropped.

        ``encoding``: the TableEncoding of the table the forest splits (its features, by position:
        its names replace the forest's); without one, the features are numeric columns that had
        missing values where ``X`` has NaN. ``X``: the training rows (encoded): thresholds are shown at
        the precision that separates their values, ``support`` counts the rows each rule fires on and
        ``importance`` is computed from them. ``response``: see the module docstring.
        """
        forest = as_tree_ensemble(forest)
        weights = np.asarray(weights, dtype=np.float64)
        if weights.shape != (forest.n_leaves,):
            raise ValueError(f"weights must have shape ({forest.n_leaves},) (one per leaf), got {weights.shape}")
        if not np.isfinite(weights).all():
            raise ValueError("weights must be finite")
        if not math.isfinite(intercept):
            raise ValueError("intercept must be finite")
        leaves = np.flatnonzero(weights)
        trees = forest.leaf_tree(leaves)
        # the simplified conditions, as sorted (feature_index, operator, threshold, missing) -> (conditions, members)
        merged: dict[tuple, tuple] = {}
        for leaf, tree, conditions in zip(leaves, trees, forest.leaf_conditions(leaves)):
            support = int(forest.leaf_support[leaf])
            member = Member(
                int(tree),
                int(leaf - forest.leaf_offsets[tree]),
                float(weights[leaf]),
                float(forest.leaf_values[leaf]),
                support if support >= 0 else None,
            )
            key = tuple(sorted((c.feature_index, c.operator, c.threshold, c.missing) for c in conditions))
            merged.setdefault(key, (conditions, []))[1].append(member)
        rules = [
            rule
            for rule in (Rule.merged(conditions, members) for conditions, members in merged.values())
            if rule.contribution != 0.0
        ]
        kept_leaves = np.array(
            [forest.leaf_offsets[m.tree] + m.leaf for rule in rules for m in rule.members], dtype=np.int64
        )
        n_antecedents = count_antecedents(kept_leaves, *forest.leaf_ancestors)
        if X is not None:
            X32 = as_float32_rows(X, forest.n_features)
            if encoding is None:
                encoding = TableEncoding.numeric(forest.feature_names, np.isnan(X32).any(axis=0))
            rules = display_thresholds(rules, np.asarray(X, dtype=np.float64))
        feature_names = forest.feature_names if encoding is None else encoding.feature_names
        if len(feature_names) != forest.n_features:
            raise ValueError(
                f"the encoding has {len(feature_names)} features, the forest splits on {forest.n_features}"
            )
        rules = [
            replace(rule, conditions=[replace(c, feature=feature_names[c.feature_index]) for c in rule.conditions])
            for rule in rules
        ]
        ensemble = cls(rules, intercept, feature_names, n_antecedents, encoding, response=response)
        if X is not None:
            ensemble._count_training_rows(X32)
        return ensemble

    def _count_training_rows(self, X32: np.ndarray) -> None:
        """Support and importance from the training rows (float32, checked)."""
        fired = self._fired(X32)
        support = fired.sum(axis=0)
        shares = np.zeros(len(self.encoding.columns))
        position = {column.name: k for k, column in enumerate(self.encoding.columns)}
        for rule, rows in zip(self.rules, support):
            columns = {position[self.encoding.feature_column(c.feature_index)[0].name] for c in rule.conditions}
            for k in columns:
                shares[k] += abs(rule.contribution) * rows / len(columns)
        self.rules = tuple(replace(rule, support=int(rows)) for rule, rows in zip(self.rules, support))
        total = shares.sum()
        self.importance = {
            column.name: float(share / total) if total > 0 else 0.0
            for column, share in zip(self.encoding.columns, shares)
        }

    # -- scoring ---------------------------------------------------------------------------

    def predict(self, X) -> np.ndarray:
        """intercept + sum of the contributions of the rules each row satisfies."""
        X32 = as_float32_rows(X, self.n_features)
        return _predict_rules(
            X32,
            self.intercept,
            self._contributions,
            self._rule_ptr,
            self._cond_feature,
            self._cond_is_upper,
            self._cond_threshold,
            self._cond_missing,
        )

    def explain(self, X) -> list[list[dict]]:
        """Per row, the rules that fire as ``{"id", "contribution"}``, in id order: the contributions sum to
        the prediction minus the intercept."""
        fired = self._fired(as_float32_rows(X, self.n_features))
        return [
            [{"id": int(r), "contribution": self.rules[r].contribution} for r in np.flatnonzero(row)] for row in fired
        ]

    def _fired(self, X32: np.ndarray) -> np.ndarray:
        return _fired_rules(
            X32, self._rule_ptr, self._cond_feature, self._cond_is_upper, self._cond_threshold, self._cond_missing
        )

    # -- rendering -------------------------------------------------------------------------

    def to_text(self, sort: str = "contribution", show_missing: str = "auto") -> str:
        """A summary line, the intercept, then one line per rule starting with its id, e.g.
        ``r3  +0.4213  if Sex is M and 0.45 < Length <= 0.6   [support 120]`` (``solver.rule_text``).

        ``sort="contribution"`` lists the largest |contribution| first, ``sort="id"`` keeps tree order.
        ``show_missing``: "auto" (where the column can be missing), "always" or "never".
        """
        return rules_text(self, sort, show_missing)

    # -- JSON ------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """The ``fire-rules`` JSON document."""
        return {
            "format": RULES_FORMAT,
            "version": RULES_FORMAT_VERSION,
            "feature_names": list(self.feature_names),
            "intercept": self.intercept,
            "n_antecedents": self.n_antecedents,
            "columns": self.encoding.to_dict(),
            "importance": None if self.importance is None else dict(self.importance),
            "response": self.response,
            "rules": [rule.to_dict() for rule in self.rules],
        }

    @classmethod
    def from_dict(cls, document: Mapping[str, Any]) -> RuleEnsemble:
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
        intercept = require_finite(document["intercept"], "intercept", RuleSchemaError)
        n_antecedents = document.get("n_antecedents")
        if n_antecedents is not None:
            n_antecedents = count(n_antecedents, "n_antecedents")
        entries = document["rules"]
        if not isinstance(entries, list):
            raise RuleSchemaError("rules", "must be a list of rule objects")
        if len(entries) > MAX_RULES:
            raise RuleSchemaError("rules", f"has {len(entries)} rules, above the limit of {MAX_RULES}")
        rules = [Rule.from_dict(entry, f"rules/{r}", feature_names) for r, entry in enumerate(entries)]
        for r, entry in enumerate(entries):
            if entry.get("id", r) != r:
                raise RuleSchemaError(f"rules/{r}/id", f"is {entry['id']!r}: a rule's id is its position {r}")
        response = document.get("response")
        if response is not None and not isinstance(response, str):
            raise RuleSchemaError("response", "must be a string or null")
        return cls(rules, intercept, feature_names, n_antecedents, encoding, importance, response)


# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------


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
            for c in encoding.columns
        )
    except (TypeError, KeyError, AttributeError):
        valid = False
    if not valid:
        raise RuleSchemaError("columns", "must be a list of {name, kind, categories, missing} column objects")
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
