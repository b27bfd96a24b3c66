"""FIRE: fast interpretable rule extraction from tree ensembles (Liu & Mazumder, KDD 2023).

A pure numpy/numba library: trees become candidate rules (``forest``), the mapping matrix stays implicit
(``LeafMatrix``), penalties and their proxes live in ``penalties``, the greedy block coordinate descent in
``gbcd``, warm-started lambda paths in ``path``, the scikit-learn style estimator in ``estimator``.
"""

from .estimator import FireRegressor
from .forest import Tree, TreeEnsemble
from .leaf_matrix import LeafMatrix, count_antecedents, leaf_matrix, mapping_matrix
from .path import PathResult, PathStep, fit_path, lambda_grid
from .rules import RuleEnsemble
from .sklearn_adapters import as_tree_ensemble

__all__ = [
    "FireRegressor",
    "LeafMatrix",
    "PathResult",
    "PathStep",
    "RuleEnsemble",
    "Tree",
    "TreeEnsemble",
    "as_tree_ensemble",
    "count_antecedents",
    "fit_path",
    "lambda_grid",
    "leaf_matrix",
    "mapping_matrix",
]
