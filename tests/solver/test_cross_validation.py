"""Cross-validated paths (PathSpec.cv_folds, solver.cross_validation), the one-standard-error rule, forests split at
quantiles (ForestSpec.threshold_bins) and rule stability (solver.stability), each against an independent route: a
fold's path against a plain fit on that fold's rows, the one-standard-error step against a hand computation from
the folds' paths, a binned forest against scikit-learn's forest grown on the bin codes."""

import gzip
import io
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestRegressor

from solver import ForestSpec, PathSpec, SpecError, fit_rules
from solver.binning import bin_codes, quantile_cuts
from solver.cross_validation import fold_of_rows, fold_rows
from solver.estimator import FireRegressor
from solver.fitting import train_forest
from solver.path import PathStep, best_step
from solver.spec import STABLE
from solver.stability import check_resamples, dice, half_sample_pairs, reference_cuts, rule_keys
from tests.support.data import KIN8NM
from tests.support.folds import plain_fold_fits

FOREST = ForestSpec(n_estimators=20, max_depth=3)
SPEC = PathSpec(cv_folds=4, n_lambdas=30, max_rules=25, fusion_ratio=0)


@pytest.fixture(scope="module")
def table():
    frame = pd.read_csv(io.BytesIO(gzip.decompress(KIN8NM.read_bytes()))).head(1200)
    return frame.drop(columns="y").to_numpy(), frame["y"].to_numpy()


@pytest.fixture(scope="module")
def cross_validated(table):
    X, y = table
    return fit_rules(X, y, SPEC, forest=FOREST)


def test_folds_partition_the_rows_in_sizes_that_differ_by_at_most_one():
    folds = fold_of_rows(103, 5, seed=7)
    assert sorted(np.bincount(folds)) == [20, 20, 21, 21, 21]
    assert np.array_equal(folds, fold_of_rows(103, 5, seed=7)) and not np.array_equal(folds, fold_of_rows(103, 5, 8))
    train, val = fold_rows(103, 5, 7, fold=2)
    assert np.array_equal(np.sort(np.concatenate([train, val])), np.arange(103))
    assert np.array_equal(val, np.flatnonzero(folds == 2))


def test_each_fold_path_is_a_plain_fit_on_that_folds_rows(table, cross_validated):
    """The fold's forest trained on the other folds' rows only, validated on the fold's rows, on the full grid."""
    grid, fits = plain_fold_fits(*table, SPEC, FOREST)
    assert np.allclose([s.lambda_s for s in cross_validated.path.steps], grid[: len(cross_validated.path.steps)])
    for fold_steps, fit in zip(cross_validated.fold_steps, fits, strict=True):
        plain = fit.path
        assert len(plain.steps) == len(fold_steps)
        for ours, theirs in zip(fold_steps, plain.steps):
            assert {**ours.to_dict(), "seconds": 0} == {**theirs.to_dict(), "seconds": 0}


def test_the_steps_hold_the_folds_mean_loss_and_its_standard_error(cross_validated):
    steps, folds = cross_validated.path.steps, cross_validated.fold_steps
    reached = min(len(fold) for fold in folds)  # the refit goes as far as every fold, or to its rule budget
    assert len(steps) == reached or (len(steps) < reached and steps[-1].n_terms > SPEC.max_rules)
    for k, step in enumerate(steps):
        losses = np.array([fold[k].val_loss for fold in folds])
        assert step.val_loss == pytest.approx(losses.mean(), rel=1e-12)
        assert step.val_loss_se == pytest.approx(losses.std(ddof=1) / np.sqrt(len(losses)), rel=1e-12)
        assert step.val_r2 == pytest.approx(np.mean([fold[k].val_r2 for fold in folds]), rel=1e-12)
    assert cross_validated.val_rows is None and len(cross_validated.train_rows) == 1200
    assert cross_validated.selected == best_step(steps, SPEC.max_rules, "loss")


def test_the_one_standard_error_step_matches_a_hand_computation(table, cross_validated):
    X, y = table
    one_se = fit_rules(X, y, SPEC.replace(selection="1se"), forest=FOREST)
    steps = one_se.path.steps
    assert [s.to_dict() | {"seconds": 0} for s in steps] == [
        s.to_dict() | {"seconds": 0} for s in cross_validated.path.steps
    ]
    within = [k for k, s in enumerate(steps) if s.n_terms <= SPEC.max_rules]  # the budget counts terms
    lowest = min(within, key=lambda k: steps[k].val_loss)
    bar = steps[lowest].val_loss + steps[lowest].val_loss_se
    by_hand = min(k for k in within if steps[k].val_loss <= bar)
    assert one_se.selected == by_hand
    assert one_se.selected <= cross_validated.selected
    assert one_se.rules.n_terms <= steps[lowest].n_terms


def test_the_one_standard_error_rule_on_made_up_steps():
    def step(index, n_terms, loss, se):  # a rule and the rest linear terms: the budget counts them alike
        n_rules = min(n_terms, 1)
        return PathStep(
            index, 1.0, 0.0, n_rules, 1, None, loss, loss, 0.0, 1, True, 0.0,
            n_terms=n_terms, n_linear=n_terms - n_rules, val_loss_se=se,
        )  # fmt: skip

    steps = [step(0, 0, 1.0, 0.1), step(1, 2, 0.60, 0.05), step(2, 5, 0.58, 0.03), step(3, 9, 0.55, 0.04)]
    assert best_step(steps, None, "loss") == 3
    assert best_step(steps, None, "1se") == 2  # the lowest is 0.55 (se 0.04): 0.58 <= 0.59, 0.60 is not
    assert best_step(steps, 5, "loss") == 2
    assert best_step(steps, 5, "1se") == 1  # within 5 terms the lowest is 0.58 (se 0.03): 0.60 <= 0.61
    assert best_step([steps[0]], None, "1se") == 0
    overflowed = [step(0, 0, 1.0, float("nan")), step(1, 2, float("nan"), 0.05)]  # a fold's loss overflowed
    assert best_step(overflowed, None, "1se") == 0  # the lowest, not StopIteration


