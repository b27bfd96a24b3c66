"""Warm-started regularization paths over the sparsity parameter lambda_s."""

import time
from dataclasses import asdict, dataclass, field

import numpy as np
import scipy.sparse as sp

from . import gbcd
from .leaf_matrix import count_antecedents
from .penalties import PENALTY_CODES

MCP_SCALINGS = ("block", "plain")
# Fusion as a multiple of lambda_s where the caller gives none (estimator, service): the paper's 0.5;
# bench/results/quality.md found it neutral under 15 rules and better at 25-50 rules on deeper forests.
DEFAULT_FUSION_RATIO = 0.5
BLOCK_SELECTIONS = {"greedy": gbcd.GREEDY, "cyclic": gbcd.CYCLIC}


@dataclass
class PathStep:
    """What one lambda step of a path produced."""

    index: int
    lambda_s: float
    lambda_f: float
    n_rules: int
    n_trees: int
    n_antecedents: int | None
    train_loss: float
    val_loss: float | None
    objective: float
    n_iter: int
    converged: bool
    seconds: float

    def to_dict(self):
        return asdict(self)


@dataclass
class PathResult:
    """Every step of a path, the weights of each step (sparse, steps x R) and the intercepts."""

    steps: list
    coef_path: sp.csr_matrix
    intercepts: np.ndarray
    lambda_max: float
    stop_reason: str = "completed"
    settings: dict = field(default_factory=dict)

    def coef(self, k):
        """Dense weights (R,) of step ``k``."""
        return np.asarray(self.coef_path[k].toarray()).ravel()

    def select(self, max_rules=None):
        """Index of the step with the lowest validation loss (train loss without one) within the budget."""
        eligible = [s for s in self.steps if max_rules is None or s.n_rules <= max_rules]
        if not eligible:
            raise ValueError(f"no step of the path has at most max_rules={max_rules} rules")
        has_val = all(s.val_loss is not None for s in eligible)
        return min(eligible, key=lambda s: (s.val_loss if has_val else s.train_loss, s.index)).index


def lambda_grid(lambda_max, n_lambdas, lambda_min_ratio):
    """Geometric grid from ``lambda_max`` down to ``lambda_min_ratio * lambda_max``."""
    if n_lambdas < 1:
        raise ValueError(f"n_lambdas must be at least 1, got {n_lambdas}")
    if not 0.0 < lambda_min_ratio < 1.0:
        raise ValueError(f"lambda_min_ratio must be in (0, 1), got {lambda_min_ratio}")
    return lambda_max * np.geomspace(1.0, lambda_min_ratio, n_lambdas)


def _validated_sample_weight(sample_weight, n):
    if sample_weight is None:
        return np.ones(n)
    sample_weight = np.asarray(sample_weight, dtype=np.float64)
    if sample_weight.shape != (n,):
        raise ValueError(f"sample_weight must have shape ({n},), got {sample_weight.shape}")
    if not np.all(np.isfinite(sample_weight)) or np.any(sample_weight < 0):
        raise ValueError("sample_weight must be finite and non-negative")
    total = sample_weight.sum()
    if total <= 0:
        raise ValueError("sample_weight must have a positive sum")
    return sample_weight * (n / total)


