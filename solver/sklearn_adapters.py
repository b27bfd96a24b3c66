"""scikit-learn tree models as trees of a :class:`TreeEnsemble` and back.

``TreeEnsemble.from_sklearn`` (``sklearn_forest_arguments``)/``to_sklearn`` convert exactly: the TreeEnsemble
routes every row to the same leaf and predicts the same values (regressors bit for bit);
``solver.forest.as_tree_ensemble`` takes a forest as users hold it (a TreeEnsemble or a fitted scikit-learn
tree regressor or classifier).

Regressors fitted with ``criterion="poisson"`` (random forests, extra trees, decision trees) predict the
mean count as any regressor does: nothing is special about them. ``GradientBoostingRegressor`` has no
Poisson loss (``HistGradientBoostingRegressor`` has, and is not supported).

Binary classifiers predict in the units their trees hold (one output):

* ``RandomForestClassifier``, ``ExtraTreesClassifier``, ``DecisionTreeClassifier``, ``ExtraTreeClassifier``:
  the probability of ``classes_[1]``. A leaf's value is its share of ``classes_[1]`` minus the share at its
  tree's root and ``base_score`` is the mean root share, so ``predict`` is ``predict_proba[:, 1]`` (to
  rounding) and no leaf is a zero column of M just because it holds one class only (a pure leaf of the
  other class would hold 0 and could never become a rule).
* ``GradientBoostingClassifier``: the log-odds of ``classes_[1]`` (``decision_function``); leaf values are
  log-odds, the learning rate folded in, ``base_score`` the initial log-odds.

Classifiers of K >= 3 classes become ensembles of ``n_outputs = K`` outputs, output k for ``classes_[k]``
(the caller keeps the labels):

* the forests and decision trees: *vector trees* whose node values are the K class shares minus those at
  the tree's root, ``base_score`` the mean root shares, so ``predict`` is ``predict_proba`` (to rounding);
  ``leaf_values`` are 1 (each leaf's column of M is its indicator) and ``leaf_outputs`` the centered shares;
* ``GradientBoostingClassifier``: its ``estimators_[i, k]`` become *per-output trees* adding to output k
  (round by round: trees ``K * i .. K * i + K - 1``), the learning rate folded in, ``base_score`` the
  initial raw prediction of each class, so ``predict`` is ``decision_function``.

scikit-survival's survival ensembles (``sksurv.ensemble``) become ensembles predicting their ``predict``:

* ``RandomSurvivalForest``, ``ExtraSurvivalTrees``: a leaf holds a cumulative hazard function on the
  training times, and a tree's risk score is its sum over the training event times (``is_event_time_``, as
  ``SurvivalTree.predict`` sums it: the expected number of events). A leaf's value is that sum minus the one at
  its tree's root and ``base_score`` the mean root sum, as for the classifier forests: a leaf without events
  sums to 0 and would otherwise be a zero column of M. Trees fitted with ``low_memory=True`` store the sum as
  their only node value and read the same.
* ``GradientBoostingSurvivalAnalysis`` with ``loss="coxph"`` (its default): the log hazard ratio; its
  regression trees are read as ``GradientBoostingRegressor``'s, the learning rate (times each stage's dropout
  scale when fitted with ``dropout_rate > 0``) folded into the leaves, ``base_score`` its ``"zero"`` init.

Missing values route as in every scikit-learn tree (each split's ``missing_go_to_left``). scikit-survival is
no dependency of the library: its classes are taken from ``sys.modules``, never imported (an estimator of
scikit-survival cannot exist before its module is loaded, by fitting or by unpickling).

``to_sklearn`` converts one-output ensembles only (see there).
"""

import dataclasses
import sys
from typing import Any

import numpy as np
from scipy.stats import gmean
from sklearn.base import BaseEstimator, is_classifier
from sklearn.dummy import DummyClassifier, DummyRegressor
from sklearn.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.tree import (
    BaseDecisionTree,
    DecisionTreeClassifier,
    DecisionTreeRegressor,
    ExtraTreeClassifier,
    ExtraTreeRegressor,
)
from sklearn.tree._tree import NODE_DTYPE
from sklearn.tree._tree import Tree as SklearnTree
from sklearn.utils.validation import check_is_fitted

