"""Polish: refit the weights of the rules a path step selected, without the penalties, by the path's loss.

The penalties choose *which* leaves become rules; they also shrink the chosen weights (L1 everywhere, MCP
below ``gamma * lambda_s``, fusion by pulling neighbours together). Polishing keeps the selection and replaces
the weights (and the intercept) by the weighted least-squares fit on the training rows, with a tiny ridge
``POLISH_RIDGE * c_j`` on each weight (``c_j`` the leaf's curvature ``S_j v_j^2``), so that collinear rules,
e.g. the two children of a split next to the intercept, get one small solution (solved by least squares, so
even a rule whose column is constant has one). Rules, antecedents and
predictions' structure are those of the step; only the amounts change.

Cost per step with ``k`` rules: O(n k) to build the selected columns, O(nnz k) for their Gram matrix and
O(k^3) for the solve. A loss with another link is refitted as its generalized linear model by Newton's method with
the same ridge (weights ``c_j`` then computed with the loss's curvature scale, ``Loss.curvature_scale``), each step
halved until the ridge-penalised loss decreases: the same cost per Newton step, a handful of steps.
"""

from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

POLISH_RIDGE = 1e-6


class _Glm(NamedTuple):
    """A link's generalized linear model, as the Newton refit reads it."""

    intercept: Callable  # the intercept-only model's score at the weighted mean m of y
    cumulant: Callable  # the per-row loss of a score, less its ``- y score`` term
    mean: Callable  # the mean at a score
    variance: Callable  # the cumulant's second derivative, as a function of the mean


GLMS = {
    "logit": _Glm(
        lambda m: np.log(m / (1.0 - m)),
        lambda score: np.logaddexp(0.0, score),
        lambda score: 1.0 / (1.0 + np.exp(-score)),
        lambda p: p * (1.0 - p),
    ),
    "log": _Glm(np.log, np.exp, np.exp, lambda p: p),
}


def polish(matrix, y, sample_weight, weights, loss, grouped=None) -> tuple[np.ndarray, float]:
    """(weights refitted on the nonzero entries of ``weights``, intercept) with a tiny ridge on the training
    rows, by weighted least squares (identity link) or the GLM of the link of ``loss`` (a ``solver.losses.Loss``:
    logistic regression on 0/1 ``y``, Poisson regression): ``matrix`` a LeafMatrix, ``sample_weight`` (n,) or None,
    ``grouped`` the rows of its rule columns where the caller has them (``LeafMatrix.columns``)."""
    if loss.link in GLMS:
        return _newton_refit(matrix, y, sample_weight, np.flatnonzero(weights), len(weights), loss, grouped)
    y = np.asarray(y, dtype=np.float64)
    s = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    support = np.flatnonzero(weights)
    polished = np.zeros(len(weights))
    mean_y = float(s @ y / s.sum())
    if not len(support):
        return polished, mean_y
    Z = matrix.columns(support, grouped)
    weighted = Z.multiply(s[:, None]).tocsc()
    column_sums = np.asarray(weighted.sum(axis=0)).ravel()
    gram = (Z.T @ weighted).toarray()
    ridge = POLISH_RIDGE * np.diag(gram)
    gram -= np.outer(column_sums, column_sums) / s.sum()
    gram[np.diag_indices_from(gram)] += ridge
    rhs = weighted.T @ (y - mean_y)
    polished[support] = np.linalg.lstsq(gram, rhs, rcond=None)[0]
    intercept = mean_y - float(column_sums @ polished[support]) / s.sum()
    return polished, intercept


def _newton_refit(matrix, y, sample_weight, support, n_leaves, loss, grouped, max_steps=50):
    """(weights on ``support``, intercept) of the ridge-regularised weighted GLM of the link of ``loss`` by Newton's
    method."""
    y = np.asarray(y, dtype=np.float64)
    s = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    design = sp.hstack([np.ones((len(y), 1)), matrix.columns(support, grouped)], format="csc")
    glm = GLMS[loss.link]
    kappa = loss.curvature_scale(y, s)
    ridge = np.concatenate([[0.0], POLISH_RIDGE * kappa * np.asarray(design[:, 1:].power(2).T @ s).ravel()])
    mean = float(s @ y / s.sum())
    beta = np.zeros(len(support) + 1)
    beta[0] = glm.intercept(mean)

    def objective(coef):
        score = design @ coef
        return float(s @ (glm.cumulant(score) - y * score)) + 0.5 * float(ridge @ coef**2)

    current = objective(beta)
    for _ in range(max_steps):
        score = design @ beta
        p = glm.mean(score)
        curvature = glm.variance(p)
        gradient = design.T @ (s * (p - y)) + ridge * beta
        hessian = (design.T @ design.multiply((s * curvature)[:, None])).toarray() + np.diag(ridge)
        step = np.linalg.lstsq(hessian, gradient, rcond=None)[0]
        scale = 1.0
        while scale > 1e-8 and objective(beta - scale * step) > current:
            scale *= 0.5
        if scale <= 1e-8:
            break
        beta, previous, current = beta - scale * step, current, objective(beta - scale * step)
        if previous - current <= 1e-12 * max(abs(current), 1.0):
            break
    polished = np.zeros(n_leaves)
    polished[support] = beta[1:]
    return polished, float(beta[0])