def _resolve_fusion(lambda_f, fusion_ratio):
    if lambda_f is not None and fusion_ratio is not None:
        raise ValueError("give either lambda_f (fixed) or fusion_ratio (lambda_f = ratio * lambda_s), not both")
    for name, value in (("lambda_f", lambda_f), ("fusion_ratio", fusion_ratio)):
        if value is not None and not (np.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a finite non-negative number, got {value}")
    return lambda_f, fusion_ratio


class ProblemData:
    """Per-leaf constants of the problem on one training set: weighted counts, curvatures, block constants."""

    def __init__(self, matrix, sample_weight, penalty, gamma, mcp_scaling):
        self.values = np.ascontiguousarray(matrix.values, dtype=np.float64)
        self.offsets = np.ascontiguousarray(matrix.offsets, dtype=np.int64)
        self.leaf_rows, self.leaf_ptr = gbcd.sort_rows_by_leaf(np.ascontiguousarray(matrix.leaves), self.offsets)
        self.leaf_weight = matrix.column_counts(sample_weight)
        self.curvature = self.leaf_weight * self.values**2
        sizes = np.diff(self.offsets)
        if np.any(sizes < 1):
            raise ValueError("every tree must have at least one leaf")
        self.lipschitz = np.maximum.reduceat(self.curvature, self.offsets[:-1])
        self.code = PENALTY_CODES[penalty]
        if penalty == "mcp" and mcp_scaling == "block":
            # the paper's MCP thresholding operator: per-block concavity gamma / L_t (threshold gamma*lam/L_t)
            safe = np.where(self.lipschitz > 0, self.lipschitz, 1.0)
            self.block_gamma = gamma / safe
        else:
            self.block_gamma = np.full(len(sizes), float(gamma))
        self.leaf_gamma = np.repeat(self.block_gamma, sizes)


def fit_path(matrix, y, *, penalty="mcp", gamma=1.1, mcp_scaling="block", lambda_f=None, fusion_ratio=None,
             lambdas=None, n_lambdas=100, lambda_min_ratio=1e-3, max_rules=None, tol=1e-4,
             max_iter=10_000, block_selection="greedy", inner_iters=3, sample_weight=None,
             val_matrix=None, y_val=None, leaf_ancestors=None, callback=None):
    """Solve the FIRE problem along a decreasing, warm-started grid of lambda_s.

    ``matrix`` is a :class:`solver.forest.LeafMatrix` (M, implicit). ``tol`` is relative to lambda_max: a
    step stops when no steepest-direction entry and no block's proximal move exceeds ``tol * lambda_max``.
    ``max_iter`` caps the passes (working-set passes and full sweeps) per step (``PathStep.converged`` is
    False where it was hit).
    ``callback(step)`` runs after every step; a truthy return stops the path (progress, cancel, deadline).
    The path also stops after the first step whose rule count passes ``max_rules``.
    """
    if penalty not in PENALTY_CODES:
        raise ValueError(f"penalty must be one of {sorted(PENALTY_CODES)}, got {penalty!r}")
    if mcp_scaling not in MCP_SCALINGS:
        raise ValueError(f"mcp_scaling must be one of {MCP_SCALINGS}, got {mcp_scaling!r}")
    if block_selection not in BLOCK_SELECTIONS:
        raise ValueError(f"block_selection must be one of {sorted(BLOCK_SELECTIONS)}, got {block_selection!r}")
    if penalty == "mcp" and not (np.isfinite(gamma) and gamma > (1.0 if mcp_scaling == "block" else 0.0)):
        raise ValueError(f"gamma must be > 1 for the MCP penalty (> 0 in plain scaling), got {gamma}")
    if not (tol > 0):
        raise ValueError(f"tol must be positive, got {tol}")
    if max_rules is not None and max_rules < 0:
        raise ValueError(f"max_rules must be non-negative, got {max_rules}")
    lambda_f, fusion_ratio = _resolve_fusion(lambda_f, fusion_ratio)

    y = np.ascontiguousarray(y, dtype=np.float64)
    n = matrix.leaves.shape[0]
    if y.shape != (n,):
        raise ValueError(f"y must have shape ({n},), got {y.shape}")
    if not np.all(np.isfinite(y)):
        raise ValueError("y contains NaN or infinite values")
    if (val_matrix is None) != (y_val is None):
        raise ValueError("give both val_matrix and y_val, or neither")
    if y_val is not None:
        y_val = np.asarray(y_val, dtype=np.float64)
        if y_val.shape != (val_matrix.leaves.shape[0],):
            raise ValueError("y_val must have one value per row of val_matrix")

    weights = _validated_sample_weight(sample_weight, n)
    data = ProblemData(matrix, weights, penalty, gamma, mcp_scaling)
    n_leaves = data.values.shape[0]

    w = np.zeros(n_leaves)
    intercept = np.zeros(1)
    residual = y.copy()
    leaf_sums = np.empty(n_leaves)
    gbcd.compute_leaf_sums(data.leaf_rows, data.leaf_ptr, weights, residual, leaf_sums)
    mean_y = np.dot(weights, y) / weights.sum()
    lambda_max = float(np.max(np.abs(data.values * (leaf_sums - mean_y * data.leaf_weight)), initial=0.0))

    if lambdas is None:
        grid = lambda_grid(lambda_max, n_lambdas, lambda_min_ratio) if lambda_max > 0 else np.zeros(1)
    else:
        grid = np.sort(np.asarray(lambdas, dtype=np.float64).ravel())[::-1]
        if grid.size == 0 or not np.all(np.isfinite(grid)) or np.any(grid < 0):
            raise ValueError("lambdas must be a non-empty list of finite non-negative numbers")
    tol_abs = tol * max(lambda_max, np.finfo(float).tiny)
    selection = BLOCK_SELECTIONS[block_selection]

    steps, rows, intercepts = [], [], []
    stop_reason = "completed"
    for index, lam in enumerate(grid):
        started = time.perf_counter()
        lam_f = float(lambda_f if lambda_f is not None else (fusion_ratio or 0.0) * lam)
        n_iter, converged = gbcd.solve(
            w, intercept, residual, data.leaf_rows, data.leaf_ptr, data.values, data.offsets, weights,
            data.leaf_weight, data.curvature, data.lipschitz, float(lam), data.block_gamma, data.leaf_gamma,
            data.code, lam_f, tol_abs, max_iter, selection, inner_iters)
        objective = gbcd.objective_value(w, residual, weights, intercept[0], data.offsets, float(lam),
                                         data.leaf_gamma, data.code, lam_f)
        step = _record_step(index, lam, lam_f, w, intercept[0], residual, weights, data, objective, n_iter,
                            converged, val_matrix, y_val, leaf_ancestors, time.perf_counter() - started)
        nonzero = np.flatnonzero(w)
        rows.append((nonzero, w[nonzero].copy()))
        intercepts.append(intercept[0])
        steps.append(step)
        if callback is not None and callback(step):
            stop_reason = "callback"
            break
        if max_rules is not None and step.n_rules > max_rules:
            stop_reason = "max_rules"
            break

    indptr = np.cumsum([0] + [len(idx) for idx, _ in rows])
    indices = np.concatenate([idx for idx, _ in rows]) if rows else np.zeros(0, dtype=np.int64)
    coefs = np.concatenate([vals for _, vals in rows]) if rows else np.zeros(0)
    coef_path = sp.csr_matrix((coefs, indices, indptr), shape=(len(rows), n_leaves))
    settings = dict(penalty=penalty, gamma=gamma, mcp_scaling=mcp_scaling, lambda_f=lambda_f,
                    fusion_ratio=fusion_ratio, tol=tol, block_selection=block_selection)
    return PathResult(steps, coef_path, np.asarray(intercepts), lambda_max, stop_reason, settings)


def _record_step(index, lam, lam_f, w, intercept, residual, weights, data, objective, n_iter, converged,
                 val_matrix, y_val, leaf_ancestors, seconds):
    active = w != 0
    per_tree = np.add.reduceat(active.astype(np.int64), data.offsets[:-1])
    train_residual = residual - intercept
    train_loss = float(np.dot(weights, train_residual**2) / weights.sum())
    val_loss = None
    if val_matrix is not None:
        val_loss = float(np.mean((y_val - intercept - val_matrix.matvec(w)) ** 2))
    n_antecedents = None
    if leaf_ancestors is not None:
        n_antecedents = int(count_antecedents(active, *leaf_ancestors))
    return PathStep(index=index, lambda_s=float(lam), lambda_f=lam_f, n_rules=int(active.sum()),
                    n_trees=int(np.count_nonzero(per_tree)), n_antecedents=n_antecedents,
                    train_loss=train_loss, val_loss=val_loss, objective=float(objective), n_iter=int(n_iter),
                    converged=bool(converged), seconds=seconds)
