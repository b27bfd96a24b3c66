"""TreeEnsembles with K outputs (vector trees and per-output trees) and count-objective forests: scikit-learn,
XGBoost and LightGBM multiclass classifiers and log-link regressions against the libraries' own predictions, the
fire-forest schema for K outputs, and one-output ensembles kept as they were."""

import copy
import json

import numpy as np
import pytest
from scipy.special import expit, softmax
from sklearn.dummy import DummyClassifier
from sklearn.ensemble import (
    ExtraTreesClassifier,
    GradientBoostingClassifier,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor, ExtraTreeClassifier

from solver import Tree, TreeEnsemble, leaf_matrix, mapping_matrix
from solver.forest_schema import ForestSchemaError
from solver.formats import ForestFormatError, load_forest

try:
    import xgboost as XGBOOST
except ImportError:  # an optional dependency: its tests are skipped
    XGBOOST = None
try:
    import lightgbm as LIGHTGBM
except ImportError:
    LIGHTGBM = None


@pytest.fixture(scope="module")
def data():
    """600 rows, 5 features (10% NaN in a copy), a 3-class, a 5-class and a count target."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 5)).astype(np.float32)  # float32: exact for every library
    signal = X[:, 0] + 0.7 * X[:, 1] - 0.5 * X[:, 2] * X[:, 3] + 0.3 * rng.normal(size=600)
    y3 = np.digitize(signal, np.quantile(signal, [0.3, 0.65]))
    y5 = np.digitize(signal, np.quantile(signal, [0.15, 0.4, 0.6, 0.85]))
    counts = rng.poisson(np.exp(0.6 * X[:, 0] - 0.3 * X[:, 1])).astype(np.float64)
    X_nan = X.copy()
    X_nan[rng.random(X.shape) < 0.1] = np.nan
    return X, X_nan, y3, y5, counts


def indicator_matrix(forest: TreeEnsemble, X) -> np.ndarray:
    """The dense (n, R) leaf-indicator matrix, from solver.leaf_matrix's local leaf indices."""
    leaves = leaf_matrix(forest, X).leaves.astype(np.int64)
    indicator = np.zeros((len(X), forest.n_leaves))
    rows = np.arange(len(X))
    for t in range(forest.n_trees):
        indicator[rows, forest.leaf_offsets[t] + leaves[:, t]] = 1.0
    return indicator


def from_leaf_outputs(forest: TreeEnsemble, X) -> np.ndarray:
    return forest.base_score + forest.tree_weight * (indicator_matrix(forest, X) @ forest.leaf_outputs)


def round_trip(forest: TreeEnsemble) -> TreeEnsemble:
    document = forest.to_dict()
    restored = TreeEnsemble.from_dict(json.loads(json.dumps(document)))
    assert restored.to_dict() == document
    return restored


# -- scikit-learn vector trees ---------------------------------------------------------------


@pytest.mark.parametrize("n_classes", [3, 5])
@pytest.mark.parametrize(
    "make",
    [
        lambda: RandomForestClassifier(n_estimators=25, max_depth=5, random_state=0),
        lambda: ExtraTreesClassifier(n_estimators=15, max_depth=6, random_state=0),
        lambda: DecisionTreeClassifier(max_leaf_nodes=30, random_state=0),
        lambda: ExtraTreeClassifier(max_depth=6, random_state=0),
    ],
    ids=["rf", "et", "dt", "extra_tree"],
)
def test_forest_classifiers_predict_proba_from_vector_leaves(data, make, n_classes):
    _X, X, y3, y5, _ = data
    labels = np.array(["a", "b", "c", "d", "e"])[y3 if n_classes == 3 else y5]
    est = make().fit(X, labels)
    forest = TreeEnsemble.from_sklearn(est)
    proba = est.predict_proba(X)
    assert forest.n_outputs == n_classes and proba.shape == (len(X), n_classes)
    assert (forest.tree_outputs == -1).all() and all(tree.is_vector for tree in forest.trees)
    # the columns of M are leaf indicators; leaf_outputs are the centered class shares
    assert (forest.leaf_values == 1.0).all()
    np.testing.assert_array_equal(leaf_matrix(forest, X).values, np.ones(forest.n_leaves))
    np.testing.assert_allclose(from_leaf_outputs(forest, X), proba, rtol=0, atol=1e-12)
    np.testing.assert_allclose(forest.predict(X), proba, rtol=0, atol=1e-12)
    members = getattr(est, "estimators_", [est])
    roots = np.array([member.tree_.value[0, 0] for member in members])
    np.testing.assert_allclose(forest.base_score, roots.mean(axis=0), rtol=0, atol=1e-15)
    shares = forest.leaf_outputs + np.repeat(roots, np.diff(forest.leaf_offsets), axis=0)
    assert np.all((shares > -1e-12) & (shares < 1 + 1e-12))
    np.testing.assert_allclose(forest.leaf_outputs.sum(axis=1), 0.0, atol=1e-12)  # shares sum to 1 at leaf and root
    restored = round_trip(forest)
    np.testing.assert_array_equal(restored.predict(X), forest.predict(X))
    with pytest.raises(ValueError, match=f"one-output ensembles only; this one has {n_classes} outputs"):
        forest.to_sklearn()


def test_leaf_support_and_conditions_of_vector_trees(data):
    X, _, y3, _, _ = data
    est = RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(X, y3)
    forest = TreeEnsemble.from_sklearn(est)
    assert (forest.leaf_support > 0).all()
    assert len(forest.leaf_conditions()) == forest.n_leaves
    assert mapping_matrix(forest, X).shape == (len(X), forest.n_leaves)
    assert mapping_matrix(forest, X).sum() == len(X) * forest.n_trees  # indicators: one 1 per row and tree


# -- scikit-learn per-output trees -----------------------------------------------------------


@pytest.mark.parametrize("n_classes", [3, 5])
@pytest.mark.parametrize("init", [None, "zero", "uniform"])
def test_gradient_boosting_classifier_predicts_decision_function(data, n_classes, init):
    X, _, y3, y5, _ = data
    y = y3 if n_classes == 3 else y5
    init_estimator = DummyClassifier(strategy="uniform") if init == "uniform" else init
    gb = GradientBoostingClassifier(
        n_estimators=15, max_depth=2, learning_rate=0.3, init=init_estimator, subsample=0.8, random_state=0
    ).fit(X, y)
    forest = TreeEnsemble.from_sklearn(gb)
    assert forest.n_outputs == n_classes and forest.n_trees == 15 * n_classes
    np.testing.assert_array_equal(forest.tree_outputs, np.tile(np.arange(n_classes), 15))
    assert not any(tree.is_vector for tree in forest.trees)
    expected = gb.decision_function(X)
    np.testing.assert_allclose(forest.predict(X), expected, rtol=0, atol=1e-10)
    np.testing.assert_allclose(from_leaf_outputs(forest, X), expected, rtol=0, atol=1e-10)
    # M's columns are the leaf values, each leaf adds to its tree's output only
    tree_of_leaf = np.repeat(np.arange(forest.n_trees), np.diff(forest.leaf_offsets))
    one_hot = np.eye(n_classes)[forest.tree_outputs[tree_of_leaf]]
    np.testing.assert_array_equal(forest.leaf_outputs, forest.leaf_values[:, None] * one_hot)
    first = gb.estimators_[0, 1].tree_
    assert forest.trees[1].value[0] == 0.3 * first.value[0, 0, 0]
    if init == "zero":
        np.testing.assert_array_equal(forest.base_score, np.zeros(n_classes))
    restored = round_trip(forest)
    np.testing.assert_array_equal(restored.predict(X), forest.predict(X))


def test_gradient_boosting_refuses_a_random_init(data):
    X, _, y3, _, _ = data
    gb = GradientBoostingClassifier(n_estimators=2, init=DummyClassifier(strategy="stratified")).fit(X, y3)
    with pytest.raises(ValueError, match="stratified"):
        TreeEnsemble.from_sklearn(gb)


def test_binary_classifiers_keep_one_output(data):
    X, _, y3, _, _ = data
    labels = y3 == 2
    rf = RandomForestClassifier(n_estimators=5, max_depth=3, random_state=0).fit(X, labels)
    forest = TreeEnsemble.from_sklearn(rf)
    assert forest.n_outputs == 1 and isinstance(forest.base_score, float)
    assert (forest.tree_outputs == 0).all() and forest.predict(X).shape == (len(X),)
    np.testing.assert_array_equal(forest.leaf_outputs, forest.leaf_values[:, None])
    document = forest.to_dict()
    assert "n_outputs" not in document and not any("output" in tree for tree in document["trees"])
    assert list(document) == [
        "format",
        "version",
        "kind",
        "n_features",
        "feature_names",
        "base_score",
        "tree_weight",
        "trees",
    ]
    gb = GradientBoostingClassifier(n_estimators=5, max_depth=2, random_state=0).fit(X, labels)
    gb_forest = TreeEnsemble.from_sklearn(gb)
    assert gb_forest.n_outputs == 1
    np.testing.assert_allclose(gb_forest.predict(X), gb.decision_function(X), rtol=0, atol=1e-12)


def test_one_class_is_refused(data):
    X, _, _, _, _ = data
    with pytest.raises(ValueError, match="1 class"):
        TreeEnsemble.from_sklearn(DecisionTreeClassifier().fit(X, np.zeros(len(X))))


@pytest.mark.parametrize(
    "make",
    [
        lambda: RandomForestRegressor(n_estimators=10, max_depth=5, criterion="poisson", random_state=0),
        lambda: DecisionTreeRegressor(max_leaf_nodes=20, criterion="poisson", random_state=0),
    ],
    ids=["rf", "dt"],
)
def test_poisson_criterion_regressors_predict_counts(data, make):
    _X, X, _, _, counts = data
    est = make().fit(X, counts)
    forest = TreeEnsemble.from_sklearn(est)
    assert forest.n_outputs == 1
    np.testing.assert_allclose(forest.predict(X), est.predict(X), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(forest.to_sklearn().predict(X), est.predict(X))


# -- the schema ------------------------------------------------------------------------------


def mixed_document() -> dict:
    """Three outputs: a vector tree (x0 <= 0.5) and a per-output tree for output 2 (x1 <= 2)."""
    return {
        "format": "fire-forest",
        "version": 1,
        "kind": "custom",
        "n_outputs": 3,
        "n_features": 2,
        "feature_names": ["a", "b"],
        "base_score": [0.5, -1.0, 0.25],
        "tree_weight": 0.5,
        "trees": [
            {
                "children_left": [1, -1, -1],
                "children_right": [2, -1, -1],
                "feature": [0, -2, -2],
                "threshold": [0.5, -2.0, -2.0],
                "value": [[0.0, 0.0, 0.0], [1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]],
                "missing_go_left": [True, False, False],
            },
            {
                "output": 2,
                "children_left": [1, -1, -1],
                "children_right": [2, -1, -1],
                "feature": [1, -2, -2],
                "threshold": [2.0, -2.0, -2.0],
                "value": [0.0, 4.0, 8.0],
                "missing_go_left": [False, False, False],
            },
        ],
    }


def test_mixed_vector_and_per_output_trees():
    forest = TreeEnsemble.from_dict(mixed_document())
    assert forest.n_outputs == 3 and forest.tree_outputs.tolist() == [-1, 2]
    assert forest.leaf_values.tolist() == [1.0, 1.0, 4.0, 8.0]
    np.testing.assert_array_equal(
        forest.leaf_outputs, [[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0], [0.0, 0.0, 4.0], [0.0, 0.0, 8.0]]
    )
    np.testing.assert_array_equal(forest.base_score, [0.5, -1.0, 0.25])
    X = np.array([[0.0, 0.0], [1.0, 3.0], [np.nan, np.nan]])
    expected = np.array(
        [
            [0.5 + 0.5, -1.0 + 1.0, 0.25 + 0.5 * (3.0 + 4.0)],
            [0.5 - 0.5, -1.0 + 0.25, 0.25 + 0.5 * 8.0],
            [0.5 + 0.5, -1.0 + 1.0, 0.25 + 0.5 * (3.0 + 8.0)],  # NaN: left in tree 0, right in tree 1
        ]
    )
    np.testing.assert_array_equal(forest.predict(X), expected)
    np.testing.assert_array_equal(from_leaf_outputs(forest, X), expected)
    assert forest.to_dict() == mixed_document()
    assert round_trip(forest).to_dict() == mixed_document()
    in_memory = TreeEnsemble(
        [
            Tree(
                **{key: np.asarray(value) for key, value in tree.items() if key != "output"}, output=tree.get("output")
            )
            for tree in mixed_document()["trees"]
        ],
        n_features=2,
        feature_names=["a", "b"],
        base_score=np.array([0.5, -1.0, 0.25]),
        tree_weight=0.5,
        n_outputs=3,
    )
    assert in_memory.to_dict() == mixed_document()
    assert forest.with_feature_names(["c", "d"]).predict(X).shape == (3, 3)


def test_one_output_document_accepts_output_zero_and_n_outputs_one():
    document = mixed_document()
    document.update(n_outputs=1, base_score=0.0)
    document["trees"] = document["trees"][1:]
    document["trees"][0]["output"] = 0
    forest = TreeEnsemble.from_dict(document)
    assert forest.n_outputs == 1 and forest.trees[0].output is None and forest.base_score == 0.0
    written = forest.to_dict()
    assert "n_outputs" not in written and "output" not in written["trees"][0]
    assert forest.predict(np.array([[0.0, 3.0]])).tolist() == [4.0]


def mutate(path: str, value, document=None):
    document = copy.deepcopy(mixed_document() if document is None else document)
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


@pytest.mark.parametrize(
    ("path", "value", "field", "message"),
    [
        ("n_outputs", 0, "n_outputs", r"in \[1, 10000\]"),
        ("n_outputs", 10_001, "n_outputs", r"in \[1, 10000\]"),
        ("n_outputs", 3.0, "n_outputs", "integer"),
        ("n_outputs", "3", "n_outputs", "integer"),
        ("base_score", [0.5, -1.0], "base_score", "has 2 numbers but n_outputs is 3"),
        ("base_score", [0.5, -1.0, 0.0, 1.0], "base_score", "has 4 numbers but n_outputs is 3"),
        ("base_score", 0.5, "base_score", "list of 3 numbers"),
        ("base_score", np.zeros((3, 1)), "base_score", "list of 3 numbers"),
        ("base_score", [[0.5], [1.0], [2.0]], "base_score/0", "number"),
        ("base_score/1", float("inf"), "base_score/1", "finite"),
        ("base_score/2", "1", "base_score/2", "number"),
        ("base_score/2", True, "base_score/2", "number"),
        ("trees/1/output", 3, "trees/1/output", r"is 3 but must be in \[0, 2\]"),
        ("trees/1/output", -1, "trees/1/output", r"in \[0, 2\]"),
        ("trees/1/output", 1.0, "trees/1/output", "integer"),
        ("trees/1/output", True, "trees/1/output", "integer"),
        ("trees/1/output", DELETE, "trees/1/value/0", "n_outputs is 3: give each node a list of 3 numbers"),
        ("trees/0/output", 1, "trees/0/value", "flat list"),
        ("trees/0/value/2", [1.0, 2.0], "trees/0/value/2", "has 2 numbers but n_outputs is 3"),
        ("trees/0/value/1", [1.0, 2.0, 3.0, 4.0], "trees/0/value/1", "has 4 numbers"),
        ("trees/0/value/1", 1.0, "trees/0/value/1", "list of 3 numbers"),
        ("trees/0/value/1/2", float("nan"), "trees/0/value/1/2", "finite"),
        ("trees/0/value/1/2", "x", "trees/0/value/1/2", "numbers"),
        ("trees/0/value/1/2", None, "trees/0/value/1/2", "numbers"),
        ("trees/0/value/1/2", 2**70, "trees/0/value/1/2", "numbers"),
        ("trees/0/value/1/2", [1.0], "trees/0/value/1/2", "numbers"),
        ("trees/0/value", [[0.0, 0.0, 0.0]] * 2, "trees/0/value", "has 2 entries"),
        ("trees/0/value", {}, "trees/0/value", "must be a list"),
        ("trees/0/value", [], "trees/0/value", "non-empty list"),
    ],
)
def test_schema_errors_name_the_field(path, value, field, message):
    with pytest.raises(ForestSchemaError, match=message) as error:
        TreeEnsemble.from_dict(mutate(path, value))
    assert error.value.field == field


def test_one_output_schema_refuses_outputs_and_vectors():
    document = mixed_document()
    document.update(n_outputs=1, base_score=0.0)
    del document["n_outputs"]
    with pytest.raises(ForestSchemaError, match="flat list") as error:
        TreeEnsemble.from_dict(document)
    assert error.value.field == "trees/0/value"
    with pytest.raises(ForestSchemaError, match=r"in \[0, 0\]") as error:
        TreeEnsemble.from_dict(mutate("trees", document["trees"][1:], document))
    assert error.value.field == "trees/0/output"
    with pytest.raises(ForestSchemaError, match="must be a number") as error:
        TreeEnsemble.from_dict(mutate("base_score", [0.0], document))
    assert error.value.field == "base_score"


def test_output_limit_and_lazy_leaf_outputs():
    document = mixed_document()
    with pytest.raises(ForestSchemaError, match=r"in \[1, 2\]") as error:
        TreeEnsemble.from_dict(document, max_outputs=2)
    assert error.value.field == "n_outputs"
    many = mutate("n_outputs", 5000, mutate("base_score", [0.0] * 5000, mutate("trees", document["trees"][1:])))
    forest = TreeEnsemble.from_dict(many)
    assert "leaf_outputs" not in vars(forest)  # built on first use only
    assert forest.predict(np.zeros((2, 2))).shape == (2, 5000)
    assert forest.leaf_outputs.shape == (2, 5000) and not forest.leaf_outputs.flags.writeable


def mutations(document: dict, rng, n: int):
    """``n`` copies of ``document`` with one entry anywhere replaced by a value of another type or range."""
    values = [None, True, -1, 0, 2, 3, 2**70, 1.5, float("nan"), "x", [], [1], [[1, 2, 3]], {}, [1.0, 2.0, 3.0]]

    def paths(o, p=()):
        yield p
        items = o.items() if isinstance(o, dict) else enumerate(o) if isinstance(o, list) else ()
        for k, v in items:
            yield from paths(v, (*p, k))

    all_paths = list(paths(document))[1:]
    for _ in range(n):
        d = copy.deepcopy(document)
        p = all_paths[rng.integers(len(all_paths))]
        o = d
        for k in p[:-1]:
            o = o[k]
        o[p[-1]] = copy.deepcopy(values[rng.integers(len(values))])
        yield d


def test_mutated_documents_fail_with_format_errors_only(data):
    """A schema error (from_dict) or a format error (load_forest), or a forest: never another exception."""
    X, _, y3, _, _ = data
    rng = np.random.default_rng(3)
    for d in mutations(mixed_document(), rng, 300):
        try:
            forest = TreeEnsemble.from_dict(d)
        except ForestSchemaError:
            continue
        assert forest.predict(np.zeros((1, 2))).shape in ((1,), (1, forest.n_outputs))
    uploads = [mixed_document()]
    if XGBOOST is not None:
        booster = xgb_train(X, y3, rounds=2, objective="multi:softprob", num_class=3, max_depth=2)
        uploads.append(json.loads(bytes(booster.save_raw("json"))))
    if LIGHTGBM is not None:
        uploads.append(lgb_train(X, y3, rounds=2, objective="multiclass", num_class=3, num_leaves=3).dump_model())
    for upload in uploads:
        for d in mutations(upload, rng, 150):
            try:
                load_forest(json.dumps(d).encode())
            except ForestFormatError as e:
                assert e.reason in ("invalid", "unsupported") and e.detail  # noqa: PT017


# -- XGBoost ---------------------------------------------------------------------------------


def xgb_train(X, y, rounds=8, **params):
    xgb = pytest.importorskip("xgboost")
    params = {"max_depth": 3, "eta": 0.3, "nthread": 1, **params}
    return xgb.train(params, xgb.DMatrix(X, label=y), rounds)


def xgb_margin(booster, X):
    xgb = pytest.importorskip("xgboost")
    return booster.predict(xgb.DMatrix(X), output_margin=True)


XGB_MULTICLASS = {
    "softprob3": {"objective": "multi:softprob", "num_class": 3},
    "softmax5": {"objective": "multi:softmax", "num_class": 5},
    "dart": {"objective": "multi:softprob", "num_class": 3, "booster": "dart", "rate_drop": 0.3, "skip_drop": 0.0},
    "parallel": {"objective": "multi:softprob", "num_class": 3, "num_parallel_tree": 3, "subsample": 0.7},
    "base_score": {"objective": "multi:softprob", "num_class": 3, "base_score": 0.5},
}


@pytest.mark.parametrize("case", list(XGB_MULTICLASS))
def test_xgboost_multiclass_margins(data, case):
    _X, X, y3, y5, _ = data
    params = XGB_MULTICLASS[case]
    K = params["num_class"]
    booster = xgb_train(X, y3 if K == 3 else y5, **params)
    margin = xgb_margin(booster, X)
    assert margin.shape == (len(X), K)
    document = json.loads(bytes(booster.save_raw("json")))
    tree_info = document["learner"]["gradient_booster"].get("gbtree", document["learner"]["gradient_booster"])
    tree_info = tree_info["model"]["tree_info"]
    for raw_format in ("json", "ubj"):
        forest = load_forest(bytes(booster.save_raw(raw_format)))
        assert forest.n_outputs == K and forest.tree_outputs.tolist() == tree_info
        np.testing.assert_allclose(forest.predict(X), margin, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(from_leaf_outputs(forest, X), margin, rtol=1e-5, atol=1e-5)
    pred_leaf = booster.predict(pytest.importorskip("xgboost").DMatrix(X), pred_leaf=True).astype(np.int64)
    leaves = forest.apply(X).astype(np.int64)
    ours = np.stack([forest.leaf_nodes[t][leaves[:, t]] for t in range(forest.n_trees)], axis=1)
    np.testing.assert_array_equal(ours, pred_leaf.reshape(len(X), -1))
    if case == "base_score":
        np.testing.assert_array_equal(forest.base_score, [0.5] * 3)
    assert round_trip(forest).predict(X).tolist() == forest.predict(X).tolist()


@pytest.mark.parametrize("objective", ["count:poisson", "reg:gamma", "reg:tweedie"])
def test_xgboost_log_link_margins(data, objective):
    _X, X, _, _, counts = data
    target = counts + 0.5 if objective == "reg:gamma" else counts
    booster = xgb_train(X, target, objective=objective)
    base_score = json.loads(bytes(booster.save_raw("json")))["learner"]["learner_model_param"]["base_score"]
    forest = load_forest(bytes(booster.save_raw("json")))
    assert forest.n_outputs == 1
    assert forest.base_score == pytest.approx(np.log(float(base_score.strip("[]"))), rel=1e-6)
    margin = xgb_margin(booster, X)
    np.testing.assert_allclose(forest.predict(X), margin, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        np.exp(forest.predict(X)), booster.predict(pytest.importorskip("xgboost").DMatrix(X)), rtol=1e-5
    )


def test_xgboost_multi_target_regression(data):
    _X, X, _, _, counts = data
    booster = xgb_train(X, np.column_stack([counts, np.nan_to_num(X[:, 1])]), objective="reg:squarederror")
    forest = load_forest(bytes(booster.save_raw("ubj")))
    assert forest.n_outputs == 2
    np.testing.assert_allclose(forest.predict(X), xgb_margin(booster, X), rtol=1e-5, atol=1e-5)


def test_xgboost_multiclass_errors(data):
    X, _, y3, _, _ = data
    booster = xgb_train(X, y3, rounds=2, objective="multi:softprob", num_class=3)
    document = json.loads(bytes(booster.save_raw("json")))
    model = "/learner/gradient_booster/model"

    def fails(change, field, match):
        broken = copy.deepcopy(document)
        change(broken)
        with pytest.raises(ForestFormatError, match=match) as error:
            load_forest(json.dumps(broken).encode())
        assert error.value.field == field and error.value.reason == "invalid"

    param = "/learner/learner_model_param"
    fails(
        lambda d: d["learner"]["gradient_booster"]["model"]["tree_info"].__setitem__(4, 3),
        f"{model}/tree_info/4",
        r"\[0, 3\)",
    )
    fails(lambda d: d["learner"]["gradient_booster"]["model"].pop("tree_info"), f"{model}/tree_info", "missing")
    fails(
        lambda d: d["learner"]["learner_model_param"].update(base_score="[1E0,2E0]"),
        f"{param}/base_score",
        "one per output",
    )
    fails(lambda d: d["learner"]["learner_model_param"].update(num_class="0"), f"{param}/num_class", "num_class >= 1")
    fails(lambda d: d["learner"]["learner_model_param"].update(num_target="2"), f"{param}/num_target", "2 targets")
    fails(lambda d: d["learner"]["objective"].update(name="reg:squarederror"), f"{param}/num_class", "not multiclass")
    fails(
        lambda d: d["learner"]["learner_model_param"].update(num_class="20000", base_score="5E-1"),
        f"{param}/num_class",
        "more than the limit of 10000",
    )
    vector_leaf = xgb_train(
        X, y3, rounds=2, objective="multi:softprob", num_class=3, multi_strategy="multi_output_tree", tree_method="hist"
    )
    with pytest.raises(ForestFormatError, match="multi_output_tree") as error:
        load_forest(bytes(vector_leaf.save_raw("json")))
    assert error.value.field.endswith("tree_param/size_leaf_vector")
    poisson = json.loads(bytes(xgb_train(X, y3 + 1.0, rounds=2, objective="count:poisson").save_raw("json")))
    poisson["learner"]["learner_model_param"]["base_score"] = "[0E0]"
    with pytest.raises(ForestFormatError, match="positive mean"):
        load_forest(json.dumps(poisson).encode())


# -- LightGBM --------------------------------------------------------------------------------


def lgb_train(X, y, rounds=8, **params):
    lgb = pytest.importorskip("lightgbm")
    params = {"num_leaves": 7, "learning_rate": 0.3, "verbose": -1, "num_threads": 1, **params}
    return lgb.train(params, lgb.Dataset(X, y), rounds)


@pytest.mark.parametrize("n_classes", [3, 5])
def test_lightgbm_multiclass_raw_scores(data, n_classes):
    _X, X, y3, y5, _ = data
    booster = lgb_train(X, y3 if n_classes == 3 else y5, objective="multiclass", num_class=n_classes)
    forest = load_forest(json.dumps(booster.dump_model()).encode())
    assert forest.n_outputs == n_classes and forest.n_trees == 8 * n_classes
    np.testing.assert_array_equal(forest.tree_outputs, np.tile(np.arange(n_classes), 8))
    raw = booster.predict(X, raw_score=True)
    np.testing.assert_allclose(forest.predict(X), raw, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(from_leaf_outputs(forest, X), raw, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(softmax(forest.predict(X), axis=1), booster.predict(X), atol=1e-12)
    assert round_trip(forest).predict(X).tolist() == forest.predict(X).tolist()


def test_lightgbm_one_vs_all_and_random_forest(data):
    _X, X, y3, _, _ = data
    ova = lgb_train(X, y3, objective="multiclassova", num_class=3, sigmoid=1.7)
    forest = load_forest(json.dumps(ova.dump_model()).encode())
    np.testing.assert_allclose(forest.predict(X), 1.7 * ova.predict(X, raw_score=True), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(expit(forest.predict(X)), ova.predict(X), atol=1e-12)
    rf = lgb_train(X, y3, objective="multiclass", num_class=3, boosting="rf", bagging_fraction=0.6, bagging_freq=1)
    forest = load_forest(json.dumps(rf.dump_model()).encode())
    assert forest.tree_weight == pytest.approx(1 / 8)  # averaged over rounds, not over the 24 trees
    np.testing.assert_allclose(softmax(forest.predict(X), axis=1), rf.predict(X), atol=1e-12)


@pytest.mark.parametrize("objective", ["poisson", "gamma", "tweedie"])
def test_lightgbm_log_link_raw_scores(data, objective):
    _X, X, _, _, counts = data
    booster = lgb_train(X, counts + 0.5 if objective == "gamma" else counts, objective=objective)
    forest = load_forest(json.dumps(booster.dump_model()).encode())
    assert forest.n_outputs == 1
    np.testing.assert_allclose(forest.predict(X), booster.predict(X, raw_score=True), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np.exp(forest.predict(X)), booster.predict(X), rtol=1e-12)


def test_lightgbm_multiclass_errors(data):
    X, _, y3, _, _ = data
    dump = lgb_train(X, y3, rounds=2, objective="multiclass", num_class=3).dump_model()

    def fails(change, field, match):
        broken = copy.deepcopy(dump)
        change(broken)
        with pytest.raises(ForestFormatError, match=match) as error:
            load_forest(json.dumps(broken).encode())
        assert error.value.field == field and error.value.reason == "invalid"

    fails(lambda d: d.update(num_tree_per_iteration=2), "/num_tree_per_iteration", "one tree per class")
    fails(lambda d: d["tree_info"].pop(), "/tree_info", "not a positive multiple of num_tree_per_iteration")
    fails(lambda d: d.update(num_class=10**12, num_tree_per_iteration=10**12), "/tree_info", "positive multiple")
    fails(lambda d: d.update(objective="regression"), "/num_class", "not multiclass")
