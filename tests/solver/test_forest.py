"""Tests of solver.forest, solver.leaf_matrix and solver.sklearn_adapters: leaf order, routing (NaN
included), the mapping matrix, sklearn and JSON."""

import copy
import json

import numpy as np
import pandas as pd
import pytest
import scipy.sparse
from sklearn.dummy import DummyRegressor
from sklearn.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from solver import (
    Condition,
    LeafMatrix,
    RuleEnsemble,
    Tree,
    TreeEnsemble,
    as_tree_ensemble,
    count_antecedents,
    leaf_matrix,
    mapping_matrix,
)
from solver.forest_schema import ForestSchemaError
from solver.rule_types import conditions_key
from tests.support.data import DATA


def load_dataset(file_name: str, n_rows: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    frame = pd.read_csv(DATA / file_name, nrows=n_rows).select_dtypes("number")
    return (frame.iloc[:, :-1].to_numpy(), frame.iloc[:, -1].to_numpy(), list(frame.columns[:-1]))


@pytest.fixture(scope="module")
def housing():
    return load_dataset("california_housing_3000.csv.gz", 2000)


@pytest.fixture(scope="module")
def nan_data():
    """Synthetic data with 15% NaN in every column, and a NaN-free copy."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))
    y = 2 * X[:, 0] + np.sin(3 * X[:, 1]) + X[:, 2] * X[:, 3] + 0.1 * rng.normal(size=600)
    X_nan = X.copy()
    X_nan[rng.random(X.shape) < 0.15] = np.nan
    return X, X_nan, y


def sklearn_leaf_nodes(forest: TreeEnsemble, X) -> np.ndarray:
    """Node ids our apply() reaches, comparable with sklearn's est.apply(X)."""
    leaves = forest.apply(X)
    return np.column_stack([forest.leaf_nodes[t][leaves[:, t]] for t in range(forest.n_trees)])


def recursive_dfs_leaves(left, right, node=0) -> list[int]:
    if left[node] == -1:
        return [node]
    return recursive_dfs_leaves(left, right, left[node]) + recursive_dfs_leaves(left, right, right[node])


def small_tree_dict() -> dict:
    """Root splits x0 at 0.5; its right child splits x1 at 2.0: leaves 1, 3, 4."""
    return {
        "format": "fire-forest",
        "version": 1,
        "n_features": 2,
        "feature_names": ["a", "b"],
        "base_score": 0.25,
        "tree_weight": 0.5,
        "trees": [
            {
                "children_left": [1, -1, 3, -1, -1],
                "children_right": [2, -1, 4, -1, -1],
                "feature": [0, -2, 1, -2, -2],
                "threshold": [0.5, -2.0, 2.0, -2.0, -2.0],
                "value": [0.0, 1.0, 0.0, 2.0, 3.0],
                "missing_go_left": [True, False, False, False, False],
                "n_samples": [10, 4, 6, 2, 4],
            }
        ],
    }


# -- leaf order ------------------------------------------------------------------------------


def test_leaves_follow_depth_first_order_for_best_first_trees(housing):
    X, y, _ = housing
    tree = DecisionTreeRegressor(max_leaf_nodes=40, random_state=0).fit(X, y)
    forest = TreeEnsemble.from_sklearn(tree)
    left, right = tree.tree_.children_left, tree.tree_.children_right
    expected = recursive_dfs_leaves(left, right)
    assert forest.leaf_nodes[0].tolist() == expected
    node_id_order = np.flatnonzero(left == -1).tolist()
    assert node_id_order != expected, "best-first growth should number nodes out of DFS order"
    np.testing.assert_array_equal(forest.leaf_values, tree.tree_.value[expected, 0, 0])
    np.testing.assert_array_equal(forest.leaf_support, tree.tree_.n_node_samples[expected])


def test_leaf_offsets_concatenate_trees(housing):
    X, y, _ = housing
    rf = RandomForestRegressor(n_estimators=5, max_depth=3, random_state=0).fit(X, y)
    forest = TreeEnsemble.from_sklearn(rf)
    counts = [e.tree_.n_leaves for e in rf.estimators_]
    np.testing.assert_array_equal(forest.leaf_offsets, np.concatenate([[0], np.cumsum(counts)]))
    assert forest.n_leaves == sum(counts) and forest.n_trees == 5
    assert forest.n_internal_nodes == sum(e.tree_.node_count - e.tree_.n_leaves for e in rf.estimators_)


# -- routing ---------------------------------------------------------------------------------


@pytest.mark.parametrize("trained_with_nan", [True, False])
@pytest.mark.parametrize(
    "make",
    [
        lambda: RandomForestRegressor(n_estimators=15, max_depth=6, random_state=0),
        lambda: ExtraTreesRegressor(n_estimators=15, max_depth=6, random_state=0),
        lambda: DecisionTreeRegressor(max_leaf_nodes=50, random_state=0),
    ],
    ids=["random_forest", "extra_trees", "best_first_tree"],
)
def test_apply_matches_sklearn_on_nan(nan_data, make, trained_with_nan):
    X, X_nan, y = nan_data
    est = make().fit(X_nan if trained_with_nan else X, y)
    forest = TreeEnsemble.from_sklearn(est)
    expected = est.apply(X_nan).reshape(len(X_nan), -1)
    np.testing.assert_array_equal(sklearn_leaf_nodes(forest, X_nan), expected)
    np.testing.assert_allclose(forest.predict(X_nan), est.predict(X_nan), rtol=1e-12, atol=1e-12)


def test_nan_trained_forest_has_infinite_thresholds_replaced(nan_data):
    """sklearn's "missing values alone go right" split (threshold +inf) routes identically."""
    X, _X_nan, y = nan_data
    X_rare = X.copy()
    X_rare[:300, 0] = np.nan  # NaN strongly tied to the target: sklearn isolates them
    y_rare = np.where(np.isnan(X_rare[:, 0]), 10.0, y)
    tree = DecisionTreeRegressor(max_depth=3, random_state=0).fit(X_rare, y_rare)
    assert np.isinf(tree.tree_.threshold).any()
    forest = TreeEnsemble.from_sklearn(tree)
    assert np.isfinite(forest.trees[0].threshold).all()
    np.testing.assert_array_equal(sklearn_leaf_nodes(forest, X_rare), tree.apply(X_rare)[:, None])


def test_apply_casts_to_float32_like_sklearn():
    """A float64 value just above a threshold that rounds onto it in float32 goes left."""
    X = np.array([[0.0], [1.0]] * 5)
    y = np.array([0.0, 1.0] * 5)
    tree = DecisionTreeRegressor().fit(X, y)
    threshold = tree.tree_.threshold[0]
    probe = np.array(
        [[np.nextafter(np.float32(threshold), np.float32(1), dtype=np.float32)], [float(np.float32(threshold)) + 1e-12]]
    )
    forest = TreeEnsemble.from_sklearn(tree)
    np.testing.assert_array_equal(sklearn_leaf_nodes(forest, probe), tree.apply(probe)[:, None])


def test_apply_output_layout_and_dtype(housing):
    X, y, _ = housing
    small = TreeEnsemble.from_sklearn(RandomForestRegressor(3, max_depth=4, random_state=0).fit(X, y))
    leaves = small.apply(X[:50])
    assert leaves.shape == (50, 3) and leaves.dtype == np.uint8 and leaves.flags.c_contiguous
    big = TreeEnsemble.from_sklearn(DecisionTreeRegressor(max_leaf_nodes=300).fit(X, y))
    assert big.apply(X[:5]).dtype == np.uint16
    assert big.apply(np.empty((0, X.shape[1]))).shape == (0, 1)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (np.zeros(8), "2-D"),
        (np.zeros((3, 5)), "5 columns"),
        (np.array([["a"] * 8]), "numeric"),
        (np.array([[np.inf] + [0.0] * 7]), "infinity"),
        (np.array([[1e39] + [0.0] * 7]), "too large for float32"),
    ],
)
def test_apply_rejects_invalid_X(housing, bad, message):
    X, y, _ = housing
    forest = TreeEnsemble.from_sklearn(DecisionTreeRegressor(max_depth=2).fit(X, y))
    with pytest.raises(ValueError, match=message):
        forest.apply(bad)