def test_cross_validation_settings_are_checked():
    with pytest.raises(SpecError, match="selection"):
        PathSpec(selection="1se")
    for folds in (1, 0, 2.5, 21):
        with pytest.raises(SpecError, match="cv_folds"):
            PathSpec(cv_folds=folds)
    with pytest.raises(ValueError, match="cv_folds"):
        fit_rules(
            np.zeros((10, 2)),
            np.zeros(10),
            PathSpec(cv_folds=2),
            forest=FOREST,
            X_val=np.zeros((2, 2)),
            y_val=np.zeros(2),
        )
    with pytest.raises(SpecError, match="stability_resamples"):
        check_resamples(3)


def test_a_binned_forest_splits_the_raw_columns_as_sklearn_splits_the_bin_codes(table):
    X, y = table
    X = X.copy()
    X[::17, 1] = np.nan
    estimator, ensemble = train_forest(ForestSpec(n_estimators=30, max_depth=3, threshold_bins=8), X, y)
    cuts = quantile_cuts(X, 8)
    on_codes = RandomForestRegressor(n_estimators=30, max_depth=3, max_features="sqrt", random_state=0, n_jobs=1)
    on_codes.fit(bin_codes(X, cuts), y)
    assert np.allclose(ensemble.predict(X), on_codes.predict(bin_codes(X, cuts)), rtol=0, atol=1e-12)
    for j in range(X.shape[1]):  # at most one threshold per cut: the forests of two samples share them
        used = {t.tree_.threshold[n] for t in estimator.estimators_ for n in np.flatnonzero(t.tree_.feature == j)}
        assert len(used) <= len(cuts[j])


def test_dice_is_one_for_the_same_rules_and_zero_for_disjoint_ones(table):
    X, y = table
    a = fit_rules(X, y, PathSpec(max_rules=10), forest=FOREST).rules
    b = fit_rules(X, y, PathSpec(max_rules=10, random_state=3), forest=FOREST.replace(random_state=3)).rules
    cuts = reference_cuts(X)
    keys_a, keys_b = set(rule_keys(a, cuts)), set(rule_keys(b, cuts))
    assert dice(keys_a, keys_a) == 1.0
    assert dice(keys_a, set()) == 0.0 and dice(set(), set()) == 1.0
    rules_only = {k for k in keys_a if not any(c[0] == "linear" for c in k)}
    assert dice(rules_only, keys_a - rules_only) == 0.0
    assert 0 <= dice(keys_a, keys_b) <= 1
    assert dice({1, 2, 3}, {2, 3, 4, 5}) == pytest.approx(2 * 2 / 7)


def test_a_threshold_counts_as_its_nearest_decile_cut(table):
    X, _ = table
    cuts = reference_cuts(X)
    model = fit_rules(*table, PathSpec(max_rules=6, linear_terms=False), forest=FOREST).rules
    rule = model.rules[0]
    nudged = [
        c.__class__(c.feature, c.feature_index, c.operator, c.threshold + 1e-9, c.missing) for c in rule.conditions
    ]
    moved = SimpleNamespace(rules=[rule.__class__(tuple(nudged), rule.contribution)], linear=())
    assert rule_keys(moved, cuts) == rule_keys(model, cuts)[:1]


def test_half_samples_are_disjoint_halves_of_every_row():
    for a, b in half_sample_pairs(11, 3, seed=5):
        assert len(a) == 6 and len(b) == 5 and not set(a) & set(b)
        assert np.array_equal(np.sort(np.concatenate([a, b])), np.arange(11))
    assert not np.array_equal(half_sample_pairs(11, 2, 5)[0][0], half_sample_pairs(11, 2, 5)[1][0])


def test_the_estimator_reports_how_often_each_rule_is_selected(table):
    X, y = table
    model = FireRegressor(n_estimators=20, max_rules=10, stability_resamples=4, random_state=0).fit(X, y)
    terms = model.rule_ensemble_.n_rules + model.rule_ensemble_.n_linear
    assert model.rule_stability_.shape == (terms,)
    assert np.all((model.rule_stability_ >= 0) & (model.rule_stability_ <= 1))
    assert np.all(np.isin(model.rule_stability_ * 4, np.arange(5)))  # a share of 4 fits
    assert 0 <= model.stability_dice_ <= 1
    again = FireRegressor(n_estimators=20, max_rules=10, stability_resamples=4, random_state=0).fit(X, y)
    assert np.array_equal(again.rule_stability_, model.rule_stability_)


def test_the_stable_setting_gives_rules_of_one_condition_at_decile_cuts(table):
    X, y = table
    model = FireRegressor(n_estimators=20, max_rules=10, random_state=0, **STABLE).fit(X, y)
    trained_on = X[model_rows(model, len(y))]
    cuts = quantile_cuts(trained_on, 10)
    for rule in model.rules_:
        (condition,) = rule.conditions
        column = trained_on[:, condition.feature_index]
        above, below = column[column > condition.threshold], column[column <= condition.threshold]
        assert below.size and above.size
        assert np.any(np.isclose(below.max(), cuts[condition.feature_index]))  # the split sits at a decile cut


def model_rows(model, n_rows):
    """The training rows of an estimator's fit (its holdout split)."""
    from solver.fitting import holdout_split

    return holdout_split(n_rows, model.validation_fraction, 0)[0]
