"""solver.formats: safe loaders, checked against the real libraries on real data."""

from __future__ import annotations

import copy
import gzip
import io
import json
import os
import pickle
import zipfile

import numpy as np
import pandas as pd
import pytest

from solver import TableEncoding, TreeEnsemble
from solver.formats import (
    FORMATS,
    SKOPS_ALLOWED_TYPES,
    ForestFormatError,
    detect_format,
    load_forest,
    match_feature_names,
)
from tests.support.data import KIN8NM as DATA

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")
sio = pytest.importorskip("skops.io")

N_TRAIN = 2000
FEATURES = [f"theta{i}" for i in range(1, 9)]


@pytest.fixture(scope="module")
def data():
    df = pd.read_csv(DATA)
    X = df.iloc[:N_TRAIN, :-1].to_numpy(np.float32)  # float32: exact for every library
    y = df.iloc[:N_TRAIN, -1].to_numpy(np.float64)
    Xnan = X.copy()
    rng = np.random.default_rng(0)
    Xnan[rng.random(X.shape) < 0.05] = np.nan
    return X, Xnan, y


def _raises(data, reason, field=None, match=None, **kw) -> ForestFormatError:
    with pytest.raises(ForestFormatError) as info:
        load_forest(data, **kw)
    err = info.value
    assert err.reason == reason, (err.reason, str(err))
    if field is not None:
        if field.endswith("*"):
            assert err.field.startswith(field[:-1]), err.field
        else:
            assert err.field == field, err.field
    if match is not None:
        assert match.lower() in err.detail.lower(), err.detail
    assert isinstance(err, ValueError)
    return err


def _leaf_nodes_of(forest: TreeEnsemble, X) -> np.ndarray:
    """Node id of the leaf each row reaches, per tree, through TreeEnsemble.apply."""
    leaves = forest.apply(X).astype(np.int64)
    return np.stack([forest.leaf_nodes[t][leaves[:, t]] for t in range(forest.n_trees)], axis=1)


# ------------------------------------------------------------------------------------------
# XGBoost
# ------------------------------------------------------------------------------------------


def _xgb_train(X, y, rounds=30, feature_names=FEATURES, **params):
    params = {"max_depth": 4, "eta": 0.3, "nthread": 1, **params}
    d = xgb.DMatrix(X, label=y, feature_names=feature_names)
    return xgb.train(params, d, rounds)


def _xgb_json(booster) -> dict:
    return json.loads(bytes(booster.save_raw("json")))


XGB_CASES = {
    "gbtree": {},
    "absoluteerror": {"objective": "reg:absoluteerror"},
    "pseudohuber": {"objective": "reg:pseudohubererror"},
    "dart": {"booster": "dart", "rate_drop": 0.3, "skip_drop": 0.0, "seed": 1},
    "forest": {"num_parallel_tree": 4, "subsample": 0.6, "colsample_bynode": 0.6},
    "lossguide": {"grow_policy": "lossguide", "max_leaves": 12, "max_depth": 0},
}


@pytest.mark.parametrize("raw_format", ["json", "ubj"])
@pytest.mark.parametrize("case", list(XGB_CASES))
def test_xgboost_matches_booster(data, case, raw_format):
    X, Xnan, y = data
    booster = _xgb_train(Xnan, y, **XGB_CASES[case])
    raw = bytes(booster.save_raw(raw_format))
    assert detect_format(raw) == ("xgboost-json" if raw_format == "json" else "xgboost-ubjson")
    forest = load_forest(raw, filename=f"model.{raw_format}")
    assert forest.feature_names == FEATURES
    assert forest.n_features == X.shape[1]
    for Z in (Xnan, X):
        dz = xgb.DMatrix(Z, feature_names=FEATURES)
        margin = booster.predict(dz, output_margin=True)
        # XGBoost sums in float32, we sum in float64
        np.testing.assert_allclose(forest.predict(Z), margin, rtol=2e-6, atol=2e-6 * np.abs(margin).max())
        pred_leaf = booster.predict(dz, pred_leaf=True).astype(np.int64).reshape(len(Z), -1)
        np.testing.assert_array_equal(_leaf_nodes_of(forest, Z), pred_leaf)
    if case == "dart":
        drops = np.asarray(_xgb_json(booster)["learner"]["gradient_booster"]["weight_drop"])
        assert not np.allclose(drops, 1.0)  # the scaling is exercised