# -- mapping matrix --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: RandomForestRegressor(n_estimators=20, max_depth=5, random_state=0),
        lambda: RandomForestRegressor(n_estimators=10, max_leaf_nodes=30, random_state=0),
        lambda: ExtraTreesRegressor(n_estimators=20, max_depth=5, random_state=0),
        lambda: GradientBoostingRegressor(n_estimators=30, max_depth=3, learning_rate=0.2, random_state=0),
        lambda: GradientBoostingRegressor(n_estimators=10, loss="absolute_error", subsample=0.7, random_state=0),
        lambda: DecisionTreeRegressor(max_leaf_nodes=60, random_state=0),
    ],
    ids=["rf", "rf_best_first", "et", "gb", "gb_lad", "dt"],
)
def test_mapping_matrix_reproduces_forest_prediction(housing, make):
    X, y, _ = housing
    est = make().fit(X[:1500], y[:1500])
    forest = TreeEnsemble.from_sklearn(est)
    matrix = leaf_matrix(forest, X[1500:])
    reproduced = forest.base_score + matrix.matvec(np.full(forest.n_leaves, forest.tree_weight))
    expected = est.predict(X[1500:])
    np.testing.assert_allclose(reproduced, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())
    np.testing.assert_allclose(forest.predict(X[1500:]), expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())


