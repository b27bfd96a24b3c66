"""Rule ensembles: the weighted leaves FIRE selects, as rules people read and score with.

A rule (:class:`solver.rule_types.Rule`) is a conjunction of conditions on the encoded features (``Sex=M > 0.5``,
``Length <= 0.45``), compared on float32 values against float64 thresholds as in the trees, so that a rule fires
on exactly the rows that reach its leaf. The ensemble predicts::

    intercept + sum of the contributions of the rules that fire

where a rule's ``contribution`` is ``weight * value`` summed over the leaves merged into it (leaves whose
simplified conditions are identical, e.g. the same leaf of identical trees). Each rule has a stable ``id``: its
position in ``rules`` (tree order), the same in the JSON, the text (``r3``), the explanations and the exports
(``solver.export``). Rules may come from nodes of any depth, not only leaves (``solver.candidates``): a node at
depth d is the rule of the d conditions on its path.

An ensemble may also hold **linear terms** (:class:`~solver.rule_types.LinearTerm`, ``linear``; ids ``lin0``,
``lin1``, ... in the text and the exports), each adding ``coefficient * clip(x, lower, upper)`` for a numeric
feature ``x`` (read as a float64), or ``coefficient * fill`` where ``x`` is missing; the score is then::

    intercept + (sum of the contributions of the rules that fire + sum of the linear terms' amounts)

added in that order (rules in id order, then linear terms in id order). The solver's term is the standardized
``(clip(x) - center) * scale`` (0 where missing); :meth:`RuleEnsemble.from_weights` writes its weight ``w`` as
the coefficient ``w * scale`` per raw unit and moves ``-w * scale * center`` into the intercept, so ``fill`` is
``center`` and a missing value adds nothing beyond that intercept share. ``n_rules`` counts rules only,
``n_linear`` the linear terms, ``n_terms`` both (the budget the solver counts).

That sum is the model's *score*; its ``link`` says what the score is, and what :meth:`RuleEnsemble.predict_mean`
makes of it (the inverse link, giving the mean of the target):

* ``"identity"`` (squared loss; the default): the score is the prediction;
* ``"logit"`` (binary logistic loss): the log-odds of the positive class (``classes[1]`` where the two labels
  are given); the mean is its probability ``1 / (1 + exp(-score))``;
* ``"log"`` (Poisson loss): the log of the rate; the mean is the rate ``exp(score)``: the base rate
  ``exp(intercept)`` times the factor ``exp(contribution)`` of every rule that fires;
* ``"softmax"`` (multinomial loss): one score per class, the intercept and every contribution a tuple of K >= 2
  floats in the order of ``classes`` (``solver.rule_types``); the mean is the class probabilities
  ``p_k = exp(score_k) / sum_j exp(score_j)``, the predicted class the one with the largest score. A rule adds to
  every class at once (a leaf's K weights times its value); only differences between classes matter.

The ensemble keeps the :class:`solver.encoding.TableEncoding` of its features (``encoding``: which features
are one-hot levels of which text column, which columns had missing values), so rules read in the data's own
words (``Sex is M``) and export over the original columns.

The checks and the ``fire-rules`` JSON are :class:`solver.rules_schema.RulesDocument`'s; a RuleEnsemble is one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np
from numba import njit
from scipy.special import expit, softmax

from .candidates import Candidates
from .encoding import TableEncoding
from .forest import as_float32_rows, as_tree_ensemble
from .leaf_matrix import count_antecedents
from .losses.cox import check_survival_times, survival_function
from .rule_text import display_thresholds, rules_text
from .rule_types import Amount, LinearTerm, Member, Rule, as_json, conditions_key, is_zero, magnitude, reduce_conditions
from .rules_schema import Link, RulesDocument, as_amount

INVERSE_LINKS = {"identity": np.asarray, "logit": expit, "log": np.exp, "softmax": partial(softmax, axis=1)}


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
    """(n,) scores: ``intercept + (0.0 + the contributions[r] of the rules r that fire, in rule order)``."""
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
def _predict_per_class(
    X, intercept, contributions, rule_ptr, cond_feature, cond_is_upper, cond_threshold, cond_missing
):
    """(n, K) scores: ``_predict_rules`` for each class k, with ``intercept[k]`` and ``contributions[:, k]``."""
    n_rows, n_classes = X.shape[0], intercept.shape[0]
    out = np.zeros((n_rows, n_classes))
    for i in range(n_rows):
        for r in range(contributions.shape[0]):
            if _rule_fires(
                X[i], rule_ptr[r], rule_ptr[r + 1], cond_feature, cond_is_upper, cond_threshold, cond_missing
            ):
                for k in range(n_classes):
                    out[i, k] += contributions[r, k]
        for k in range(n_classes):
            out[i, k] = intercept[k] + out[i, k]
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


class RuleEnsemble(RulesDocument):
    """Weighted decision rules that score rows: ``score(x) = intercept + sum of the contributions of the rules that
    fire`` (plus the linear terms), the ``link`` saying what the score is (see the module docstring).

    Build with :meth:`from_weights` (the candidates of a forest with nonzero weight) or :meth:`from_dict`; the
    arguments and their checks are RulesDocument's.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        conditions = [c for rule in self.rules for c in rule.conditions]
        self._rule_ptr = np.concatenate([[0], np.cumsum([len(rule.conditions) for rule in self.rules])]).astype(
            np.int64
        )
        self._cond_feature = np.array([c.feature_index for c in conditions], dtype=np.int64)
        self._cond_is_upper = np.array([c.operator == "<=" for c in conditions], dtype=np.bool_)
        self._cond_threshold = np.array([c.threshold for c in conditions], dtype=np.float64)
        self._cond_missing = np.array([c.missing for c in conditions], dtype=np.bool_)
        self._intercept = np.array(self.intercept) if self.link == "softmax" else self.intercept  # (K,) or float
        self._contributions = np.array([rule.contribution for rule in self.rules], dtype=np.float64).reshape(
            (self.n_rules, *np.shape(self.intercept))
        )

    @classmethod
    def from_weights(
        cls,
        forest,
        weights,
        intercept: float | Sequence[float],
        *,
        classes: Sequence | None = None,
        link: Link | None = None,
        encoding: TableEncoding | None = None,
        X=None,
        response: str | None = None,
    ) -> RuleEnsemble:
        """Rules (and linear terms) for the candidates with nonzero weight: ``forest`` is a
        :class:`solver.candidates.Candidates` (its rule columns, then its linear terms), or a TreeEnsemble or a
        fitted scikit-learn tree regressor (see ``as_tree_ensemble``), meaning its leaves. ``weights`` indexes the
        columns of the candidates' matrix M: shape (C,), or (C, K) with K ``intercept`` values for the K
        ``classes`` (the link softmax).

        Rule column ``j`` contributes ``weights[j] * values[j]`` (a K-tuple per class; a leaf's value, 1 for a node
        of any depth) when it fires, so the result scores exactly like ``intercept + M @ weights``. Columns with
        identical simplified conditions, each said once (``solver.rule_types.reduce_conditions``), are merged into
        one rule (contributions summed); rules whose
        contribution is exactly 0 (for every class) are dropped. A node candidate's member records its ``node``
        (and its ``leaf`` where it is one); ``n_antecedents`` counts the distinct internal nodes above the kept
        rule columns. Linear term k (``Candidates.linear``) with weight ``w`` becomes the coefficient
        ``w * scale[k]`` on ``clip(x, lower[k], upper[k])``, its ``-w * scale[k] * center[k]`` added to the
        intercept; a missing x is scored at ``center[k]`` (``fill``), adding 0 in the solver's units, as in M.
        Linear terms of weight 0 (for every class) are dropped.

        ``encoding``: the TableEncoding of the table the forest splits (its features, by position:
        its names replace the forest's); without one, the features are numeric columns that had
        missing values where ``X`` has NaN. ``X``: the training rows (encoded): thresholds are shown at
        the precision that separates their values, ``support`` counts the rows each rule fires on (and each
        linear term's present values) and ``importance`` is computed from them. ``classes``, ``link`` and
        ``response``: see the module docstring.
        """
        candidates = forest if isinstance(forest, Candidates) else Candidates.of(as_tree_ensemble(forest))
        forest = candidates.forest
        if encoding is not None and len(encoding.feature_names) != forest.n_features:
            raise ValueError(
                f"the encoding has {len(encoding.feature_names)} features, the forest splits on {forest.n_features}"
            )
        n_columns, n_rules = candidates.n_terms, candidates.n_rules
        weights = np.asarray(weights, dtype=np.float64)
        if weights.ndim not in (1, 2) or weights.shape[0] != n_columns:
            what = "a row per leaf" if candidates.is_forest_leaves and not candidates.n_linear else "a row per term"
            raise ValueError(
                f"weights must have shape ({n_columns},) or ({n_columns}, K) ({what}), got {weights.shape}"
            )
        if not np.isfinite(weights).all():
            raise ValueError("weights must be finite")
        intercept = as_amount(intercept)
        if np.shape(intercept) != weights.shape[1:]:
            raise ValueError(f"intercept must have shape {weights.shape[1:]} (one per column of weights)")
        if not np.isfinite(intercept).all():
            raise ValueError("intercept must be finite")
        nonzero = weights.reshape(n_columns, -1).any(axis=1)
        columns = np.flatnonzero(nonzero[:n_rules])
        # the simplified conditions, each said once, as sorted (feature_index, operator, threshold, missing) ->
        # (conditions, members, their columns)
        features = TableEncoding.numeric(forest.feature_names) if encoding is None else encoding
        merged: dict[tuple, tuple] = {}
        for column, conditions in zip(columns, candidates.conditions(columns)):
            conditions = reduce_conditions(conditions, features)
            member = _member(candidates, int(column), as_amount(weights[column]))
            entry = merged.setdefault(conditions_key(conditions), (conditions, [], []))
            entry[1].append(member)
            entry[2].append(column)
        rules, kept = [], []
        for conditions, members, member_columns in merged.values():
            rule = Rule.merged(conditions, members)
            if not is_zero(rule.contribution):
                rules.append(rule)
                kept.extend(member_columns)
        n_antecedents = count_antecedents(np.array(kept, dtype=np.int64), *candidates.ancestors)
        X64 = None
        if X is not None:
            X32 = as_float32_rows(X, forest.n_features)
            X64 = np.asarray(X, dtype=np.float64)
            if encoding is None:
                encoding = TableEncoding.of_matrix(forest.feature_names, X64)
            rules = display_thresholds(rules, X64)
        feature_names = forest.feature_names if encoding is None else encoding.feature_names
        rules = [
            replace(rule, conditions=[replace(c, feature=feature_names[c.feature_index]) for c in rule.conditions])
            for rule in rules
        ]
        linear, intercept = _linear_terms(candidates, weights[n_rules:], nonzero[n_rules:], intercept, feature_names)
        ensemble = cls(
            rules,
            intercept,
            feature_names,
            n_antecedents,
            encoding,
            response=response,
            classes=classes,
            link=link,
            linear=linear,
        )
        if X is not None:
            ensemble._count_training_rows(X32, X64)
        return ensemble

    def _count_training_rows(self, X32: np.ndarray, X64: np.ndarray) -> None:
        """Support and importance from the training rows (float32, checked; and as float64)."""
        fired = self._fired(X32)
        support = fired.sum(axis=0)
        shares = np.zeros(len(self.encoding.columns))
        position = {column.name: k for k, column in enumerate(self.encoding.columns)}
        for rule, rows in zip(self.rules, support):
            columns = {position[self.encoding.feature_column(c.feature_index)[0].name] for c in rule.conditions}
            for k in columns:
                shares[k] += magnitude(rule.contribution) * rows / len(columns)
        self.rules = tuple(replace(rule, support=int(rows)) for rule, rows in zip(self.rules, support))
        linear = []
        for term in self.linear:
            moved = np.abs(term.values(X64) - term.fill).sum()  # a missing value is at fill: it adds 0
            shares[position[self.encoding.feature_column(term.feature_index)[0].name]] += (
                magnitude(term.coefficient) * moved
            )
            linear.append(replace(term, support=int((~np.isnan(X64[:, term.feature_index])).sum())))
        self.linear = tuple(linear)
        total = shares.sum()
        self.importance = {
            column.name: float(share / total) if total > 0 else 0.0
            for column, share in zip(self.encoding.columns, shares)
        }

    # -- scoring ---------------------------------------------------------------------------

    def predict(self, X) -> np.ndarray:
        """The scores: intercept + (the contributions of the rules each row satisfies, added in id order, then
        each linear term's ``coefficient * clip(x, lower, upper)``, ``coefficient * fill`` where x is missing, in
        id order); (n,), or (n, K) with a column per class (softmax)."""
        kernel = _predict_per_class if self.link == "softmax" else _predict_rules
        X32 = as_float32_rows(X, self.n_features)
        if not self.linear:
            intercept = self._intercept
        else:
            intercept = np.zeros_like(self._intercept) if self.link == "softmax" else 0.0
        scores = kernel(
            X32,
            intercept,
            self._contributions,
            self._rule_ptr,
            self._cond_feature,
            self._cond_is_upper,
            self._cond_threshold,
            self._cond_missing,
        )
        if not self.linear:
            return scores
        for amounts in self._linear_amounts(np.asarray(X, dtype=np.float64)):
            scores = scores + amounts
        return self._intercept + scores

    def _linear_amounts(self, X64: np.ndarray) -> list[np.ndarray]:
        """What each linear term adds to each row: (n,), or (n, K) per class."""
        return [np.multiply.outer(term.values(X64), term.coefficient) for term in self.linear]

    def predict_mean(self, X) -> np.ndarray:
        """The target's mean under the model, the inverse link of the scores (module docstring): the prediction
        (identity), the probability of the positive class (logit), the rate (log), or (n, K) class probabilities,
        each row summing to 1 (softmax, computed as ``exp(score - max) / sum``)."""
        return INVERSE_LINKS[self.link](self.predict(X))

    def predict_survival(self, X, times) -> np.ndarray:
        """A Cox model's survival curves ``S(t | x) = exp(-H0(t) exp(score))`` (n, len(times)) at ``times``, from its
        baseline cumulative hazard (``solver.losses.cox``); a ValueError for a model without one, and for a time
        outside [0, the last follow-up time of its training rows] (:meth:`survival_times`)."""
        if self.baseline_hazard is None:
            raise ValueError("survival curves need a Cox model (loss='cox'): this model has no baseline hazard")
        return survival_function(*self.baseline_hazard, self.predict(X), times)

    def survival_times(self, times) -> np.ndarray:
        """``times`` as float64 where a Cox model's curves are estimated at each: in [0, the last follow-up time of
        its training rows], the last of its baseline hazard's times; a ValueError naming the first time outside (or
        the model without a baseline hazard)."""
        if self.baseline_hazard is None:
            raise ValueError("survival curves need a Cox model (loss='cox'): this model has no baseline hazard")
        return check_survival_times(self.baseline_hazard[0], times)

    def explain(self, X) -> list[list[dict]]:
        """Per row, the rules that fire as ``{"id", "contribution"}`` (a list per class for softmax), in id order,
        then every linear term as ``{"linear": id, "contribution"}`` (``coefficient * clip(x)``, or
        ``coefficient * fill`` where x is missing): the contributions sum to the score minus the intercept."""
        fired = self._fired(as_float32_rows(X, self.n_features))
        explained = [
            [{"id": int(r), "contribution": as_json(self.rules[r].contribution)} for r in np.flatnonzero(row)]
            for row in fired
        ]
        if self.linear:
            amounts = [a.tolist() for a in self._linear_amounts(np.asarray(X, dtype=np.float64))]
            for i, row in enumerate(explained):
                row.extend({"linear": term.id, "contribution": a[i]} for term, a in zip(self.linear, amounts))
        return explained

    def fires(self, X) -> np.ndarray:
        """Which rules fire on each row: (n, n_rules) booleans, the rules in the model's order."""
        return self._fired(as_float32_rows(X, self.n_features))

    def _fired(self, X32: np.ndarray) -> np.ndarray:
        return _fired_rules(
            X32, self._rule_ptr, self._cond_feature, self._cond_is_upper, self._cond_threshold, self._cond_missing
        )

    # -- rendering -------------------------------------------------------------------------

    def to_text(self, sort: str = "contribution", show_missing: str = "auto") -> str:
        """A summary line, the intercept, then one line per rule starting with its id, e.g.
        ``r3  +0.4213  if Sex is M and 0.45 < Length <= 0.6   [support 120]`` (``solver.rule_text``, which
        says how the log and softmax links read).

        ``sort="contribution"`` lists the largest |contribution| (norm, per class) first, ``sort="id"`` keeps
        tree order. ``show_missing``: "auto" (where the column can be missing), "always" or "never".
        """
        return rules_text(self, sort, show_missing)


# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------


def _member(candidates: Candidates, column: int, weight: Amount) -> Member:
    """The member of rule column ``column``: a leaf (``leaf`` its position among its tree's leaves), or for node
    candidates a node (``node``; ``leaf`` too where the node is a leaf)."""
    forest = candidates.forest
    tree, node = int(candidates.trees[column]), int(candidates.nodes[column])
    if candidates.is_forest_leaves:
        leaf, node_id = column - int(forest.leaf_offsets[tree]), None
    else:
        positions = np.flatnonzero(forest.leaf_nodes[tree] == node)
        leaf = int(positions[0]) if positions.size else None
        node_id = node if candidates.kind == "nodes" else None
    if leaf is not None:
        support = int(forest.leaf_support[forest.leaf_offsets[tree] + leaf])
    else:
        support = _node_support(forest, tree, node)
    return Member(
        tree,
        leaf,
        weight,
        float(candidates.values[column]),
        support if support >= 0 else None,
        node=node_id,
    )


def _node_support(forest, tree: int, node: int) -> int:
    """Training samples that reach internal node ``node`` of ``tree``: its leaves' summed support (-1 where
    unknown)."""
    ptr, ids = forest.leaf_ancestors
    target = forest.global_node_id(tree, node)
    total = 0
    for leaf in range(int(forest.leaf_offsets[tree]), int(forest.leaf_offsets[tree + 1])):
        if target in ids[ptr[leaf] : ptr[leaf + 1]]:
            support = int(forest.leaf_support[leaf])
            if support < 0:
                return -1
            total += support
    return total


def _linear_terms(
    candidates: Candidates, weights: np.ndarray, nonzero: np.ndarray, intercept: Amount, feature_names
) -> tuple[list[LinearTerm], Amount]:
    """The linear terms of nonzero ``weights`` (a row per term of ``candidates.linear``) in raw units, and the
    intercept with their centring moved into it (``RuleEnsemble.from_weights``)."""
    terms = candidates.linear
    if terms is None or not nonzero.any():
        return [], intercept
    shift = np.asarray(intercept, dtype=np.float64)
    linear = []
    for k in np.flatnonzero(nonzero):
        feature = int(terms.features[k])
        coefficient = weights[k] * terms.scale[k]
        shift = shift - coefficient * terms.center[k]
        linear.append(
            LinearTerm(
                feature_names[feature],
                feature,
                as_amount(coefficient),
                float(terms.lower[k]),
                float(terms.upper[k]),
                float(terms.center[k]),
                weight=as_amount(weights[k]),
            )
        )
    return linear, as_amount(shift)
