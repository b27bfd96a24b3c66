"""The two bundles the GBCD kernels (``solver.gbcd``) work on.

``Problem`` holds what is fixed per training set and penalty; ``State`` the point being optimised, updated
in place by the kernels and carried from one lambda of a path to the next (warm start). Both are typed
named tuples of arrays and scalars: numba passes them as plain structs and caches the kernels that take
them (``cache=True``), which a jitclass would not allow.
"""

from typing import NamedTuple

import numpy as np
from numba import njit

from ._tree_kernels import group_rows
from .losses import get_loss, loss_of_code
from .losses.base import unchecked
from .penalties import MCP, penalty_code


class Problem(NamedTuple):
    """Per-column and per-block constants of the FIRE problem on one training set (R columns, T blocks, n rows).

    Columns ("leaves" in the kernels) are the candidate rules, then the linear terms (``solver.candidates``).
    Column j of M is ``v_j e_ij`` on its rows ``leaf_rows[leaf_ptr[j]:leaf_ptr[j+1]]`` and zero elsewhere, with
    ``e_ij = 1`` for a rule and, for a linear term ``j >= first_linear`` (every row, in order), its value scaled
    into [-1, 1]: ``e_ij = linear_values[p - linear_start]`` at position p, ``v_j`` the largest |value|. So every
    column's entries are at most ``|v_j|`` and the kernels read ``e`` only for linear columns. A block is a tree
    (leaf candidates), a tree level (node candidates) or one linear term; a row may be in no column of a block.
    """

    leaf_rows: np.ndarray  # (nnz,) int32, rows grouped by column: column j's are leaf_rows[leaf_ptr[j]:leaf_ptr[j+1]]
    leaf_ptr: np.ndarray  # (R+1,) int64
    leaves: np.ndarray  # (n, T_rules) the rule blocks' local column of each row (solver.leaf_matrix), row by row
    values: np.ndarray  # (R,) column scales v_j
    offsets: np.ndarray  # (T+1,) int64, block t owns the columns offsets[t]:offsets[t+1]
    y: np.ndarray  # (n,) the response (squared loss), 0/1 labels (logistic), counts or rates (Poisson)
    sample_weight: np.ndarray  # (n,) s, normalised by the caller to sum to n
    weight_total: float  # sum_i s_i
    target_total: float  # sum_i s_i y_i
    leaf_weight: np.ndarray  # (R,) S_j = sum_{i in column j} s_i e_ij, the weighted row count of a rule
    leaf_target: np.ndarray  # (R,) sum_{i in column j} s_i y_i e_ij (the Poisson leaf minimisation's b_j)
    curvature: np.ndarray  # (R,) c_j = kappa v_j^2 sum s_i e_ij^2: the loss's curvature in w_j, at most
    lipschitz: np.ndarray  # (T,) L_t = max_{j in t} c_j
    block_gamma: np.ndarray  # (T,) effective MCP concavity of each tree
    leaf_gamma: np.ndarray  # (R,) the same, repeated per leaf
    penalty: int  # solver.penalties.L1 or MCP
    loss: int  # the loss's code (solver.losses: Loss.code), which solver.losses.kernels dispatches
    first_linear: int  # columns from here on are linear terms (R where there are none)
    linear_start: int  # leaf_ptr[first_linear]: where the linear columns' positions start
    linear_values: np.ndarray  # (p*n,) e_ij of the linear columns, position by position

    @classmethod
    def from_leaf_matrix(cls, matrix, y, sample_weight, loss, penalty, gamma, mcp_scaling):
        """The problem of ``matrix`` (a LeafMatrix) and targets ``y`` with normalised ``sample_weight``, loss
        name and penalty name.

        ``mcp_scaling="block"`` is the paper's MCP thresholding operator, per-tree concavity ``gamma / L_t``
        (threshold ``gamma * lam / L_t``); ``"plain"`` (and L1, which ignores it) one ``gamma`` for all.
        """
        code = penalty_code(penalty)
        loss = get_loss(loss) if isinstance(loss, str) else loss  # a name, or a configured Loss (PathSpec.path_loss)
        sample_weight = np.ascontiguousarray(sample_weight, dtype=np.float64)
        y = np.ascontiguousarray(y, dtype=np.float64)
        rule_offsets = np.ascontiguousarray(matrix.offsets, dtype=np.int64)
        if np.any(np.diff(rule_offsets) < 1):
            raise ValueError("every block must have at least one column")
        leaves = np.ascontiguousarray(matrix.leaves)
        leaf_rows, leaf_ptr = sort_rows_by_leaf(leaves, rule_offsets)
        values = np.ascontiguousarray(matrix.values, dtype=np.float64)
        first_moment = matrix.column_counts(sample_weight)
        target = matrix.column_counts(sample_weight * y)
        second_moment = first_moment
        linear_values = np.zeros(0)
        n_rules, n_rows, n_linear = values.shape[0], y.shape[0], matrix.n_linear
        if n_linear:
            peak = np.abs(matrix.linear).max(axis=0)
            entries = matrix.linear / np.where(peak > 0, peak, 1.0)
            linear_values = np.ascontiguousarray(entries.T).ravel()
            leaf_rows = np.concatenate([leaf_rows, np.tile(np.arange(n_rows, dtype=np.int32), n_linear)])
            leaf_ptr = np.concatenate([leaf_ptr, leaf_ptr[-1] + n_rows * np.arange(1, n_linear + 1)])
            values = np.concatenate([values, peak])
            rule_offsets = np.concatenate([rule_offsets, rule_offsets[-1] + np.arange(1, n_linear + 1)])
            first_moment = np.concatenate([first_moment, sample_weight @ entries])
            target = np.concatenate([target, (sample_weight * y) @ entries])
            second_moment = np.concatenate([second_moment, sample_weight @ entries**2])
        offsets = rule_offsets
        curvature = loss.curvature_scale(y, sample_weight) * second_moment * values**2
        lipschitz = np.maximum.reduceat(curvature, offsets[:-1])
        if code == MCP and mcp_scaling == "block":
            block_gamma = gamma / np.where(lipschitz > 0, lipschitz, 1.0)
        else:
            block_gamma = np.full(len(offsets) - 1, float(gamma))
        return cls(
            leaf_rows,
            leaf_ptr,
            leaves,
            values,
            offsets,
            y,
            sample_weight,
            float(sample_weight.sum()),
            float(np.dot(sample_weight, y)),
            np.ascontiguousarray(first_moment),
            np.ascontiguousarray(target),
            curvature,
            lipschitz,
            block_gamma,
            np.repeat(block_gamma, np.diff(offsets)),
            code,
            loss.code,
            n_rules,
            int(leaf_ptr[n_rules]),
            linear_values,
        )