def test_gradient_boosting_base_score_and_learning_rate(housing):
    X, y, _ = housing
    gb = GradientBoostingRegressor(n_estimators=5, learning_rate=0.3, random_state=0).fit(X, y)
    forest = TreeEnsemble.from_sklearn(gb)
    assert forest.base_score == gb.init_.constant_[0, 0] and forest.tree_weight == 1.0
    first = gb.estimators_[0, 0].tree_
    leaf = forest.leaf_nodes[0][0]
    assert forest.leaf_values[0] == 0.3 * first.value[leaf, 0, 0]
    zero = GradientBoostingRegressor(n_estimators=3, init="zero").fit(X, y)
    assert TreeEnsemble.from_sklearn(zero).base_score == 0.0


@pytest.mark.parametrize(
    "make",
    [
        lambda: RandomForestClassifier(n_estimators=30, max_depth=3, random_state=0),
        lambda: ExtraTreesClassifier(n_estimators=30, max_depth=4, random_state=0),
        lambda: DecisionTreeClassifier(max_depth=6, random_state=0),
    ],
)
def test_binary_classifier_forests_predict_the_probability_from_centered_leaves(nan_data, make):
    _, X, y = nan_data
    labels = np.where(y > np.quantile(y, 0.8), "yes", "no")
    est = make().fit(X, labels)
    forest = TreeEnsemble.from_sklearn(est)
    np.testing.assert_allclose(forest.predict(X), est.predict_proba(X)[:, 1], rtol=0, atol=1e-12)
    # every leaf is its share of "yes" minus its tree's root share: pure "no" leaves are not zero columns
    roots = np.repeat(
        [member.tree_.value[0, 0, 1] for member in getattr(est, "estimators_", [est])], np.diff(forest.leaf_offsets)
    )
    shares = forest.leaf_values + roots
    assert np.all((shares >= -1e-15) & (shares <= 1 + 1e-15))
    pure_no = np.abs(shares) < 1e-15
    assert pure_no.any() and np.all(forest.leaf_values[pure_no] < 0)


def test_gradient_boosting_classifier_predicts_log_odds(housing):
    X, y, _ = housing
    labels = np.where(y > np.quantile(y, 0.7), "high", "low")
    for init in (None, "zero"):
        gb = GradientBoostingClassifier(n_estimators=20, max_depth=2, init=init, random_state=0).fit(X, labels)
        forest = TreeEnsemble.from_sklearn(gb)
        np.testing.assert_allclose(forest.predict(X), gb.decision_function(X), rtol=0, atol=1e-12)