from .forest_schema import ForestDocument, Tree

SKLEARN_REGRESSORS = (
    RandomForestRegressor,
    ExtraTreesRegressor,
    GradientBoostingRegressor,
    DecisionTreeRegressor,
    ExtraTreeRegressor,
)
SKLEARN_CLASSIFIERS = (
    RandomForestClassifier,
    ExtraTreesClassifier,
    GradientBoostingClassifier,
    DecisionTreeClassifier,
    ExtraTreeClassifier,
)
SURVIVAL_FORESTS = ("RandomSurvivalForest", "ExtraSurvivalTrees")  # classes of sksurv.ensemble
SURVIVAL_BOOSTING = "GradientBoostingSurvivalAnalysis"
SKLEARN_FOREST_NAMES = ", ".join(
    [cls.__name__ for cls in SKLEARN_REGRESSORS + SKLEARN_CLASSIFIERS] + [*SURVIVAL_FORESTS, SURVIVAL_BOOSTING]
)
_LARGEST_FLOAT64 = float(np.finfo(np.float64).max)


def _loaded_sksurv_classes(*names: str) -> tuple[type, ...]:
    """The classes ``names`` of ``sksurv.ensemble`` if scikit-survival is loaded, else none: no estimator of it
    can exist before, so an isinstance test against them needs no import of the optional package."""
    module = sys.modules.get("sksurv.ensemble")
    return () if module is None else tuple(getattr(module, name) for name in names)


def require_sklearn_forest(estimator, error: type[Exception], expected: str) -> None:
    if isinstance(estimator, SKLEARN_REGRESSORS + SKLEARN_CLASSIFIERS):
        return
    if isinstance(estimator, _loaded_sksurv_classes(*SURVIVAL_FORESTS, SURVIVAL_BOOSTING)):
        return
    name = type(estimator).__name__
    if isinstance(estimator, BaseEstimator) and is_classifier(estimator):
        raise error(f"unsupported classifier {name}: expected {expected}")
    raise error(f"unsupported {name}: expected {expected}")


def sklearn_forest_arguments(estimator) -> dict[str, Any]:
    """The TreeEnsemble arguments (trees and scalars) of a fitted single-output scikit-learn tree regressor or
    tree classifier (:data:`SKLEARN_REGRESSORS`, :data:`SKLEARN_CLASSIFIERS`; classifiers in the units of the
    module docstring: one output for two classes, K outputs for K >= 3 classes) or scikit-survival ensemble
    (:data:`SURVIVAL_FORESTS`, :data:`SURVIVAL_BOOSTING`: the risk score), for ``TreeEnsemble.from_sklearn``.

    Raises ValueError for anything else.
    """
    require_sklearn_forest(estimator, ValueError, f"a fitted {SKLEARN_FOREST_NAMES}")
    check_is_fitted(estimator)
    if isinstance(estimator, _loaded_sksurv_classes(*SURVIVAL_FORESTS, SURVIVAL_BOOSTING)):
        return _survival_ensemble_arguments(estimator)
    name = type(estimator).__name__
    if getattr(estimator, "n_outputs_", 1) != 1:
        raise ValueError(
            f"{name} has {estimator.n_outputs_} outputs; FIRE supports single-"
            "output models only: fit one model per target"
        )
    n_classes = len(estimator.classes_) if is_classifier(estimator) else 0
    if is_classifier(estimator) and n_classes < 2:
        raise ValueError(f"{name} has {n_classes} class; a classifier needs two classes or more")
    n_outputs = n_classes if n_classes > 2 else 1
    base_score, scale = 0.0, 1.0
    if isinstance(estimator, BaseDecisionTree):
        kind, members, tree_weight = "decision_tree", [estimator], 1.0
    elif isinstance(estimator, (GradientBoostingRegressor, GradientBoostingClassifier)):
        kind, members, tree_weight = "gradient_boosting", [], 1.0
        scale = float(estimator.learning_rate)
        base_score = _constant_init_prediction(estimator)
    else:
        kind = "extra_trees" if isinstance(estimator, (ExtraTreesRegressor, ExtraTreesClassifier)) else "random_forest"
        members = list(estimator.estimators_)
        tree_weight = 1.0 / len(members)
    if kind == "gradient_boosting":
        # estimators_ is (rounds, 1) or, for K classes, (rounds, K): one tree per output and round, round by round
        trees = [
            _tree_from_sklearn(member.tree_, scale, output=k if n_outputs > 1 else None)
            for stage in estimator.estimators_
            for k, member in enumerate(stage)
        ]
    else:
        trees = [_tree_from_sklearn(member.tree_, scale, vector=n_outputs > 1) for member in members]
    if isinstance(estimator, SKLEARN_CLASSIFIERS) and kind != "gradient_boosting":
        trees, base_score = _centered_at_roots(trees, tree_weight)
    return _ensemble_arguments(estimator, trees, base_score, tree_weight, kind, n_outputs)


