"""FIRE: fast interpretable rule extraction from tree ensembles (Liu & Mazumder, KDD 2023).

A pure numpy/numba library: trees become candidate rules (``forest``; scikit-learn models convert in
``sklearn_adapters``, uploaded files load in ``formats``), the mapping matrix stays implicit
(``leaf_matrix``), penalties and their proxes live in ``penalties``, the losses (squared, logistic) in
``datafits``, the greedy block coordinate descent in ``gbcd``, warm-started lambda paths in ``path``. Every
setting of a fit, with its one default and check, is in ``spec``; ``encoding`` turns tables with text columns
into the matrix a forest splits on; ``fitting`` is the one orchestration (split, forest, path, selected step,
rules) that the estimator in ``estimator`` and the service's workers both run.
"""

from .datafits import probability
from .encoding import TableEncoding, TableError
from .estimator import FireClassifier, FireRegressor
from .fitting import RuleFit, binary_labels, fit_rules, holdout_split, train_forest
from .forest import Tree, TreeEnsemble
from .leaf_matrix import LeafMatrix, count_antecedents, leaf_matrix, mapping_matrix
from .path import PathResult, PathStep, best_step, fit_path, lambda_grid
from .rule_types import Condition, Member, Rule
from .rules import RuleEnsemble
from .sklearn_adapters import as_tree_ensemble
from .spec import ForestSpec, PathSpec, SpecError

__all__ = [
    "Condition",
    "FireClassifier",
    "FireRegressor",
    "ForestSpec",
    "LeafMatrix",
    "Member",
    "PathResult",
    "PathSpec",
    "PathStep",
    "Rule",
    "RuleEnsemble",
    "RuleFit",
    "SpecError",
    "TableEncoding",
    "TableError",
    "Tree",
    "TreeEnsemble",
    "as_tree_ensemble",
    "best_step",
    "binary_labels",
    "count_antecedents",
    "fit_path",
    "fit_rules",
    "holdout_split",
    "lambda_grid",
    "leaf_matrix",
    "mapping_matrix",
    "probability",
    "train_forest",
]