def test_sparse_products_match_explicit_matrix(housing):
    X, y, _ = housing
    forest = TreeEnsemble.from_sklearn(RandomForestRegressor(n_estimators=8, max_depth=4, random_state=0).fit(X, y))
    matrix = leaf_matrix(forest, X[:300])
    csc = matrix.to_csc()
    assert isinstance(csc, scipy.sparse.csc_matrix) and csc.shape == (300, forest.n_leaves)
    assert csc.nnz == 300 * forest.n_trees
    rng = np.random.default_rng(1)
    w, r = rng.normal(size=forest.n_leaves), rng.normal(size=300)
    np.testing.assert_allclose(matrix.matvec(w), csc @ w, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(matrix.rmatvec(r), csc.T @ r, rtol=1e-13, atol=1e-13)
    weights = rng.random(300)
    pattern = (csc != 0).astype(float)
    np.testing.assert_allclose(matrix.column_counts(weights), pattern.T @ weights, rtol=1e-13)
    counts = matrix.column_counts()
    np.testing.assert_array_equal(np.add.reduceat(counts, forest.leaf_offsets[:-1]), 300)
    assert (mapping_matrix(forest, X[:300]) != csc).nnz == 0


def test_leaf_matrix_rejects_wrong_vector_shapes():
    matrix = LeafMatrix(np.zeros((4, 1), np.uint8), np.ones(2), np.array([0, 2]))
    with pytest.raises(ValueError, match=r"\(2,\)"):
        matrix.matvec(np.ones(3))
    with pytest.raises(ValueError, match=r"\(4,\)"):
        matrix.rmatvec(np.ones(2))


# -- conditions and antecedents --------------------------------------------------------------


def test_leaf_conditions_are_simplified_and_keep_nan_routing():
    """x0 <= 5 (NaN left) then x0 <= 3 (NaN right) then x0 > 1 (NaN left): x0 in (1, 3], no NaN."""
    tree = Tree(
        children_left=np.array([1, 2, 3, -1, -1, -1, -1]),
        children_right=np.array([6, 5, 4, -1, -1, -1, -1]),
        feature=np.array([0, 0, 0, -2, -2, -2, -2]),
        threshold=np.array([5.0, 3.0, 1.0, 0, 0, 0, 0]),
        value=np.arange(7.0),
        missing_go_left=np.array([True, False, True, False, False, False, False]),
    )
    forest = TreeEnsemble([tree], n_features=1, feature_names=["x"])
    assert forest.leaf_nodes[0].tolist() == [3, 4, 5, 6]
    conditions = forest.leaf_conditions()
    assert conditions[0] == (Condition(feature="x", feature_index=0, operator="<=", threshold=1.0, missing=False),)
    assert [(c.operator, c.threshold, c.missing) for c in conditions[1]] == [(">", 1.0, False), ("<=", 3.0, False)]
    assert [(c.operator, c.threshold, c.missing) for c in conditions[2]] == [(">", 3.0, True), ("<=", 5.0, True)]
    assert [(c.operator, c.threshold, c.missing) for c in conditions[3]] == [(">", 5.0, False)]


def evaluate_conditions(conditions, X32):
    mask = np.ones(len(X32), dtype=bool)
    for c in conditions:
        column = X32[:, c.feature_index].astype(np.float64)
        holds = column <= c.threshold if c.operator == "<=" else column > c.threshold
        mask &= np.where(np.isnan(column), c.missing, holds)
    return mask


def test_leaf_conditions_select_exactly_the_rows_of_their_leaf(nan_data):
    _, X_nan, y = nan_data
    forest = TreeEnsemble.from_sklearn(RandomForestRegressor(n_estimators=5, max_depth=6, random_state=0).fit(X_nan, y))
    leaves = forest.apply(X_nan)
    X32 = X_nan.astype(np.float32)
    for j, conditions in enumerate(forest.leaf_conditions()):
        t = forest.leaf_tree(j)
        expected = leaves[:, t] == j - forest.leaf_offsets[t]
        np.testing.assert_array_equal(evaluate_conditions(conditions, X32), expected)
        assert len({(c.feature_index, c.operator) for c in conditions}) == len(conditions)


def test_node_condition_keys_are_the_keys_of_each_nodes_conditions(nan_data):
    """The walk down each tree gives every node the key of its own simplified conditions (NaN routing included), on
    a forest trained with missing values and on a tree whose node ids do not follow it (a child before its
    parent, as imported forests may number them)."""
    _, X_nan, y = nan_data
    trained = TreeEnsemble.from_sklearn(
        RandomForestRegressor(n_estimators=5, max_depth=6, random_state=0).fit(X_nan, y)
    )
    shuffled = Tree(  # test_leaf_conditions_are_simplified_and_keep_nan_routing's tree, its nodes renumbered
        children_left=np.array([5, -1, -1, 6, -1, 3, -1]),
        children_right=np.array([4, -1, -1, 2, -1, 1, -1]),
        feature=np.array([0, -2, -2, 0, -2, 0, -2]),
        threshold=np.array([5.0, 0, 0, 1.0, 0, 3.0, 0]),
        value=np.arange(7.0),
        missing_go_left=np.array([True, False, False, True, False, False, False]),
    )
    for forest in (trained, TreeEnsemble([shuffled], n_features=1, feature_names=["x"])):
        for t, tree in enumerate(forest.trees):
            nodes = list(range(tree.n_nodes))
            expected = [conditions_key(forest.node_conditions(t, node)) for node in nodes]
            assert forest.node_condition_keys(t, nodes) == expected


def test_leaf_ancestors_and_antecedent_count(housing):
    X, y, _ = housing
    forest = TreeEnsemble.from_sklearn(
        RandomForestRegressor(n_estimators=6, max_leaf_nodes=12, random_state=0).fit(X, y)
    )
    ptr, ids = forest.leaf_ancestors
    assert ptr.shape == (forest.n_leaves + 1,) and ids.max() < forest.n_nodes
    first_leaf_path = ids[ptr[0] : ptr[1]]
    assert first_leaf_path[0] == 0 and (forest.trees[0].children_left[first_leaf_path] != -1).all()
    assert ids[ptr[forest.leaf_offsets[1]]] == forest.trees[0].n_nodes  # root of tree 1
    # every internal node is on some path; a whole tree needs all its internal nodes
    assert np.unique(ids).size == forest.n_internal_nodes
    first_tree = np.arange(forest.leaf_offsets[0], forest.leaf_offsets[1])
    assert count_antecedents(first_tree, ptr, ids) == forest.leaf_offsets[1] - 1
    assert count_antecedents(np.ones(forest.n_leaves, bool), ptr, ids) == forest.n_internal_nodes
    assert count_antecedents(np.zeros(forest.n_leaves, bool), ptr, ids) == 0
    with pytest.raises(ValueError, match="mask"):
        count_antecedents(np.ones(3, bool), ptr, ids)
    with pytest.raises(ValueError, match="indices"):
        count_antecedents(np.array([forest.n_leaves]), ptr, ids)
    rng = np.random.default_rng(0)
    for _ in range(20):
        chosen = rng.choice(forest.n_leaves, size=rng.integers(0, 15), replace=False)
        brute = set()
        for j in chosen:
            brute.update(ids[ptr[j] : ptr[j + 1]].tolist())
            assert ptr[j + 1] - ptr[j] >= len(forest.leaf_conditions([j])[0])
        assert count_antecedents(chosen, ptr, ids) == len(brute)
        mask = np.zeros(forest.n_leaves, bool)
        mask[chosen] = True
        assert count_antecedents(mask, ptr, ids) == len(brute)


def test_leaf_ancestor_paths_are_root_first():
    forest = TreeEnsemble.from_dict(small_tree_dict())
    ptr, ids = forest.leaf_ancestors
    assert [ids[ptr[j] : ptr[j + 1]].tolist() for j in range(3)] == [[0], [0, 2], [0, 2]]
    assert count_antecedents(np.array([0]), ptr, ids) == 1
    assert count_antecedents(np.array([1, 2]), ptr, ids) == 2


# -- sklearn round trip ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "use_nan"),
    [
        (lambda: RandomForestRegressor(n_estimators=10, max_depth=6, random_state=0), True),
        (lambda: ExtraTreesRegressor(n_estimators=10, max_depth=6, random_state=0), True),
        (lambda: DecisionTreeRegressor(max_leaf_nodes=40, random_state=0), True),
        (lambda: GradientBoostingRegressor(n_estimators=20, learning_rate=0.3, random_state=0), False),
    ],
    ids=["rf", "et", "dt", "gb"],
)
def test_json_and_sklearn_round_trips_are_exact(nan_data, make, use_nan):
    X, X_nan, y = nan_data
    X_fit = X_nan if use_nan else X
    est = make().fit(X_fit, y)
    forest = TreeEnsemble.from_sklearn(est)
    document = json.loads(json.dumps(forest.to_dict()))
    restored = TreeEnsemble.from_dict(document)
    assert restored.to_dict() == forest.to_dict()
    np.testing.assert_array_equal(restored.predict(X_fit), forest.predict(X_fit))
    rebuilt = restored.to_sklearn()
    assert type(rebuilt) is type(est)
    np.testing.assert_array_equal(rebuilt.predict(X_fit), est.predict(X_fit))
    if hasattr(est, "apply"):
        np.testing.assert_array_equal(rebuilt.apply(X_fit), est.apply(X_fit))


