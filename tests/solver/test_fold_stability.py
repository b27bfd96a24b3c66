"""How a cross-validated path's rules repeat over its folds (issue 39, item 3: solver.stability.fold_stability):
each refitted step's rule frequencies over the folds' paths at that step and the folds' mean pairwise Dice index,
against an independent route: each fold's path fitted here as a plain fit on that fold's rows (the library's fold
rows, the grid of every row), its conditions binned by hand at the deciles of every row and rules matched by brute
force, condition by condition."""

import gzip
import io
from itertools import combinations

import numpy as np
import pandas as pd
import pytest

from solver import ForestSpec, PathSpec, fit_rules
from solver.estimator import FireRegressor
from solver.stability import PathRuleKeys, fold_stability
from tests.support.data import KIN8NM
from tests.support.folds import plain_fold_fits

FOREST = ForestSpec(n_estimators=20, max_depth=3)
SPEC = PathSpec(cv_folds=3, n_lambdas=20, max_rules=20, fusion_ratio=0)
WITH_MISSING = 1  # the column given missing values: its conditions' missing flags count, the others' do not


@pytest.fixture(scope="module")
def table():
    frame = pd.read_csv(io.BytesIO(gzip.decompress(KIN8NM.read_bytes()))).head(900)
    X, y = frame.drop(columns="y").to_numpy(), frame["y"].to_numpy()
    X[::13, WITH_MISSING] = np.nan
    return X, y


@pytest.fixture(scope="module")
def cross_validated(table):
    return fit_rules(*table, SPEC, forest=FOREST)


def signatures(ensemble, X) -> list[tuple]:
    """Each rule's conditions, then each linear term, as a sorted tuple of (column, operator, missing flag where the
    column has missing values, the decile of every row nearest its threshold), binned here by hand."""
    out = []
    for rule in ensemble.rules:
        conditions = []
        for c in rule.conditions:
            column = X[:, c.feature_index]
            deciles = np.unique(np.quantile(column[~np.isnan(column)], np.arange(1, 10) / 10, method="lower"))
            nearest = min(range(len(deciles)), key=lambda b: abs(deciles[b] - c.threshold))
            missing = c.missing if np.isnan(column).any() else None
            conditions.append((c.feature_index, c.operator, repr(missing), nearest))
        out.append(tuple(sorted(conditions)))
    return out + [(("linear", term.feature_index),) for term in ensemble.linear]


def test_fold_frequencies_and_dice_match_each_folds_plain_fit_matched_by_hand(table, cross_validated):
    X, y = table
    stability = cross_validated.fold_stability
    steps = range(len(cross_validated.path.steps))
    folds = [
        [signatures(plain.rules_at(step), X) for step in steps] for plain in plain_fold_fits(X, y, SPEC, FOREST)[1]
    ]
    assert stability.n_folds == 3 and len(stability.dice) == len(stability.frequencies) == len(
        cross_validated.path.steps
    )
    repeated = 0
    for step in range(len(cross_validated.path.steps)):
        refit = signatures(cross_validated.rules_at(step), X)
        by_hand = [sum(any(mine == theirs for theirs in fold[step]) for fold in folds) / 3 for mine in refit]
        assert list(stability.frequencies[step]) == pytest.approx(by_hand, abs=1e-12)
        pairs = []
        for a, b in combinations(range(3), 2):
            distinct_a, distinct_b = set(folds[a][step]), set(folds[b][step])
            shared = sum(1 for s in distinct_a if any(s == t for t in distinct_b))
            both = len(distinct_a) + len(distinct_b)
            pairs.append(1.0 if both == 0 else 2 * shared / both)
        assert stability.dice[step] == pytest.approx(np.mean(pairs), abs=1e-12)
        repeated += sum(0 < f < 1 for f in by_hand)
    assert repeated and any(0 < d < 1 for d in stability.dice)  # neither trivially all nor nothing
    missing_flags = {
        c.missing for step in range(len(cross_validated.path.steps)) for rule in cross_validated.rules_at(step).rules
        for c in rule.conditions if c.feature_index == WITH_MISSING
    }  # fmt: skip
    assert missing_flags  # the column with missing values is split on: its flag is part of the match


def test_the_estimator_gives_the_selected_steps_fold_frequencies(table):
    X, y = table
    model = FireRegressor(n_estimators=20, n_lambdas=20, max_rules=10, cv_folds=3, random_state=0).fit(X, y)
    terms = model.rule_ensemble_.n_rules + model.rule_ensemble_.n_linear
    assert model.cv_rule_stability_.shape == (terms,)
    assert np.all(np.isin(np.round(model.cv_rule_stability_ * 3, 12), np.arange(4)))  # a share of 3 folds
    assert 0 <= model.cv_stability_dice_ <= 1
    plain = FireRegressor(n_estimators=20, n_lambdas=20, max_rules=10, random_state=0).fit(X, y)
    assert plain.cv_rule_stability_ is None and plain.cv_stability_dice_ is None


def test_path_rule_keys_round_trip_and_share_their_keys():
    a, b = frozenset({(0, "<=", None, 3), (2, ">", True, 1)}), frozenset({("linear", 4)})
    keys = PathRuleKeys.of([[], [a], [a, b], [b, a]])
    assert keys.keys == [a, b] and keys.steps == [[], [0], [0, 1], [1, 0]]
    again = PathRuleKeys.from_dict(keys.to_dict())
    assert again == keys and [again.at(k) for k in range(4)] == [[], [a], [a, b], [b, a]]
    folds = [PathRuleKeys.of([[a], [a, b]]), PathRuleKeys.of([[b], [a]])]
    measured = fold_stability(PathRuleKeys.of([[a], [b, a]]), folds)
    assert [list(f) for f in measured.frequencies] == [[0.5], [0.5, 1.0]]
    assert measured.dice == [0.0, pytest.approx(2 / 3)]
    with pytest.raises(ValueError, match="stops before"):
        fold_stability(PathRuleKeys.of([[a], [a], [a]]), folds)
