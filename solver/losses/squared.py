"""The squared loss, regression: ``1/2 sum_i s_i (y_i - b - (M w)_i)^2``.

State (``solver.problem.State``): ``residual = y - M w`` without the intercept, ``intercept`` [b] kept at its exact
optimum, the weighted mean of the residual, by every move in O(1) (``residual_sum`` [sum_i s_i residual_i] is b
times ``sum_i s_i``); no score (the residual is linear in w). A leaf's gradient is
``-v_j (sum_{i in leaf j} s_i residual_i - b S_j)`` (``solver.losses.kernels.gradient_of_sum``). Its curvature in
``w_j`` is exactly ``c_j = S_j v_j^2`` (``CURVATURE_BOUND`` 1), so the quadratic steps of
``solver.losses.quadratic_steps`` minimise the loss itself.
"""

import numpy as np
from numba import njit

from .. import polish
from .base import Loss, Metric, checked_offset, column_entry

CODE = 0
CURVATURE_BOUND = 1.0


@njit(cache=True, inline="always")
def move_leaf(problem, state, j, delta):
    """The residual, its weighted sum and the optimal intercept after ``w_j += delta``: O(S_j)."""
    for p in range(problem.leaf_ptr[j], problem.leaf_ptr[j + 1]):
        state.residual[problem.leaf_rows[p]] -= column_entry(problem, j, p) * delta
    state.residual_sum[0] -= problem.leaf_weight[j] * problem.values[j] * delta
    state.intercept[0] = state.residual_sum[0] / problem.weight_total


@njit(cache=True)
def loss_value(problem, state):
    """``1/2 sum_i s_i (residual_i - b)^2``: O(n)."""
    total = 0.0
    for i in range(state.residual.shape[0]):
        r = state.residual[i] - state.intercept[0]
        total += problem.sample_weight[i] * r * r
    return 0.5 * total


@njit(cache=True)
def resync(problem, state):
    """The residual sum and the exact intercept recomputed: O(n)."""
    state.residual_sum[0] = np.dot(problem.sample_weight, state.residual)
    state.intercept[0] = state.residual_sum[0] / problem.weight_total


class Squared(Loss):
    def curvature_scale(self, y, sample_weight):
        return CURVATURE_BOUND

    def initial_state(self, problem):
        """w = 0, b the weighted mean of ``y``."""
        weighted_sum = np.dot(problem.sample_weight, problem.y)
        mean = weighted_sum / problem.weight_total
        w = np.zeros(problem.values.shape[0])
        return w, problem.y.copy(), np.array([mean]), np.array([weighted_sum]), np.zeros(0)

    def state_score(self, problem, state):
        """``y - residual + b``."""
        return problem.y - state.residual + state.intercept[0]

    def refit(self, columns, y, sample_weight):
        """Weighted least squares, solved directly (``solver.polish.least_squares``)."""
        return polish.least_squares(columns, y, sample_weight)

    def offset_target(self, y, sample_weight, offset):
        """``y - offset``, the weights as they are."""
        y, offset = checked_offset(y, offset)
        return y - offset, sample_weight

    def mean_loss(self, y, score, sample_weight=None):
        """The mean squared error (not halved)."""
        y, score = np.asarray(y, dtype=np.float64), np.asarray(score, dtype=np.float64)
        return float(np.average((y - score) ** 2, weights=sample_weight))

    def step_metrics(self, y, score, sample_weight=None):
        """The loss, ``r2`` (1 - MSE / variance of the target, scikit-learn's ``r2_score``; None where the target is
        constant), ``rmse`` (its square root) and ``mae`` (mean absolute error of the prediction)."""
        loss = self.mean_loss(y, score, sample_weight)
        variance = np.average((y - np.average(y, weights=sample_weight)) ** 2, weights=sample_weight)
        return {
            "loss": loss,
            "r2": float(1.0 - loss / variance) if variance > 0 else None,
            "rmse": float(np.sqrt(loss)),
            "mae": float(np.average(np.abs(y - score), weights=sample_weight)),
        }

    def warmup_target(self, y):
        return y


LOSS = Squared(
    name="squared",
    code=CODE,
    task="regression",
    other_tasks=("classification", "count"),  # a linear probability model of a 0/1 target; counts as numbers
    link="identity",
    rule_link=None,
    classifier=False,
    per_class=False,
    forest_task="Regressor",
    nonnegative_target=False,
    metrics=(Metric("r2", "R²"), Metric("rmse", "RMSE"), Metric("mae", "MAE"), Metric("loss", "MSE")),
    chart_metric="r2",
    selections=("loss", "1se"),
    polish_default=True,
)