def test_custom_ensemble_becomes_gradient_boosting():
    forest = TreeEnsemble.from_dict(small_tree_dict())
    rebuilt = forest.to_sklearn()
    X = np.array([[0.0, 0.0], [1.0, 1.0], [1.0, 3.0], [np.nan, 9.0]])
    np.testing.assert_array_equal(forest.predict(X), [0.75, 1.25, 1.75, 0.75])
    np.testing.assert_array_equal(rebuilt.predict(X[:3]), forest.predict(X[:3]))


def test_json_floats_round_trip_exactly():
    values = [
        0.1,
        1 / 3,
        5e-324,
        np.finfo(np.float64).max,
        -2.2250738585072014e-308,
        float(np.float32(0.1)),
        123456789.12345679,
    ]
    assert json.loads(json.dumps(values)) == values
    document = small_tree_dict()
    document["trees"][0]["value"] = [0.0, values[1], 0.0, values[2], values[3] / 4]
    document["trees"][0]["threshold"] = [values[5], -2.0, values[6], -2.0, -2.0]
    restored = TreeEnsemble.from_dict(json.loads(json.dumps(document)))
    assert restored.trees[0].value.tolist() == document["trees"][0]["value"]
    assert restored.trees[0].threshold.tolist() == document["trees"][0]["threshold"]


