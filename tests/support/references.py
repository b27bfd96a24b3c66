"""Exact references for the multinomial and Poisson FIRE objectives: each objective in numpy, and its convex
(L1) version solved by cvxpy on the exponential cone, to test the numba solver against.

Notation: ``M`` dense (n, R); ``offsets`` int (T+1,), tree t owns the columns offsets[t]:offsets[t+1] (its
leaves left to right); ``s`` (n,) sample weights, used as given (never renormalised); lam, lam_f >= 0. The
fusion term of a coefficient vector v is F(v) = sum_t sum_{offsets[t] <= j < offsets[t+1]-1} |v_{j+1} - v_j|
(neighbours inside one tree only; F of a matrix is F of each column, summed).

Multinomial (y integer codes 0..K-1; W (R, K), b (K,), Z = 1 b^T + M W, W_j the K-vector of rule j):

    sum_i s_i [logsumexp(Z_i) - Z_{i,y_i}] + lam sum_j ||W_j||_2 + lam_f sum_k F(W[:, k])

with MCP in place of the group norm: sum_j MCP(||W_j||_2; lam, gamma_j).

Poisson (y >= 0; w (R,), b scalar, eta = b + M w):

    sum_i s_i [exp(eta_i) - y_i eta_i] + lam ||w||_1 + lam_f F(w)

with MCP in place of the L1 norm: sum_j MCP(|w_j|; lam, gamma_j).

MCP(a; lam, g) = lam a - a^2 / (2 g) for a <= g lam, else g lam^2 / 2. b is unpenalised. The multinomial loss
is invariant to b -> b + c 1 (the solver returns b centered, sum_k b_k = 0) and to W_j -> W_j + c 1 (the
penalties are not, but at lam = 0 W is not unique: its rows are then whatever cvxpy gives). The solvers' value
is cvxpy's optimal value, which agrees with the numpy objective at the returned point to ~1e-15 relative.
"""

import itertools
import warnings

import numpy as np
from scipy.special import logsumexp