def _ensemble_arguments(
    estimator, trees: list[Tree], base_score: float | np.ndarray, tree_weight: float, kind: str, n_outputs: int
) -> dict[str, Any]:
    """The TreeEnsemble arguments of ``trees`` read from ``estimator``, with its feature count and names."""
    names = getattr(estimator, "feature_names_in_", None)
    return {
        "trees": trees,
        "n_features": int(estimator.n_features_in_),
        "feature_names": None if names is None else [str(n) for n in names],
        "base_score": base_score,
        "tree_weight": tree_weight,
        "kind": kind,
        "n_outputs": n_outputs,
    }


def _survival_ensemble_arguments(estimator) -> dict[str, Any]:
    """The TreeEnsemble arguments of a fitted scikit-survival ensemble, predicting its ``predict`` (the risk
    score: see the module docstring)."""
    if isinstance(estimator, _loaded_sksurv_classes(SURVIVAL_BOOSTING)):
        if estimator.loss != "coxph":
            raise ValueError(
                f"{SURVIVAL_BOOSTING} with loss={estimator.loss!r} predicts a survival time; FIRE reads "
                "loss='coxph' (the default), whose prediction is the log hazard ratio"
            )
        # with dropout_rate > 0 each stage is scaled by _scale[i] on top of the learning rate, as _raw_predict does
        stage_scales = estimator.learning_rate * getattr(estimator, "_scale", np.ones(len(estimator.estimators_)))
        trees = [
            _tree_from_sklearn(member.tree_, float(scale))
            for stage, scale in zip(estimator.estimators_, stage_scales)
            for member in stage
        ]
        return _ensemble_arguments(
            estimator, trees, _constant_init_prediction(estimator), 1.0, "gradient_boosting", n_outputs=1
        )
    members = estimator.estimators_
    trees, base_score = _centered_at_roots(
        [_tree_with_values(member.tree_, _node_risk_scores(member)) for member in members], 1.0 / len(members)
    )
    kind = "extra_trees" if isinstance(estimator, _loaded_sksurv_classes("ExtraSurvivalTrees")) else "random_forest"
    return _ensemble_arguments(estimator, trees, base_score, 1.0 / len(members), kind, n_outputs=1)


def _node_risk_scores(survival_tree) -> np.ndarray:
    """Each node's risk score in a fitted scikit-survival ``SurvivalTree``: its cumulative hazard function
    (``value[:, :, 0]``, one column per training time) summed over the training event times, what
    ``SurvivalTree.predict`` returns for a row reaching it; ``low_memory=True`` trees store that sum as their
    only value."""
    value = survival_tree.tree_.value
    if survival_tree.low_memory:
        return value[:, 0, 0].copy()
    return value[:, survival_tree.is_event_time_, 0].sum(axis=1)


