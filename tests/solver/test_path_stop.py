"""A path that stops when it is done (PathSpec.patience): past its best step by `patience` steps and at twice its
rules, it ends with the same steps, the same selected step and the same rules as the whole grid."""

import gzip
import io

import numpy as np
import pandas as pd
import pytest

from solver import ForestSpec, PathSpec, SpecError, fit_rules
from solver.path import best_step
from solver.spec import PAST_BEST_RULE_FACTOR
from tests.support.data import KIN8NM

FOREST = ForestSpec(n_estimators=20, max_depth=4)


@pytest.fixture(scope="module")
def table():
    frame = pd.read_csv(io.BytesIO(gzip.decompress(KIN8NM.read_bytes()))).head(1500)
    return frame.drop(columns="y").to_numpy(), frame["y"].to_numpy()


def fit(table, **settings):
    X, y = table
    return fit_rules(X, y, PathSpec(n_lambdas=80, fusion_ratio=0, **settings), forest=FOREST)


def test_a_path_past_its_best_stops_with_the_whole_grids_steps_and_selection(table):
    whole, stopped = fit(table, patience=None), fit(table)
    assert whole.path.stop_reason == "completed" and len(whole.path.steps) == 80
    assert stopped.path.stop_reason == "past_its_best" and len(stopped.path.steps) < len(whole.path.steps)
    for kept, full in zip(stopped.path.steps, whole.path.steps):  # the same steps up to where it stopped
        assert {**kept.to_dict(), "seconds": 0} == {**full.to_dict(), "seconds": 0}
    assert stopped.selected == whole.selected
    assert stopped.rules.to_dict() == whole.rules.to_dict()
    steps, spec = stopped.path.steps, stopped.path.spec
    assert steps[-1].index - steps[stopped.selected].index >= spec.patience
    assert steps[-1].n_terms >= PAST_BEST_RULE_FACTOR * steps[stopped.selected].n_terms
    assert not spec.past_its_best(steps[:-1], best_step(steps[:-1]))  # it stopped at the first chance


def test_the_rule_needs_both_the_steps_and_the_rules(table):
    steps = fit(table, patience=None).path.steps
    spec = PathSpec()
    for end in range(1, len(steps) + 1):
        seen = steps[:end]
        best = best_step(seen)
        done = spec.past_its_best(seen, best)
        waited = seen[-1].index - seen[best].index >= spec.patience
        grown = seen[-1].n_terms >= PAST_BEST_RULE_FACTOR * max(seen[best].n_terms, 1)
        assert done == (waited and grown)
    without_validation = [step.__class__(**{**step.to_dict(), "val_loss": None}) for step in steps]
    assert not spec.past_its_best(without_validation, best_step(without_validation))


def test_a_budget_still_stops_first_and_patience_is_checked(table):
    budgeted = fit(table, max_rules=10)
    assert budgeted.path.stop_reason in ("max_rules", "past_its_best")
    assert budgeted.path.steps[budgeted.selected].n_terms <= 10
    for bad in (0, -1, 2.5, True):
        with pytest.raises(SpecError, match="patience"):
            PathSpec(patience=bad)
    assert np.isfinite(budgeted.path.steps[-1].val_loss)