def test_feature_names_come_from_dataframes(housing):
    X, y, names = housing
    frame = pd.DataFrame(X, columns=names)
    forest = TreeEnsemble.from_sklearn(DecisionTreeRegressor(max_depth=2).fit(frame, y))
    assert forest.feature_names == names
    assert forest.leaf_conditions([0])[0][0].feature in names


def test_abalone_with_encoded_sex_column():
    frame = pd.get_dummies(pd.read_csv(DATA / "abalone.csv.gz"), columns=["Sex"], dtype=float)
    y = frame.pop("rings").to_numpy(float)
    gb = GradientBoostingRegressor(n_estimators=25, max_depth=3, random_state=0).fit(frame, y)
    forest = TreeEnsemble.from_sklearn(gb)
    assert forest.feature_names == list(frame.columns)
    expected = gb.predict(frame)
    np.testing.assert_allclose(forest.predict(frame.to_numpy()), expected, rtol=1e-12)


# -- forests as users hold them --------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda: RandomForestRegressor(n_estimators=10, max_depth=5, random_state=0),
        lambda: GradientBoostingRegressor(n_estimators=20, max_depth=3, random_state=0),
    ],
    ids=["rf", "gb"],
)
def test_public_functions_accept_fitted_sklearn_forests(housing, make):
    X, y, _ = housing
    est = make().fit(X[:1500], y[:1500])
    forest = TreeEnsemble.from_sklearn(est)
    rows = X[1500:]
    assert as_tree_ensemble(forest) is forest
    assert as_tree_ensemble(est).to_dict() == forest.to_dict()
    from_sklearn, from_forest = leaf_matrix(est, rows), leaf_matrix(forest, rows)
    for name in ("leaves", "values", "offsets"):
        np.testing.assert_array_equal(getattr(from_sklearn, name), getattr(from_forest, name))
    from_sklearn, from_forest = mapping_matrix(est, rows), mapping_matrix(forest, rows)
    for name in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(from_sklearn, name), getattr(from_forest, name))
    weights = np.zeros(forest.n_leaves)
    weights[::7] = np.linspace(-1.0, 1.0, len(weights[::7]))
    assert (
        RuleEnsemble.from_weights(est, weights, 0.5).to_dict()
        == RuleEnsemble.from_weights(forest, weights, 0.5).to_dict()
    )


def test_other_forests_are_refused_by_type(housing):
    X, y, _ = housing
    labels = (y > np.median(y)).astype(int)
    with pytest.raises(TypeError, match="expected a TreeEnsemble or a fitted RandomForestRegressor"):
        leaf_matrix(LinearRegression().fit(X, y), X)
    with pytest.raises(TypeError, match="unsupported dict"):
        mapping_matrix(small_tree_dict(), X)
    with pytest.raises(TypeError, match="unsupported classifier"):
        leaf_matrix(LogisticRegression().fit(X, labels), X)
    with pytest.raises(NotFittedError):
        as_tree_ensemble(GradientBoostingRegressor())


# -- rejected estimators ---------------------------------------------------------------------


