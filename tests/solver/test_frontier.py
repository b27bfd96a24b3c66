"""Issue 39, item 4: the accuracy–stability–size frontier of a cross-validated path (solver.path.stability_frontier),
checked against a brute-force dominance check written here (every pair of steps compared): on random steps with
ties, losses that overflowed and steps past the rule budget, and on a real 3-fold fit, through the fit and the
estimator."""

import gzip
import io
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from solver import FireRegressor, FrontierStep, fit_rules, stability_frontier
from tests.support.data import KIN8NM


def brute_force(steps, dice, max_rules) -> list[int]:
    """The steps within the budget with a finite loss that no other such step beats (at most its terms, at most its
    loss, at least its Dice, and better on one of the three) and that no earlier step equals on all three."""
    within = [
        k for k, s in enumerate(steps) if (max_rules is None or s.n_terms <= max_rules) and math.isfinite(s.val_loss)
    ]

    def beats(j, k):
        a, b = steps[j], steps[k]
        no_worse = a.n_terms <= b.n_terms and a.val_loss <= b.val_loss and dice[j] >= dice[k]
        better = a.n_terms < b.n_terms or a.val_loss < b.val_loss or dice[j] > dice[k]
        return no_worse and better

    def equals(j, k):
        return steps[j].n_terms == steps[k].n_terms and steps[j].val_loss == steps[k].val_loss and dice[j] == dice[k]

    return [k for k in within if not any(beats(j, k) or (j < k and equals(j, k)) for j in within if j != k)]


def random_steps(rng, n):
    """Steps whose terms, losses and Dice take few values (ties on every axis), a few losses not finite."""
    steps, dice = [], []
    for _ in range(n):
        rules = int(rng.integers(0, 6))
        linear = int(rng.integers(0, 3))
        loss = float(rng.integers(0, 8)) / 4 if rng.random() < 0.9 else float(rng.choice([np.nan, np.inf]))
        steps.append(
            SimpleNamespace(
                n_terms=rules + linear, n_rules=rules, n_linear=linear, val_loss=loss, val_loss_se=float(rng.random())
            )
        )
        dice.append(float(rng.integers(0, 5)) / 4)
    return steps, dice


@pytest.mark.parametrize("seed", range(200))
def test_the_frontier_of_random_steps_is_the_brute_force_one(seed):
    rng = np.random.default_rng(seed)
    steps, dice = random_steps(rng, int(rng.integers(1, 30)))
    budget = None if seed % 3 == 0 else int(rng.integers(0, 8))
    frontier = stability_frontier(steps, dice, budget)
    assert [f.step for f in frontier] == brute_force(steps, dice, budget)
    for f in frontier:
        s = steps[f.step]
        assert f == FrontierStep(f.step, s.n_terms, s.n_rules, s.n_linear, s.val_loss, s.val_loss_se, dice[f.step])


def test_the_frontier_refuses_steps_it_cannot_place():
    step = SimpleNamespace(n_terms=1, n_rules=1, n_linear=0, val_loss=None, val_loss_se=None)
    with pytest.raises(ValueError, match="cross-validated loss"):
        stability_frontier([step], [1.0])
    step.val_loss = 0.5
    with pytest.raises(ValueError, match="one Dice index per step"):
        stability_frontier([step], [1.0, 0.5])


@pytest.fixture(scope="module")
def table():
    frame = pd.read_csv(io.BytesIO(gzip.decompress(KIN8NM.read_bytes()))).head(900)
    return frame.drop(columns="y").to_numpy(), frame["y"].to_numpy()


def test_a_cross_validated_fit_and_the_estimator_give_the_brute_force_frontier(table):
    X, y = table
    model = FireRegressor(n_estimators=20, max_depth=3, n_lambdas=20, max_rules=12, fusion_ratio=0, cv_folds=3)
    model.set_params(random_state=0).fit(X, y)
    fit = fit_rules(X, y, model.path_spec(0), forest=model.forest_spec(0))  # the estimator's fit, every step's Dice
    steps, dice = fit.path.steps, fit.fold_stability.dice
    assert [s.to_dict() for s in steps] == [{**record, "seconds": s.seconds} for record, s in zip(model.path_, steps)]
    expected = brute_force(steps, dice, 12)
    assert [f.step for f in fit.frontier] == expected and model.cv_frontier_ == fit.frontier
    assert 3 <= len(expected) < len(steps)  # a trade-off: neither one step nor every step
    assert [f.to_dict() for f in fit.frontier] == [
        {
            "step": k,
            "n_terms": steps[k].n_terms,
            "n_rules": steps[k].n_rules,
            "n_linear": steps[k].n_linear,
            "val_loss": steps[k].val_loss,
            "val_loss_se": steps[k].val_loss_se,
            "dice": dice[k],
        }
        for k in expected
    ]
    # the intercept alone (no term: every fold agrees, Dice 1) and the lowest mean loss are always on it
    lowest = min(range(len(steps)), key=lambda k: (steps[k].val_loss, steps[k].n_terms, -dice[k]))
    assert {0, lowest} <= set(expected) and steps[0].n_terms == 0 and dice[0] == 1.0
    assert FireRegressor(n_estimators=20, n_lambdas=20, random_state=0).fit(X, y).cv_frontier_ is None
