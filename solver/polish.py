"""Polish: refit the weights of the rules a path step selected, without the penalties, by the path's own loss.

The penalties choose *which* leaves become rules; they also shrink the chosen weights (L1 everywhere, MCP
below ``gamma * lambda_s``, fusion by pulling neighbours together). Polishing keeps the selection and replaces
the weights (and the intercept, where the loss has one) by the fit of the loss itself on the training rows, with a
tiny ridge ``POLISH_RIDGE * c_j`` on each weight (``c_j = kappa S_j v_j^2``, the leaf's curvature with the loss's
curvature scale kappa, ``Loss.curvature_scale``), so that collinear rules, e.g. the two children of a split next
to the intercept, get one small solution. Rules, antecedents and predictions' structure are those of the step;
only the amounts change.

How a loss refits is its own (``Loss.refit``): the squared loss by :func:`least_squares` (weighted least squares,
solved by least squares, so even a rule whose column is constant has one solution); every other loss that allows
polish by :func:`likelihood_newton`, Newton's method on the loss's own value (``Loss.loss_total``), gradient and
Hessian in the selected weights (``Loss.weight_derivatives``: Cox's couples the rows of each risk set), each step
halved until the ridge-penalised loss falls. A loss that cannot be refitted right refuses ``polish=True``
(``Loss.polish_refusal``, checked by ``solver.spec.PathSpec``).

Cost per step with ``k`` rules: O(n k) to build the selected columns, O(nnz k) for their Gram matrix and
O(k^3) for the solve; a Newton refit pays that per Newton step (a handful), Cox's Hessian O(n k^2) more.
"""

import numpy as np
import scipy.sparse as sp

POLISH_RIDGE = 1e-6
NEWTON_STEPS = 50  # the most Newton steps of a likelihood refit (each lowers a convex objective)


def polish(matrix, y, sample_weight, weights, loss, grouped=None) -> tuple[np.ndarray, float]:
    """(weights refitted on the nonzero entries of ``weights``, intercept) on the training rows, by the refit of
    ``loss`` (a ``solver.losses.Loss``: ``Loss.refit``): ``matrix`` a LeafMatrix, ``sample_weight`` (n,) or None,
    ``grouped`` the rows of its rule columns where the caller has them (``LeafMatrix.columns``)."""
    y = np.asarray(y, dtype=np.float64)
    s = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    support = np.flatnonzero(weights)
    polished = np.zeros(len(weights))
    polished[support], intercept = loss.refit(matrix.columns(support, grouped), y, s)
    return polished, intercept


def least_squares(columns, y, s) -> tuple[np.ndarray, float]:
    """(weights of ``columns`` (sparse (n, k)), intercept) of the weighted least-squares fit of ``y`` with row
    weights ``s`` and the tiny ridge on each weight (the intercept unpenalised): the squared loss's refit."""
    mean_y = float(s @ y / s.sum())
    if not columns.shape[1]:
        return np.zeros(0), mean_y
    weighted = columns.multiply(s[:, None]).tocsc()
    column_sums = np.asarray(weighted.sum(axis=0)).ravel()
    gram = (columns.T @ weighted).toarray()
    ridge = POLISH_RIDGE * np.diag(gram)
    gram -= np.outer(column_sums, column_sums) / s.sum()
    gram[np.diag_indices_from(gram)] += ridge
    rhs = weighted.T @ (y - mean_y)
    coef = np.linalg.lstsq(gram, rhs, rcond=None)[0]
    return coef, mean_y - float(column_sums @ coef) / s.sum()


def likelihood_newton(loss, columns, y, s) -> tuple[np.ndarray, float]:
    """(weights of ``columns`` (sparse (n, k)), intercept: 0 where ``loss.has_intercept`` is False) minimising
    ``loss.loss_total`` on rows with targets ``y`` and weights ``s``, plus the tiny ridge on each weight, by Newton's
    method from the intercept-only model, each step halved until that objective falls; it stops when a step lowers
    it by no more than 1e-12 relative."""
    n_rows, k = columns.shape
    if loss.has_intercept:
        design = sp.hstack([np.ones((n_rows, 1)), columns], format="csc")
        start = [loss.initial_intercept(y, s)]
    else:
        design, start = sp.csc_matrix(columns), []
    if not design.shape[1]:
        return np.zeros(0), 0.0
    first = len(start)  # the weights' position in the coefficients
    kappa = loss.curvature_scale(y, s)
    ridge = np.concatenate(
        [np.zeros(first), POLISH_RIDGE * kappa * np.asarray(design[:, first:].power(2).T @ s).ravel()]
    )
    beta = np.concatenate([start, np.zeros(k)])

    def objective(coef):
        return loss.loss_total(y, design @ coef, s) + 0.5 * float(ridge @ coef**2)

    current = objective(beta)
    for _ in range(NEWTON_STEPS):
        gradient, hessian = loss.weight_derivatives(y, design @ beta, s, design)
        if not (np.all(np.isfinite(gradient)) and np.all(np.isfinite(hessian))):
            break  # scores past the loss's floating-point range: no step from here is to be trusted
        step = np.linalg.lstsq(hessian + np.diag(ridge), gradient + ridge * beta, rcond=None)[0]
        scale, value = 1.0, objective(beta - step)
        while scale > 1e-8 and not value <= current:  # a NaN value is no decrease either
            scale *= 0.5
            value = objective(beta - scale * step)
        if scale <= 1e-8:
            break
        beta, previous, current = beta - scale * step, current, value
        if previous - current <= 1e-12 * max(abs(current), 1.0):
            break
    return beta[first:], float(beta[0]) if first else 0.0