# Clarabel's settings, tried in turn until one ends OPTIMAL: gap and feasibility at 1e-10 (the optimum good to
# ~1e-10 relative), then its default 1e-8 (~1e-8); both with tighter iterative refinement, without which the
# interior point method stalls short of 1e-8 on some fused group problems
_REFINE = {
    "iterative_refinement_reltol": 1e-15,
    "iterative_refinement_abstol": 1e-15,
    "iterative_refinement_max_iter": 50,
}
CLARABEL_SETTINGS = (
    {**_REFINE, "tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10, "max_step_fraction": 0.9},
    _REFINE,
)


def fusion(offsets, V) -> float:
    """F(V): the absolute differences of neighbouring rows (leaves) inside each tree, over all columns."""
    V = np.asarray(V, dtype=float)
    return float(sum(np.abs(np.diff(V[start:stop], axis=0)).sum() for start, stop in itertools.pairwise(offsets)))


def mcp(a, lam: float, gamma) -> np.ndarray:
    """MCP(a; lam, gamma) elementwise for a >= 0 (gamma a scalar or one per element)."""
    a = np.asarray(a, dtype=float)
    return np.where(a <= gamma * lam, lam * a - a**2 / (2 * gamma), 0.5 * gamma * lam**2)


def mcp_prox(z, step: float, lam: float, gammas) -> np.ndarray:
    """The global minimiser of ``(u - z)^2 / (2 step) + MCP(u; lam, gammas)`` per coordinate (the proximal-gradient
    references' step): the firm threshold where the problem is convex (``step < gammas``), else the better of 0 and
    ``z``."""
    a, t = np.abs(z), step * lam
    convex = step / gammas < 1
    shrunk = np.sign(z) * (a - t) / np.where(convex, 1 - step / gammas, 1.0)
    firm = np.where(a <= t, 0.0, np.where(a <= gammas * lam, shrunk, z))
    return np.where(convex, firm, np.where(a**2 / 2 > step * gammas * lam**2 / 2, z, 0.0))


def multinomial_loss(M, y, s, W, b) -> float:
    Z = np.asarray(b, dtype=float)[None, :] + M @ W
    return float(s @ (logsumexp(Z, axis=1) - Z[np.arange(len(y)), y]))


def multinomial_objective(M, y, s, offsets, W, b, lam, lam_f) -> float:
    return multinomial_loss(M, y, s, W, b) + lam * float(np.linalg.norm(W, axis=1).sum()) + lam_f * fusion(offsets, W)


def multinomial_group_mcp_objective(M, y, s, offsets, W, b, lam, gamma_per_rule, lam_f) -> float:
    sparsity = float(mcp(np.linalg.norm(W, axis=1), lam, np.asarray(gamma_per_rule, dtype=float)).sum())
    return multinomial_loss(M, y, s, W, b) + sparsity + lam_f * fusion(offsets, W)


def poisson_loss(M, y, s, w, b) -> float:
    eta = b + M @ w
    return float(s @ (np.exp(eta) - y * eta))


def poisson_objective(M, y, s, offsets, w, b, lam, lam_f) -> float:
    return poisson_loss(M, y, s, w, b) + lam * float(np.abs(w).sum()) + lam_f * fusion(offsets, w)


def poisson_mcp_objective(M, y, s, offsets, w, b, lam, gamma_per_leaf, lam_f) -> float:
    sparsity = float(mcp(np.abs(w), lam, np.asarray(gamma_per_leaf, dtype=float)).sum())
    return poisson_loss(M, y, s, w, b) + sparsity + lam_f * fusion(offsets, w)


def _fusion_term(cp, offsets, V):
    pairs = [(start, stop) for start, stop in itertools.pairwise(offsets) if stop - start > 1]
    return sum(cp.sum(cp.abs(cp.diff(V[start:stop], axis=0))) for start, stop in pairs) if pairs else 0.0


def _solve(cp, cost) -> float:
    """Minimise ``cost`` with Clarabel where installed (CLARABEL_SETTINGS), else ECOS or SCS; the optimal value."""
    problem = cp.Problem(cp.Minimize(cost))
    installed = cp.installed_solvers()
    if "CLARABEL" in installed:
        attempts = [("CLARABEL", settings) for settings in CLARABEL_SETTINGS]
    elif "ECOS" in installed:
        attempts = [("ECOS", {"abstol": 1e-10, "reltol": 1e-10, "feastol": 1e-10, "max_iters": 500})]
    else:
        attempts = [("SCS", {"eps_abs": 1e-9, "eps_rel": 1e-9, "max_iters": 500_000})]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "solution may be inaccurate": the next attempt follows
        for solver, settings in attempts:
            problem.solve(solver=solver, **settings)
            if problem.status == cp.OPTIMAL:
                return float(problem.value)
    raise RuntimeError(f"the reference solve ended {problem.status}")


def solve_multinomial(M, y, s, offsets, lam, lam_f, n_classes):
    """The group-L1 + per-class-fusion multinomial optimum: (W (R, K), b (K,) centered, cvxpy's optimal value)."""
    import cvxpy as cp

    n, R = M.shape
    W, b = cp.Variable((R, n_classes)), cp.Variable(n_classes)
    Z = np.ones((n, 1)) @ cp.reshape(b, (1, n_classes), order="C") + M @ W
    observed = np.zeros((n, n_classes))
    observed[np.arange(n), y] = s  # s_i at (i, y_i): sum of s_i Z_{i,y_i} is <observed, Z>
    loss = s @ cp.log_sum_exp(Z, axis=1) - cp.sum(cp.multiply(observed, Z))
    cost = loss + lam * cp.sum(cp.norm(W, 2, axis=1)) + lam_f * _fusion_term(cp, offsets, W)
    value = _solve(cp, cost)
    return W.value, b.value - b.value.mean(), value


def solve_poisson(M, y, s, offsets, lam, lam_f):
    """The L1 + fusion Poisson optimum: (w (R,), b, cvxpy's optimal value)."""
    import cvxpy as cp

    w, b = cp.Variable(M.shape[1]), cp.Variable()
    eta = b + M @ w
    cost = s @ cp.exp(eta) - (s * y) @ eta + lam * cp.norm1(w) + lam_f * _fusion_term(cp, offsets, w)
    value = _solve(cp, cost)
    return w.value, float(b.value), value