def test_xgboost_routing_exact_at_split_values(data):
    """Rows sitting exactly on, and one float32 ulp either side of, every split condition."""
    X, _, y = data
    booster = _xgb_train(X, y, rounds=20)
    doc = _xgb_json(booster)
    rows = []
    rng = np.random.default_rng(1)
    for tree in doc["learner"]["gradient_booster"]["model"]["trees"]:
        for node, left in enumerate(tree["left_children"]):
            if left == -1:
                continue
            f = tree["split_indices"][node]
            t = np.float32(tree["split_conditions"][node])
            for v in (t, np.nextafter(t, np.float32(np.inf)), np.nextafter(t, np.float32(-np.inf))):
                row = X[rng.integers(len(X))].copy()
                row[f] = v
                rows.append(row)
    Z = np.array(rows, dtype=np.float32)
    forest = load_forest(bytes(booster.save_raw("json")))
    dz = xgb.DMatrix(Z, feature_names=FEATURES)
    pred_leaf = booster.predict(dz, pred_leaf=True).astype(np.int64)
    np.testing.assert_array_equal(_leaf_nodes_of(forest, Z), pred_leaf)
    margin = booster.predict(dz, output_margin=True)
    np.testing.assert_allclose(forest.predict(Z), margin, rtol=2e-6, atol=1e-6)


def test_xgboost_base_score_formats(data):
    X, _, y = data
    booster = _xgb_train(X, y, rounds=5, feature_names=None)
    doc = _xgb_json(booster)
    forest = load_forest(json.dumps(doc).encode())
    assert forest.feature_names == [f"x{i}" for i in range(8)]
    base = float(doc["learner"]["learner_model_param"]["base_score"].strip("[]"))
    assert forest.base_score == pytest.approx(base, rel=1e-7)
    for written, value in (("5E-1", 0.5), ("[2.5E0]", 2.5), ("0.25", 0.25)):
        doc2 = copy.deepcopy(doc)
        doc2["learner"]["learner_model_param"]["base_score"] = written
        f2 = load_forest(json.dumps(doc2).encode())
        assert f2.base_score == value
        np.testing.assert_allclose(f2.predict(X[:50]) - forest.predict(X[:50]), value - forest.base_score, atol=1e-6)
    doc2 = copy.deepcopy(doc)
    doc2["learner"]["learner_model_param"]["base_score"] = "[1E0,2E0]"
    _raises(json.dumps(doc2).encode(), "invalid", "/learner/learner_model_param/base_score")


@pytest.fixture(scope="module")
def xgb_doc(data):
    X, _, y = data
    return _xgb_json(_xgb_train(X, y, rounds=3))


def _tree_path(t=0):
    return f"/learner/gradient_booster/model/trees/{t}"


def _mutated(doc, fn) -> bytes:
    d = copy.deepcopy(doc)
    fn(d)
    return json.dumps(d).encode()


def _tree(d, t=0):
    return d["learner"]["gradient_booster"]["model"]["trees"][t]