def test_rejects_one_class_multioutput_and_non_constant_init(housing):
    X, y, _ = housing
    classes = np.digitize(y, np.quantile(y, [0.3, 0.6]))
    # K >= 3 classes make K outputs (tests/solver/test_forest_multiclass.py)
    assert TreeEnsemble.from_sklearn(RandomForestClassifier(n_estimators=2).fit(X, classes)).n_outputs == 3
    assert TreeEnsemble.from_sklearn(GradientBoostingClassifier(n_estimators=2).fit(X, classes)).n_outputs == 3
    with pytest.raises(ValueError, match="1 class"):
        TreeEnsemble.from_sklearn(RandomForestClassifier(n_estimators=2).fit(X, np.zeros(len(X))))
    with pytest.raises(ValueError, match="2 outputs"):
        TreeEnsemble.from_sklearn(RandomForestRegressor(n_estimators=2).fit(X, np.column_stack([y, y])))
    with pytest.raises(ValueError, match="constant"):
        TreeEnsemble.from_sklearn(GradientBoostingRegressor(n_estimators=2, init=LinearRegression()).fit(X, y))
    with pytest.raises(ValueError, match="unsupported"):
        TreeEnsemble.from_sklearn(LinearRegression().fit(X, y))
    with pytest.raises(ValueError, match="not fitted"):
        TreeEnsemble.from_sklearn(RandomForestRegressor())
    constant = GradientBoostingRegressor(n_estimators=2, init=DummyRegressor(strategy="median"))
    assert TreeEnsemble.from_sklearn(constant.fit(X, y)).base_score == np.median(y)


# -- from_dict validation --------------------------------------------------------------------


def mutate(path: str, value):
    """A copy of small_tree_dict() with the entry at a/b/3-style path set (or deleted)."""
    document = copy.deepcopy(small_tree_dict())
    *parents, last = path.split("/")
    target = document
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    key = int(last) if isinstance(target, list) else last
    if value is DELETE:
        del target[key]
    else:
        target[key] = value
    return document


DELETE = object()
# splits 0..69 form a chain (node i's right child is i + 1), each with a leaf on the left
LONG_CHAIN = {
    "children_left": [70 + i for i in range(70)] + [-1] * 71,
    "children_right": list(range(1, 70)) + [140] + [-1] * 71,
    "feature": [0] * 70 + [-2] * 71,
    "threshold": [0.0] * 141,
    "value": [0.0] * 141,
}


@pytest.mark.parametrize(
    ("path", "value", "field", "message"),
    [
        ("format", "xgboost", "format", "fire-forest"),
        ("version", 2, "version", "only version 1"),
        ("version", True, "version", "only version 1"),
        ("n_features", DELETE, "n_features", "required"),
        ("tree_weight", DELETE, "tree_weight", "required"),
        ("n_features", 0, "n_features", r"in \[1, "),
        ("n_features", 2.0, "n_features", "integer"),
        ("n_features", True, "n_features", "integer"),
        ("base_score", float("nan"), "base_score", "finite"),
        ("tree_weight", "1", "tree_weight", "number"),
        ("colour", "red", "colour", "not a known key"),
        ("feature_names", ["a"], "feature_names", "one name per column"),
        ("feature_names", ["a", "a"], "feature_names/1", "unique"),
        ("feature_names", ["a", 3], "feature_names/1", "string"),
        ("trees", [], "trees", "at least one tree"),
        ("trees", {}, "trees", "list"),
        ("trees/0", [1, 2], "trees/0", "object"),
        ("trees/0/missing_go_to_left", [True] * 5, "trees/0/missing_go_to_left", "not a known key"),
        ("trees/0/value", DELETE, "trees/0/value", "required"),
        ("trees/0/children_left", 7, "trees/0/children_left", "list"),
        ("trees/0/children_left", [], "trees/0/children_left", "at least one node"),
        ("trees/0/children_right", [2, -1, 4, -1], "trees/0/children_right", "has 4 entries"),
        ("trees/0/threshold", [0.5, -2.0, 2.0], "trees/0/threshold", "has 3 entries"),
        ("trees/0/children_left/2", 3.0, "trees/0/children_left/2", "integers"),
        ("trees/0/children_left/2", "3", "trees/0/children_left/2", "integers"),
        ("trees/0/children_left/2", None, "trees/0/children_left/2", "integers"),
        ("trees/0/children_left/2", [3], "trees/0/children_left/2", "integers"),
        ("trees/0/children_left/2", 2**70, "trees/0/children_left/2", "integers"),
        ("trees/0/children_left/2", 9, "trees/0/children_left/2", "node id in"),
        ("trees/0/children_left/2", -5, "trees/0/children_left/2", "node id in"),
        ("trees/0/children_left/2", -1, "trees/0/children_left/2", "a leaf has both children -1"),
        ("trees/0/children_left/2", 0, "trees/0/children_left/2", "root"),
        ("trees/0/children_left/2", 1, "trees/0/children_left/2", "exactly one parent"),
        ("trees/0/children_right/2", 3, "trees/0/children_right/2", "exactly one parent"),
        ("trees/0/feature/2", 2, "trees/0/feature/2", "column index"),
        ("trees/0/feature/0", -2, "trees/0/feature/0", "column index"),
        ("trees/0/threshold/2", float("inf"), "trees/0/threshold/2", "finite"),
        ("trees/0/value/4", float("nan"), "trees/0/value/4", "finite"),
        ("trees/0/value/4", "1", "trees/0/value/4", "numbers"),
        ("trees/0/missing_go_left/1", 1, "trees/0/missing_go_left/1", "booleans"),
        ("trees/0/n_samples/3", -1, "trees/0/n_samples/3", ">= 0"),
        ("trees/0/n_samples/3", 1.5, "trees/0/n_samples/3", "integers"),
        ("trees/0", LONG_CHAIN, "trees/0", "depth 70"),
    ],
)
def test_from_dict_reports_the_offending_field(path, value, field, message):
    with pytest.raises(ForestSchemaError, match=message) as error:
        TreeEnsemble.from_dict(mutate(path, value))
    assert error.value.field == field
    assert isinstance(error.value, ValueError)