def _tree_from_sklearn(sklearn_tree, scale: float, *, vector: bool = False, output: int | None = None) -> Tree:
    """Our Tree from sklearn's ``tree_``; leaf values times ``scale`` (boosting learning rate). A binary
    classification tree's value is its share of the second class; with ``vector``, a classification tree's
    values are the shares of all its classes (a vector tree). ``output``: the output of a per-output tree.
    """
    n_outputs, n_values = sklearn_tree.value.shape[1:]
    if n_outputs != 1 or (n_values > 2 and not vector):
        raise ValueError(
            f"a tree holds {sklearn_tree.value.shape[1:]} values per node; only "
            "single-output trees (one value or the class shares per node) are supported"
        )
    value = sklearn_tree.value[:, 0, :] if vector else sklearn_tree.value[:, 0, n_values - 1]
    return _tree_with_values(sklearn_tree, value * scale if scale != 1.0 else value.copy(), output)


def _tree_with_values(sklearn_tree, value: np.ndarray, output: int | None = None) -> Tree:
    """Our Tree of the splits of sklearn's ``tree_`` (which scikit-survival's trees use too) with node values
    ``value`` (one scalar or vector per node).

    sklearn uses threshold +inf for "all non-missing values left"; it becomes the largest float64,
    equivalent for every finite float32 input (infinite inputs are rejected).
    """
    return Tree(
        children_left=sklearn_tree.children_left,
        children_right=sklearn_tree.children_right,
        feature=sklearn_tree.feature,
        threshold=np.clip(sklearn_tree.threshold, -_LARGEST_FLOAT64, _LARGEST_FLOAT64),
        value=value,
        missing_go_left=sklearn_tree.missing_go_to_left.astype(np.bool_),
        n_samples=sklearn_tree.n_node_samples,
        output=output,
    )


def _centered_at_roots(trees: list[Tree], tree_weight: float) -> tuple[list[Tree], float | np.ndarray]:
    """(the trees with every value minus its tree's root value, the base score that keeps the prediction):
    ``tree_weight * sum_t root_t`` (a vector for vector trees)."""
    if trees[0].is_vector:
        vector_roots = np.array([tree.value[0] for tree in trees])
        centered = [dataclasses.replace(tree, value=tree.value - root) for tree, root in zip(trees, vector_roots)]
        return centered, tree_weight * np.sum(vector_roots, axis=0)
    roots = [float(tree.value[0]) for tree in trees]
    centered = [dataclasses.replace(tree, value=tree.value - root) for tree, root in zip(trees, roots)]
    return centered, tree_weight * float(np.sum(roots))


def _constant_init_prediction(boosting) -> float | np.ndarray:
    """The constant initial raw prediction of a fitted gradient boosting model (its base_score): the
    regressor's constant, the binary classifier's log-odds of its prior, the multiclass classifier's
    symmetric multinomial logit of its priors ``log(p_k / gmean(p))``, one per class (as scikit-learn
    computes them)."""
    init = boosting.init_
    n_classes = len(boosting.classes_) if is_classifier(boosting) else 0
    if isinstance(init, str) and init == "zero":
        return np.zeros(n_classes) if n_classes > 2 else 0.0
    constant = DummyClassifier if is_classifier(boosting) else DummyRegressor
    if not isinstance(init, constant) or getattr(init, "strategy", None) == "stratified":
        raise ValueError(
            f"{type(boosting).__name__} init={init!r} is not a constant prediction; "
            "FIRE needs a constant base score: refit with init=None (default), "
            f"'zero' or a {constant.__name__}" + (" (not strategy='stratified')" if n_classes else "")
        )
    probe = np.zeros((1, boosting.n_features_in_))
    if is_classifier(boosting):
        eps = np.finfo(np.float32).eps  # scikit-learn's clip before the logit
        if n_classes > 2:
            shares = np.clip(init.predict_proba(probe), eps, 1 - eps, dtype=np.float64)
            return np.log(shares / gmean(shares, axis=1)[:, None])[0]
        share = np.clip(init.predict_proba(probe)[0, 1], eps, 1 - eps, dtype=np.float64)
        return float(np.log(share / (1.0 - share)))
    return float(np.asarray(init.predict(probe), dtype=np.float64).ravel()[0])