def test_xgboost_malformed(xgb_doc):
    good = json.dumps(xgb_doc).encode()
    load_forest(good)
    # truncated JSON
    err = _raises(good[: len(good) // 2], "invalid", "file", "invalid json")
    assert "line" in err.detail

    # child index out of range
    def out_of_range(d):
        _tree(d, 1)["left_children"][2] = 10_000

    _raises(_mutated(xgb_doc, out_of_range), "invalid", _tree_path(1) + "/left_children/2", "node id in")

    # a cycle back to the root
    def cycle(d):
        tr = _tree(d)
        leaf = tr["left_children"].index(-1)
        tr["left_children"][leaf], tr["right_children"][leaf] = 0, 1

    _raises(_mutated(xgb_doc, cycle), "invalid", _tree_path() + "/*", "root")

    # a node with two parents (right child of the root is also the left child of node 1)
    def two_parents(d):
        tr = _tree(d)
        tr["left_children"][1] = tr["right_children"][0]

    _raises(_mutated(xgb_doc, two_parents), "invalid", _tree_path() + "/*", "exactly one parent")

    # one child only
    def one_child(d):
        _tree(d)["right_children"][0] = -1

    _raises(_mutated(xgb_doc, one_child), "invalid", _tree_path() + "/left_children/0", "both children")

    # feature index out of range
    def bad_feature(d):
        _tree(d)["split_indices"][0] = 99

    _raises(_mutated(xgb_doc, bad_feature), "invalid", _tree_path() + "/split_indices/0", "column index")

    # arrays of different lengths
    def short(d):
        _tree(d)["split_conditions"].pop()

    _raises(_mutated(xgb_doc, short), "invalid", _tree_path() + "/split_conditions")

    # strings where numbers belong
    def strings(d):
        _tree(d)["left_children"] = [str(v) for v in _tree(d)["left_children"]]

    _raises(_mutated(xgb_doc, strings), "invalid", _tree_path() + "/left_children/0", "integers")

    # non-finite split condition (JSON's NaN literal)
    def nan(d):
        _tree(d)["split_conditions"][0] = float("nan")

    _raises(_mutated(xgb_doc, nan), "invalid", _tree_path() + "/split_conditions/0", "finite")

    # missing key
    def missing(d):
        del _tree(d)["default_left"]

    _raises(_mutated(xgb_doc, missing), "invalid", _tree_path() + "/default_left", "missing")

    # categorical split
    def categorical(d):
        _tree(d)["split_type"][0] = 1

    _raises(_mutated(xgb_doc, categorical), "invalid", _tree_path() + "/split_type/0", "categorical")

    def categorical_feature(d):
        d["learner"]["feature_types"] = ["c"] * 8

    _raises(_mutated(xgb_doc, categorical_feature), "invalid", _tree_path() + "/split_indices/0", "categorical")

    # multi-class / multi-target
    def multiclass(d):
        d["learner"]["learner_model_param"]["num_class"] = "3"

    _raises(_mutated(xgb_doc, multiclass), "invalid", "/learner/learner_model_param/num_class")

    def groups(d):
        d["learner"]["gradient_booster"]["model"]["tree_info"][1] = 1

    _raises(_mutated(xgb_doc, groups), "invalid", "/learner/gradient_booster/model/tree_info/1")
    # complexity bounds
    _raises(good, "invalid", None, "depth", max_depth=2)
    _raises(good, "invalid", "/learner/gradient_booster/model/trees", "limit", max_nodes=20)


def test_xgboost_pruned_nodes_are_dropped_and_errors_keep_xgboost_ids(data):
    """Pruning (tree_method="exact" with gamma) leaves deleted nodes in XGBoost's arrays."""
    _X, Xnan, y = data
    booster = _xgb_train(Xnan, y, rounds=5, tree_method="exact", gamma=0.5, max_depth=6)
    doc = _xgb_json(booster)
    tree = _tree(doc)
    children = set(tree["left_children"]) | set(tree["right_children"])
    deleted = [i for i, left in enumerate(tree["left_children"]) if i and left == -1 and i not in children]
    assert len(deleted) == int(tree["tree_param"]["num_deleted"]) > 0
    forest = load_forest(json.dumps(doc).encode())
    assert forest.trees[0].n_nodes == len(tree["left_children"]) - len(deleted)
    margin = booster.predict(xgb.DMatrix(Xnan, feature_names=FEATURES), output_margin=True)
    np.testing.assert_allclose(forest.predict(Xnan), margin, rtol=2e-6, atol=2e-6 * np.abs(margin).max())
    last_split = max(i for i, left in enumerate(tree["left_children"]) if left != -1)
    assert min(deleted) < last_split  # its id in the forest is smaller than XGBoost's

    def bad_feature(d):
        _tree(d)["split_indices"][last_split] = 99

    _raises(_mutated(doc, bad_feature), "invalid", _tree_path() + f"/split_indices/{last_split}", "column index")


@pytest.mark.parametrize("objective", ["binary:logistic", "binary:logitraw"])
def test_xgboost_binary_classifiers_predict_their_margin(data, objective):
    """The log-odds of label 1: binary:logistic's base_score is a probability, logitraw's a margin."""
    _X, Xnan, y = data
    booster = _xgb_train(Xnan, (y > np.quantile(y, 0.7)).astype(float), rounds=20, objective=objective)
    margin = booster.predict(xgb.DMatrix(Xnan, feature_names=FEATURES), output_margin=True)
    for raw_format in ("json", "ubj"):
        forest = load_forest(bytes(booster.save_raw(raw_format)))
        np.testing.assert_allclose(forest.predict(Xnan), margin, rtol=2e-6, atol=2e-6 * np.abs(margin).max())
    broken = _xgb_json(booster)
    broken["learner"]["learner_model_param"]["base_score"] = "[1E0]"
    if objective == "binary:logistic":
        _raises(json.dumps(broken).encode(), "invalid", "/learner/learner_model_param/base_score", "probability")


def test_xgboost_unsupported_models(data):
    X, _, y = data
    # multiclass and log-link models are read (tests/solver/test_forest_multiclass.py); these are not
    hinge = _xgb_train(X, (y > np.median(y)).astype(float), rounds=2, objective="binary:hinge")
    _raises(bytes(hinge.save_raw("json")), "invalid", "/learner/objective/name", "classification")
    # survival:cox is read (tests/solver/test_survival_forests.py); an accelerated failure time model is not
    times = xgb.DMatrix(X, feature_names=FEATURES)
    times.set_float_info("label_lower_bound", np.abs(y) + 0.1)
    times.set_float_info("label_upper_bound", np.abs(y) + 0.1)
    aft = xgb.train({"objective": "survival:aft", "nthread": 1}, times, 2)
    _raises(bytes(aft.save_raw("json")), "invalid", "/learner/objective/name", "survival:aft")
    vector_leaf = _xgb_train(
        X,
        np.digitize(y, np.quantile(y, [0.33, 0.66])),
        rounds=2,
        objective="multi:softprob",
        num_class=3,
        multi_strategy="multi_output_tree",
        tree_method="hist",
    )
    _raises(bytes(vector_leaf.save_raw("json")), "invalid", "/learner/gradient_booster/model/trees/0/*", "vector-leaf")
    linear = xgb.train({"booster": "gblinear", "nthread": 1}, xgb.DMatrix(X, label=y), 2)
    _raises(bytes(linear.save_raw("json")), "invalid", "/learner/gradient_booster/name", "gblinear")
    # categorical feature with a categorical split
    df = pd.DataFrame(X[:, :3], columns=["a", "b", "c"])
    df["cat"] = pd.Categorical(np.where(y > np.median(y), "hi", "lo"))
    cat = xgb.train(
        {"max_depth": 3, "nthread": 1, "max_cat_to_onehot": 1}, xgb.DMatrix(df, label=y, enable_categorical=True), 3
    )
    _raises(bytes(cat.save_raw("json")), "invalid", "/learner/gradient_booster/model/trees/*", "categorical")


# ------------------------------------------------------------------------------------------
# LightGBM
# ------------------------------------------------------------------------------------------


def _lgb_train(X, y, rounds=30, **params):
    params = {"num_leaves": 15, "learning_rate": 0.2, "verbose": -1, "num_threads": 1, **params}
    return lgb.train(params, lgb.Dataset(X, y, feature_name=FEATURES), rounds)


def _lgb_leaf_order(tree_structure) -> list[int]:
    """leaf_index of each leaf in left-to-right depth-first order."""
    out, stack = [], [tree_structure]
    while stack:
        node = stack.pop()
        if "leaf_value" in node and "split_feature" not in node:
            out.append(node.get("leaf_index", 0))
        else:
            stack += [node["right_child"], node["left_child"]]
    return out


LGB_CASES = {
    "l2": {},
    "huber": {"objective": "huber"},
    "l1": {"objective": "regression_l1"},
    "quantile": {"objective": "quantile", "alpha": 0.3},
    "depthwise": {"max_depth": 3, "num_leaves": 8, "bagging_fraction": 0.7, "bagging_freq": 1},
}


@pytest.mark.parametrize("case", list(LGB_CASES))
def test_lightgbm_matches_booster(data, case):
    X, Xnan, y = data
    booster = _lgb_train(Xnan, y, **LGB_CASES[case])
    dump = booster.dump_model()
    raw = json.dumps(dump).encode()
    assert detect_format(raw, "model.json") == "lightgbm-json"
    forest = load_forest(raw, filename="model.json")
    assert forest.feature_names == FEATURES
    for Z in (Xnan, X):
        np.testing.assert_allclose(forest.predict(Z), booster.predict(Z, raw_score=True), rtol=1e-9, atol=1e-12)
        pred_leaf = booster.predict(Z, pred_leaf=True).astype(np.int64)
        ours = forest.apply(Z).astype(np.int64)
        for t, info in enumerate(dump["tree_info"]):
            order = np.array(_lgb_leaf_order(info["tree_structure"]))
            np.testing.assert_array_equal(order[ours[:, t]], pred_leaf[:, t])


def test_lightgbm_renamed_features_are_matched_to_the_table(data):
    X, _, y = data
    table = pd.DataFrame(X[:, :2], columns=["carat", "depth pct"]).assign(
        cut=np.where(y > np.median(y), "Very Good", "Fair")
    )
    encoding = TableEncoding.infer(table)
    booster = lgb.train(
        {"verbose": -1, "num_leaves": 4},
        lgb.Dataset(pd.DataFrame(encoding.encode_frame(table), columns=encoding.feature_names), y),
        num_boost_round=3,
    )
    forest = load_forest(json.dumps(booster.dump_model()).encode())
    assert forest.feature_names == ["carat", "depth_pct", "cut=Fair", "cut=Very_Good"]
    matched, renames = match_feature_names(forest, encoding.feature_names)
    assert matched.feature_names == encoding.feature_names
    assert renames == {"depth_pct": "depth pct", "cut=Very_Good": "cut=Very Good"}
    assert forest.feature_names[1] == "depth_pct"  # the loaded forest is left as it was
    np.testing.assert_array_equal(matched.predict(X[:, :4]), forest.predict(X[:, :4]))
    positional = forest.with_feature_names([f"x{j}" for j in range(4)])
    assert match_feature_names(positional, encoding.feature_names)[1] == dict(
        zip(positional.feature_names, encoding.feature_names)
    )
    for other in (["carat", "depth", "cut=Fair", "cut=Very Good"], encoding.feature_names[:3]):
        assert match_feature_names(forest, other) == (forest, {})  # not the same features: no renames
    assert match_feature_names(matched, encoding.feature_names) == (matched, {})


@pytest.mark.parametrize("sigmoid", [1.0, 2.5])
def test_lightgbm_binary_classifier_predicts_log_odds(data, sigmoid):
    """``binary``: the log-odds of label 1 are ``sigmoid * raw score`` (the sigmoid goes into tree_weight)."""
    _X, Xnan, y = data
    booster = _lgb_train(Xnan, (y > np.quantile(y, 0.7)).astype(float), rounds=20, objective="binary", sigmoid=sigmoid)
    forest = load_forest(json.dumps(booster.dump_model()).encode())
    probability = booster.predict(Xnan)
    np.testing.assert_allclose(forest.predict(Xnan), np.log(probability / (1 - probability)), atol=1e-9)


def test_lightgbm_missing_type_none_and_rf(data):
    X, Xnan, y = data
    # trained without NaN (missing_type "None"): LightGBM maps NaN to 0.0 at prediction time
    booster = _lgb_train(X, y, rounds=20)
    dump = booster.dump_model()
    assert '"missing_type": "None"' in json.dumps(dump)
    forest = load_forest(json.dumps(dump).encode())
    np.testing.assert_allclose(forest.predict(Xnan), booster.predict(Xnan, raw_score=True), rtol=1e-9, atol=1e-12)
    # random-forest mode: the prediction is the average of the trees (raw_score gives the sum)
    rf = _lgb_train(Xnan, y, rounds=20, boosting="rf", bagging_fraction=0.6, bagging_freq=1)
    forest = load_forest(json.dumps(rf.dump_model()).encode())
    assert forest.tree_weight == pytest.approx(1 / 20)
    np.testing.assert_allclose(forest.predict(Xnan), rf.predict(Xnan), rtol=1e-9, atol=1e-12)
    # leaf counts become the forest's leaf support
    assert (forest.leaf_support >= 0).all()


@pytest.fixture(scope="module")
def lgb_dump(data):
    _X, Xnan, y = data
    return _lgb_train(Xnan, y, rounds=3).dump_model()


def test_lightgbm_malformed_and_unsupported(data, lgb_dump):
    X, _, y = data
    root = "/tree_info/1/tree_structure"

    def mut(fn):
        d = copy.deepcopy(lgb_dump)
        fn(d)
        return json.dumps(d).encode()

    def node(d):
        return d["tree_info"][1]["tree_structure"]

    _raises(json.dumps(lgb_dump).encode()[:-10], "invalid", "file", "invalid json")
    _raises(mut(lambda d: node(d).update(split_feature=42)), "invalid", root + "/split_feature", "column index")
    _raises(mut(lambda d: node(d).update(threshold="abc")), "invalid", root + "/threshold")
    _raises(mut(lambda d: node(d).pop("left_child")), "invalid", root + "/left_child", "missing")
    _raises(mut(lambda d: node(d).update(right_child=[1, 2])), "invalid", root + "/right_child")
    _raises(mut(lambda d: node(d).update(decision_type="==")), "invalid", root + "/decision_type", "categorical")
    _raises(mut(lambda d: node(d).update(missing_type="Sometimes")), "invalid", root + "/missing_type")
    _raises(
        mut(lambda d: node(d).update(left_child={"leaf_index": 0, "leaf_value": float("inf")})),
        "invalid",
        root + "/left_child/leaf_value",
        "finite",
    )
    _raises(mut(lambda d: d.update(objective="cross_entropy")), "invalid", "/objective", "classification")
    _raises(mut(lambda d: d.update(objective="binary sigmoid:-1")), "invalid", "/objective", "sigmoid")
    _raises(mut(lambda d: d.update(objective="lambdarank")), "invalid", "/objective", "ranking")
    _raises(mut(lambda d: d.update(objective="regression sqrt")), "invalid", "/objective", "sqrt")
    _raises(mut(lambda d: d.update(num_class=3)), "invalid", "/num_class")
    # a multiclass objective on a dump with one tree per round
    _raises(
        mut(lambda d: d.update(objective="multiclass num_class:3", num_class=3)),
        "invalid",
        "/num_tree_per_iteration",
        "one tree per class",
    )
    _raises(json.dumps(lgb_dump).encode(), "invalid", None, "depth", max_depth=2)
    # real models: zero_as_missing, categorical split, linear trees
    zam = _lgb_train(X, y, rounds=2, zero_as_missing=True)
    _raises(json.dumps(zam.dump_model()).encode(), "invalid", "/tree_info/*", "zero_as_missing")
    Xc = X.copy()
    Xc[:, 0] = np.floor((Xc[:, 0] - Xc[:, 0].min()) * 5)
    cat = lgb.train(
        {
            "verbose": -1,
            "num_threads": 1,
            "num_leaves": 7,
            "min_data_per_group": 5,
            "cat_smooth": 1,
            "max_cat_to_onehot": 2,
        },
        lgb.Dataset(Xc, y + Xc[:, 0] % 2, categorical_feature=[0]),
        3,
    )
    _raises(json.dumps(cat.dump_model()).encode(), "invalid", "/tree_info/*", "categorical")
    lin = _lgb_train(X, y, rounds=2, linear_tree=True)
    _raises(json.dumps(lin.dump_model()).encode(), "invalid", "/tree_info/*", "linear")


def test_lightgbm_deep_nesting_is_bounded(lgb_dump):
    # a chain deeper than the limit, and JSON nested beyond Python's recursion limit
    leaf = {"leaf_index": 0, "leaf_value": 1.0}
    node = leaf
    for _ in range(80):
        node = {
            "split_feature": 0,
            "threshold": 0.5,
            "decision_type": "<=",
            "default_left": True,
            "missing_type": "None",
            "left_child": node,
            "right_child": dict(leaf),
        }
    d = copy.deepcopy(lgb_dump)
    d["tree_info"] = [{"tree_index": 0, "num_leaves": 81, "num_cat": 0, "shrinkage": 1, "tree_structure": node}]
    _raises(json.dumps(d).encode(), "invalid", "/tree_info/0/*", "depth")
    deep = b'{"name": "tree", "tree_info": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    _raises(deep, "invalid", "file", "nested")


# ------------------------------------------------------------------------------------------
# skops
# ------------------------------------------------------------------------------------------


def _sk_estimators():
    from sklearn.dummy import DummyRegressor
    from sklearn.ensemble import (
        ExtraTreesRegressor,
        GradientBoostingRegressor,
        RandomForestRegressor,
    )
    from sklearn.tree import DecisionTreeRegressor, ExtraTreeRegressor

    return {
        "rf": RandomForestRegressor(n_estimators=10, max_depth=6, random_state=0, n_jobs=1),
        "et": ExtraTreesRegressor(
            n_estimators=10, max_depth=6, random_state=0, bootstrap=True, max_samples=0.5, n_jobs=1
        ),
        "gb": GradientBoostingRegressor(n_estimators=20, max_depth=3, random_state=0, subsample=0.8),
        "gb-huber-median": GradientBoostingRegressor(
            n_estimators=10, loss="huber", init=DummyRegressor(strategy="median")
        ),
        "gb-zero": GradientBoostingRegressor(n_estimators=10, init="zero", loss="quantile", alpha=0.4),
        "dt": DecisionTreeRegressor(max_depth=8, random_state=0),
        "extra-tree": ExtraTreeRegressor(max_depth=8, random_state=np.random.RandomState(3)),
    }


@pytest.mark.parametrize("name", list(_sk_estimators()))
def test_skops_matches_sklearn(data, name):
    X, _, y = data
    est = _sk_estimators()[name]
    est.fit(pd.DataFrame(X, columns=FEATURES) if name == "rf" else X, y)
    raw = sio.dumps(est)
    assert detect_format(raw, "model.skops") == "skops"
    forest = load_forest(raw, filename="model.skops")
    np.testing.assert_allclose(
        forest.predict(X), est.predict(pd.DataFrame(X, columns=FEATURES) if name == "rf" else X), rtol=1e-12, atol=1e-12
    )
    if name == "rf":
        assert forest.feature_names == FEATURES


def test_skops_allowlist_is_minimal_and_complete():
    # every type an accepted dump holds is allowed; nothing that can call code is
    assert "sklearn.tree._tree.Tree" in SKOPS_ALLOWED_TYPES
    for dangerous in (
        "builtins.eval",
        "posix.system",
        "os.system",
        "sklearn.pipeline.Pipeline",
        "sklearn.preprocessing._function_transformer.FunctionTransformer",
        "builtins.getattr",
        "functools.partial",
    ):
        assert dangerous not in SKOPS_ALLOWED_TYPES


def test_skops_refuses_untrusted_content(data):
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer
    from sklearn.tree import DecisionTreeRegressor

    X, _, y = data
    tree = DecisionTreeRegressor(max_depth=2).fit(X, y)
    # a pipeline holding os.system: skops itself flags the function, we name it
    evil = make_pipeline(FunctionTransformer(os.system), tree)
    err = _raises(sio.dumps(evil), "invalid", "file", "not allowed")
    assert os.system.__module__ + ".system" in err.detail
    # a pipeline of types skops trusts by default is still refused (not on our list)
    benign = make_pipeline(FunctionTransformer(np.log1p), tree)
    err = _raises(sio.dumps(benign), "invalid", "file", "not allowed")
    assert "sklearn.pipeline.Pipeline" in err.detail
    # a classifier
    clf = RandomForestClassifier(n_estimators=2, max_depth=2).fit(X, y > np.median(y))
    err = _raises(sio.dumps(clf), "invalid", "file", "not allowed")
    assert "RandomForestClassifier" in err.detail
    # hand-edited schema: an allowed estimator whose attribute points at builtins.eval
    raw = sio.dumps(tree)
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        entries = {n: z.read(n) for n in z.namelist()}
    schema = json.loads(entries["schema.json"])
    schema["content"]["content"]["criterion"] = {
        "__class__": "eval",
        "__module__": "builtins",
        "__loader__": "TypeNode",
        "__id__": 1,
    }
    entries["schema.json"] = json.dumps(schema).encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for n, b in entries.items():
            z.writestr(n, b)
    err = _raises(buf.getvalue(), "invalid", "file", "not allowed")
    assert "builtins.eval" in err.detail
    # truncated archive
    _raises(raw[: len(raw) // 2], "invalid", "file")
    # an unfitted model
    _raises(sio.dumps(DecisionTreeRegressor()), "invalid", "file")


# ------------------------------------------------------------------------------------------
# pickles, sniffing, fire-json
# ------------------------------------------------------------------------------------------


def test_pickles_are_refused_unloaded(data, tmp_path, monkeypatch):
    import joblib
    from sklearn.tree import DecisionTreeRegressor

    X, _, y = data
    tree = DecisionTreeRegressor(max_depth=2).fit(X, y)

    def forbidden(*a, **k):  # nothing may unpickle
        raise AssertionError("unpickling attempted")

    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)
    blobs = {
        "p5": pickle.dumps(tree, protocol=5),
        "p2": pickle.dumps(tree, protocol=2),
        "p0": pickle.dumps({"a": [1, 2]}, protocol=0),
    }
    for compress in (0, 3, ("gzip", 3), ("bz2", 3), ("xz", 3)):
        path = tmp_path / f"m{compress}.joblib"
        joblib.dump(tree, path, compress=compress)
        blobs[f"joblib-{compress}"] = path.read_bytes()
    for name, blob in blobs.items():
        err = _raises(blob, "unsupported", "file", "pickle")
        assert "skops" in err.detail
        assert detect_format(blob) == "pickle", name
    # named like a pickle, content unknown
    _raises(b"\x01\x02\x03garbage", "unsupported", "file", "pickle", filename="model.pkl")
    # declared as a pickle
    _raises(b"{}", "unsupported", "file", "pickle", declared_format="joblib")


def test_sniffing_and_declared_formats(xgb_doc, lgb_dump):
    raw_xgb = json.dumps(xgb_doc).encode()
    assert set(FORMATS) >= {"fire-json", "xgboost-json", "lightgbm-json", "skops"}
    _raises(b"", "invalid", "file", "empty")
    _raises(b"hello, world", "unsupported", "file", "unrecognized")
    _raises(b"tree\nversion=v4\n", "unsupported", "file", "dump_model")
    _raises(b'{"some": "json"}', "unsupported", "file", "not a model format")
    _raises(b"[1, 2, 3]", "unsupported", "file")
    assert detect_format(b'{"some": "json"}') is None
    # declared formats
    assert load_forest(raw_xgb, declared_format="xgboost").n_trees == 3
    assert load_forest(raw_xgb, declared_format="xgboost-ubjson").n_trees == 3
    _raises(raw_xgb, "invalid", "format", "declared", declared_format="lightgbm-json")
    _raises(raw_xgb, "unsupported", "format", "unknown format", declared_format="onnx")
    # gzip-compressed uploads are accepted, bounded
    gz = gzip.compress(json.dumps(lgb_dump).encode())
    assert detect_format(gz, "model.json.gz") == "lightgbm-json"
    assert load_forest(gz).n_trees == 3
    _raises(gzip.compress(b" " * 10_000), "too_large", "file", "limit", max_bytes=1000)
    _raises(gz[:-20], "invalid", "file", "gzip")
    _raises(raw_xgb, "too_large", "file", "limit", max_bytes=100)
    # other compressions are not
    import bz2

    _raises(bz2.compress(raw_xgb), "unsupported", "file", "bz2")


def test_fire_json_roundtrip_and_validation(data, xgb_doc):
    _X, Xnan, _ = data
    forest = load_forest(json.dumps(xgb_doc).encode())
    doc = forest.to_dict()
    raw = json.dumps(doc).encode()
    assert detect_format(raw) == "fire-json"
    again = load_forest(raw, declared_format="fire-json")
    np.testing.assert_array_equal(again.predict(Xnan), forest.predict(Xnan))
    assert again.feature_names == forest.feature_names
    bad = copy.deepcopy(doc)
    bad["trees"][0]["children_left"][0] = 999
    _raises(json.dumps(bad).encode(), "invalid", "/trees/0/children_left/0")
    bad = copy.deepcopy(doc)
    bad["trees"][0]["threshold"][0] = "x"
    _raises(json.dumps(bad).encode(), "invalid", "/trees/0/threshold/*")
    bad = copy.deepcopy(doc)
    bad["trees"][0]["value"][-1] = 2**70  # beyond int64 in a float list
    _raises(json.dumps(bad).encode(), "invalid")
    _raises(raw, "invalid", None, "depth", max_depth=1)
    _raises(raw, "invalid", "/trees", "limit", max_nodes=10)


def test_error_shape():
    err = _raises(b"\x80\x04garbage.", "unsupported", "file")
    assert err.field == "file" and "pickle" in err.detail
    assert "(field: file)" in str(err)


def test_lightgbm_zero_missing_when_representable(lgb_dump):
    d = copy.deepcopy(lgb_dump)
    root = d["tree_info"][0]["tree_structure"]
    root.update(missing_type="Zero", default_left=True, threshold=0.25)
    forest = load_forest(json.dumps(d).encode())
    assert bool(forest.trees[0].missing_go_left[0]) is True
    root.update(default_left=False, threshold=-0.25)
    forest = load_forest(json.dumps(d).encode())
    assert bool(forest.trees[0].missing_go_left[0]) is False
    root.update(default_left=True, threshold=-0.25)  # zeros would have to go left past the threshold
    _raises(json.dumps(d).encode(), "invalid", "/tree_info/0/tree_structure/missing_type", "zero_as_missing")


def test_ubjson_malformed(data):
    X, _, y = data
    raw = bytes(_xgb_train(X, y, rounds=2).save_raw("ubj"))
    for cut in (2, 7, len(raw) // 3, len(raw) - 1):
        _raises(raw[:cut], "invalid", "file", "ubjson")
    # a typed-array count larger than the data
    i = raw.index(b"[$")
    _raises(raw[:i] + b"[$d#L\x7f\xff\xff\xff\xff\xff\xff\xff" + raw[i + 13 :], "invalid", "file", "ubjson")


def test_structured_mutations_never_escape(xgb_doc, lgb_dump):
    """Random type/value substitutions anywhere in the documents: a ForestFormatError or a forest,
    never another exception (the service must not answer 500 to an upload)."""
    forest_doc = load_forest(json.dumps(xgb_doc).encode()).to_dict()
    values = [
        None,
        True,
        -1,
        0,
        2,
        2**70,
        -(2**40),
        1.5,
        float("nan"),
        float("inf"),
        "x",
        [],
        [1],
        {},
        {"a": 1},
        [[1, 2]],
        ["1"],
    ]
    rng = np.random.default_rng(7)

    def paths(o, p=()):
        yield p
        items = o.items() if isinstance(o, dict) else enumerate(o) if isinstance(o, list) else ()
        for k, v in items:
            yield from paths(v, (*p, k))

    for doc in (xgb_doc, lgb_dump, forest_doc):
        all_paths = list(paths(doc))[1:]
        for _ in range(150):
            d = copy.deepcopy(doc)
            p = all_paths[rng.integers(len(all_paths))]
            o = d
            for k in p[:-1]:
                o = o[k]
            o[p[-1]] = copy.deepcopy(values[rng.integers(len(values))])
            try:
                load_forest(json.dumps(d).encode())
            except ForestFormatError as e:  # loading may succeed: only the kind of a failure is checked
                assert e.reason in ("unsupported", "invalid") and e.detail  # noqa: PT017
