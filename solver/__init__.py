"""FIRE: fast interpretable rule extraction from tree ensembles (Liu & Mazumder, KDD 2023).

A pure numpy/numba library: trees become candidate rules (``forest``; scikit-learn models convert in
``sklearn_adapters``, uploaded files load in ``formats``; leaves or every node, and linear terms beside them,
in ``candidates``), the mapping matrix stays implicit (``leaf_matrix``), penalties and their proxes live in
``penalties``, the losses in ``losses`` (one module each, registered: ``solver.losses.LOSSES``), the greedy block
coordinate descent in ``gbcd``, warm-started lambda paths in ``path``. Every setting of a fit, with its one default
and check, is in ``spec``; ``encoding`` turns tables with text columns into the matrix a forest splits on;
``fitting`` is the one orchestration (split, forest, candidates, path, selected step, rules) that the estimator in
``estimator`` and the service's workers both run.
"""

from . import threads  # noqa: F401 (first: it picks the threading layer before any parallel loop runs)
from .candidates import Candidates, LinearTerms
from .encoding import TableEncoding, TableError
from .estimator import FireClassifier, FireRegressor, FireSurvival
from .fitting import RuleFit, binary_labels, candidate_terms, fit_rules, holdout_split, train_forest
from .forest import TreeEnsemble, as_tree_ensemble
from .forest_schema import Tree
from .leaf_matrix import LeafMatrix, count_antecedents, leaf_matrix, mapping_matrix
from .losses.cox import signed_times
from .losses.logistic import probability
from .path import (
    FrontierStep,
    PathResult,
    PathStep,
    RuleStep,
    best_rule_step,
    best_step,
    fit_path,
    lambda_grid,
    stability_frontier,
)
from .rule_types import Condition, LinearTerm, Member, Rule
from .rules import RuleEnsemble
from .spec import ForestSpec, PathSpec, SpecError

__all__ = [
    "Candidates",
    "Condition",
    "FireClassifier",
    "FireRegressor",
    "FireSurvival",
    "ForestSpec",
    "FrontierStep",
    "LeafMatrix",
    "LinearTerm",
    "LinearTerms",
    "Member",
    "PathResult",
    "PathSpec",
    "PathStep",
    "Rule",
    "RuleEnsemble",
    "RuleFit",
    "RuleStep",
    "SpecError",
    "TableEncoding",
    "TableError",
    "Tree",
    "TreeEnsemble",
    "as_tree_ensemble",
    "best_rule_step",
    "best_step",
    "binary_labels",
    "candidate_terms",
    "count_antecedents",
    "fit_path",
    "fit_rules",
    "holdout_split",
    "lambda_grid",
    "leaf_matrix",
    "mapping_matrix",
    "probability",
    "signed_times",
    "stability_frontier",
    "train_forest",
]