def to_sklearn(forest: ForestDocument):
    """A fitted scikit-learn estimator predicting like ``forest``.

    random_forest/extra_trees ensembles with base_score 0 and tree_weight 1/T become
    RandomForestRegressor/ExtraTreesRegressor, a single decision_tree with base_score 0 and
    tree_weight 1 a DecisionTreeRegressor; anything else a GradientBoostingRegressor with
    learning_rate = tree_weight and a constant init (imported boosting models therefore get
    learning_rate 1, their values already hold the original rate). Impurities are not stored
    in the schema, so ``feature_importances_`` of the result is meaningless.

    Raises ValueError for an ensemble of ``n_outputs`` > 1 (a multiclass import): no scikit-learn
    estimator predicts its centered vector leaves or per-output trees plus a per-output base score.
    """
    if forest.n_outputs != 1:
        raise ValueError(
            f"to_sklearn converts one-output ensembles only; this one has {forest.n_outputs} outputs "
            "(e.g. a multiclass classifier): use TreeEnsemble.predict, or keep the original estimator"
        )
    p, n_trees = forest.n_features, len(forest.trees)
    averaged = forest.base_score == 0.0 and forest.tree_weight == 1.0 / n_trees
    if forest.kind in ("random_forest", "extra_trees") and averaged:
        forest_class, tree_class = (
            (RandomForestRegressor, DecisionTreeRegressor)
            if forest.kind == "random_forest"
            else (ExtraTreesRegressor, ExtraTreeRegressor)
        )
        ensemble = forest_class(n_estimators=n_trees)
        ensemble.estimators_ = [_sklearn_member(forest, t, tree_class) for t in range(n_trees)]
        ensemble.estimator_ = tree_class()
        ensemble.n_features_in_ = p
        ensemble.n_outputs_ = 1
        return ensemble
    if forest.kind == "decision_tree" and n_trees == 1 and averaged:
        return _sklearn_member(forest, 0, DecisionTreeRegressor)
    boosting = GradientBoostingRegressor(n_estimators=n_trees, learning_rate=forest.tree_weight)
    boosting.estimators_ = np.empty((n_trees, 1), dtype=object)
    for t in range(n_trees):
        boosting.estimators_[t, 0] = _sklearn_member(forest, t, DecisionTreeRegressor)
    boosting.init_ = DummyRegressor(strategy="constant", constant=forest.base_score).fit(
        np.zeros((1, p)), np.array([forest.base_score])
    )
    boosting._loss = boosting._get_loss(sample_weight=None)
    boosting.n_trees_per_iteration_ = 1
    boosting.n_estimators_ = n_trees
    boosting.n_features_in_ = p
    boosting.max_features_ = p
    boosting.train_score_ = np.zeros(n_trees)
    return boosting


def _sklearn_member(forest: ForestDocument, t: int, tree_class):
    """Tree ``t`` of ``forest`` as a fitted ``tree_class`` (DecisionTreeRegressor or ExtraTreeRegressor)."""
    tree = forest.trees[t]
    nodes = np.zeros(tree.n_nodes, dtype=NODE_DTYPE)
    nodes["left_child"] = tree.children_left
    nodes["right_child"] = tree.children_right
    nodes["feature"] = tree.feature
    nodes["threshold"] = tree.threshold
    if tree.n_samples is not None:
        nodes["n_node_samples"] = tree.n_samples
        nodes["weighted_n_node_samples"] = tree.n_samples
    nodes["missing_go_to_left"] = tree.missing_go_left
    sklearn_tree = SklearnTree(forest.n_features, np.array([1], dtype=np.intp), 1)
    sklearn_tree.__setstate__(
        {
            "max_depth": int(forest.leaf_depths[t].max()),
            "node_count": tree.n_nodes,
            "nodes": nodes,
            "values": tree.value.reshape(-1, 1, 1).copy(),
        }
    )
    member = tree_class()
    member.tree_ = sklearn_tree
    member.n_features_in_ = forest.n_features
    member.n_outputs_ = 1
    member.max_features_ = forest.n_features
    return member