class State(NamedTuple):
    """The point being optimised, updated in place: every weight change keeps every field exact
    (each loss module of ``solver.losses`` says what its residual, intercept and score are)."""

    w: np.ndarray  # (R,) leaf weights
    residual: np.ndarray  # (n,) y - M w without the intercept (squared), y - sigmoid(score) (logistic),
    #                       y - exp(score) (Poisson)
    intercept: np.ndarray  # (1,) b
    residual_sum: np.ndarray  # (1,) sum_i s_i residual_i: the squared loss's b times sum_i s_i, -d loss/d b
    score: np.ndarray  # (n,) b + M w (logistic, Poisson); empty for the squared loss, whose residual is linear in w
    gradient: np.ndarray  # (R,) every leaf's loss gradient at the last full-gradient check (solver.gbcd.solve_greedy)
    checked: np.ndarray  # (R+1,) w and b at that check; NaN before the first (see at_last_check)

    @classmethod
    def initial(cls, problem, loss=None):
        """Where a path starts: w = 0, the intercept-only model of the problem's loss (``Loss.initial_state``; ``loss``
        where it is configured, ``PathSpec.path_loss``)."""
        fields = (loss or loss_of_code(problem.loss)).initial_state(problem)
        return cls(*fields, *unchecked(fields[0]))


@njit(cache=True)
def at_last_check(state):
    """Whether the state's weights and intercept are, bit for bit, those of its last full-gradient check
    (:func:`mark_checked`), so that the gradient kept there is the gradient here. A path's solve ends at a check
    that finds the point stationary, and the next lambda's solve starts from that very point: its first check is
    this comparison, O(R), instead of a pass over every row of every tree. Each check first re-syncs the residual
    sum and fits the intercept (``solver.losses.kernels.sync_intercept``), which changes nothing at a point where it was
    just done; code that moves the state between solves changes its weights or its intercept."""
    w = state.w.ravel()
    n_weights = w.shape[0]
    return np.all(w == state.checked[:n_weights]) and np.all(state.intercept == state.checked[n_weights:])


@njit(cache=True)
def mark_checked(state):
    """Record the weights and intercept at which ``state.gradient`` was just computed."""
    w = state.w.ravel()
    state.checked[: w.shape[0]] = w
    state.checked[w.shape[0] :] = state.intercept


def sort_rows_by_leaf(leaves, offsets):
    """Per block, the rows grouped by column (a counting sort, stable; a row marked as in no column of a block,
    ``solver.leaf_matrix``, is left out): returns (leaf_rows (nnz,), leaf_ptr (R+1,))."""
    n_columns = int(offsets[-1])
    return group_rows(leaves, offsets, np.arange(n_columns), n_columns)