def test_from_dict_rejects_orphan_nodes():
    document = copy.deepcopy(small_tree_dict())
    document["trees"][0].update(children_left=[1, -1, -1, -1, -1], children_right=[2, -1, -1, -1, -1])
    with pytest.raises(ForestSchemaError, match="node 3 is nobody's child") as error:
        TreeEnsemble.from_dict(document)
    assert error.value.field == "trees/0/children_left"


def test_from_dict_detects_unreachable_cycle_with_single_parents():
    """Nodes 3 and 4 are each other's only parent: no node has two parents, yet 3..6 hang off
    a cycle that the root never reaches."""
    document = copy.deepcopy(small_tree_dict())
    tree = document["trees"][0]
    # root 0 -> (1, 2); 3 -> (4, 5); 4 -> (3, 6): 3 and 4 are each other's only parent
    tree.update(
        children_left=[1, -1, -1, 4, 3, -1, -1],
        children_right=[2, -1, -1, 5, 6, -1, -1],
        feature=[0, -2, -2, 0, 1, -2, -2],
        threshold=[0.0] * 7,
        value=[0.0] * 7,
        missing_go_left=[False] * 7,
        n_samples=[1] * 7,
    )
    with pytest.raises(ForestSchemaError, match="cycle") as error:
        TreeEnsemble.from_dict(document)
    assert error.value.field == "trees/0/children_left"


def test_from_dict_enforces_size_limits():
    document = small_tree_dict()
    with pytest.raises(ForestSchemaError, match="limit") as error:
        TreeEnsemble.from_dict(document, max_nodes=4)
    assert error.value.field == "trees"
    with pytest.raises(ForestSchemaError, match="depth 2") as error:
        TreeEnsemble.from_dict(document, max_depth=1)
    with pytest.raises(ForestSchemaError) as error:
        TreeEnsemble.from_dict(mutate("n_features", 10**7))
    assert error.value.field == "n_features"
    with pytest.raises(ForestSchemaError) as error:
        TreeEnsemble.from_dict(["not", "an", "object"])
    assert TreeEnsemble.from_dict(mutate("trees/0/missing_go_left", DELETE)).n_leaves == 3


def test_from_dict_accepts_a_single_leaf_tree_and_defaults():
    document = mutate(
        "trees", [{"children_left": [-1], "children_right": [-1], "feature": [-2], "threshold": [0.0], "value": [4.0]}]
    )
    del document["feature_names"]
    forest = TreeEnsemble.from_dict(document)
    assert forest.feature_names == ["x0", "x1"] and forest.kind == "custom"
    assert forest.leaf_conditions() == [()]
    np.testing.assert_array_equal(forest.predict(np.zeros((2, 2))), [2.25, 2.25])
    assert forest.leaf_ancestors[1].size == 0
