"""Smoke test of bench/candidate_sources.py: the trees it adds to a forest say what they are meant to (a stump per
decile cut; a column's bins, left to right, as one tree's leaves), and every variant fits within the budget."""

from pathlib import Path

import numpy as np
import pytest

from bench import candidate_sources
from bench.ebm import load_table
from solver import TreeEnsemble
from solver.binning import quantile_cuts

DATA_DIR = Path(__file__).resolve().parents[2] / "tests" / "data"


def test_a_shape_trees_leaves_are_its_columns_bins_left_to_right():
    cuts = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    forest = TreeEnsemble([candidate_sources.shape_tree(0, cuts)], n_features=1, feature_names=["x"])
    bins = [(-np.inf, 1.0), (1.0, 2.0), (2.0, 4.0), (4.0, 8.0), (8.0, 16.0), (16.0, np.inf)]
    said = []
    for conditions in forest.leaf_conditions():
        bounds = {c.operator: c.threshold for c in conditions}
        said.append((bounds.get(">", -np.inf), bounds.get("<=", np.inf)))
    assert said == bins
    np.testing.assert_array_equal(forest.leaf_values, 1.0)
    x = np.array([[0.5], [1.5], [3.0], [5.0], [9.0], [20.0]])
    np.testing.assert_array_equal(forest.apply(x)[:, 0], np.arange(6))


def test_steps_add_a_stump_at_each_cut_below_a_columns_largest_value():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=200), rng.integers(0, 2, size=200)])
    base = TreeEnsemble([candidate_sources.stump(0, 0.0)], n_features=2, feature_names=["a", "b"])
    forest = candidate_sources.with_column_trees(base, X, "steps", 10)
    cuts = quantile_cuts(X, 10)
    expected = sum(int((c < X[:, j].max()).sum()) for j, c in enumerate(cuts))
    assert forest.n_trees == 1 + expected
    assert all(tree.n_nodes == 3 for tree in forest.trees)


@pytest.mark.parametrize("variant", list(candidate_sources.VARIANTS))
def test_every_variant_fits_within_the_budget(variant):
    table = load_table("stock", DATA_DIR, max_rows=300)
    result = candidate_sources.fit_variant(variant, table)
    assert 0 < result["error"] < 10 and 0 <= result["terms"] <= candidate_sources.BUDGET
