"""Penalties of the FIRE objective and their proximal operators (numba kernels).

The sparsity penalty is applied coordinate-wise and is either

* ``L1``: ``lam * |w|``, or
* ``MCP`` (paper eq. 4): ``lam*|w| - w**2 / (2*gamma)`` for ``|w| <= gamma*lam`` and ``gamma*lam**2 / 2``
  beyond. The concavity ``gamma`` handed to these kernels is the *effective* one of the coordinate, decided
  per tree by ``solver.problem.Problem.from_leaf_matrix`` (the paper's per-block concavity ``gamma / L_t``,
  or a plain global ``gamma``).

As in skglm, a penalty is its value, its prox (the global minimizer of ``curvature/2 * (w - z)**2 + P(w)``)
and its subdifferential (an interval). numba has no cacheable penalty objects, so the kernels carry an
integer code (``L1``, ``MCP``) and call the ``penalty_*`` dispatchers, which raise on a code they do not
know: no kernel ever treats an unknown code as one of the penalties.

The fusion penalty of one tree is ``lam_f * sum_j |w_{j+1} - w_j|`` over its leaves in left-to-right order;
its proximal operator is the 1-D fused lasso signal approximator, solved exactly by Johnson's (2013)
linear-time dynamic program in :func:`fused_lasso_prox`.
"""

import numpy as np
from numba import njit

L1 = 0
MCP = 1

PENALTY_CODES = {"l1": L1, "mcp": MCP}
# the fusion prox's weight of a leaf held at zero, against 1 for the others: it moves by lam_f / PINNED_WEIGHT at most
PINNED_WEIGHT = 1e9


def penalty_code(name):
    """The kernels' code of a penalty name; an unknown name is a ValueError."""
    if name not in PENALTY_CODES:
        raise ValueError(f"penalty must be one of {sorted(PENALTY_CODES)}, got {name!r}")
    return PENALTY_CODES[name]


@njit(cache=True)
def soft_threshold(z, threshold):
    if z > threshold:
        return z - threshold
    if z < -threshold:
        return z + threshold
    return 0.0


@njit(cache=True)
def l1_subdifferential(w, lam):
    if w == 0.0:
        return -lam, lam
    g = lam if w > 0.0 else -lam
    return g, g


@njit(cache=True)
def mcp_value(w, lam, gamma):
    """MCP penalty of one coordinate; correct for negative ``w`` (the penalty is even in ``w``)."""
    a = abs(w)
    if a <= gamma * lam:
        return lam * a - a * a / (2.0 * gamma)
    return 0.5 * gamma * lam * lam


@njit(cache=True)
def mcp_prox(z, curvature, lam, gamma):
    """Global minimizer of ``curvature/2 * (w - z)**2 + MCP(w)``.

    With ``curvature * gamma <= 1`` the problem is not convex; then the minimizer is either 0 or the
    unpenalized-region point ``sign(z) * max(|z|, gamma*lam)``, whichever is lower (ties go to 0).
    """
    a = abs(z)
    s = 1.0 if z >= 0.0 else -1.0
    if curvature * gamma > 1.0:
        if a <= lam / curvature:
            return 0.0
        if a <= gamma * lam:
            return s * (a - lam / curvature) / (1.0 - 1.0 / (gamma * curvature))
        return z
    outer = max(a, gamma * lam)
    outer_value = 0.5 * curvature * (outer - a) ** 2 + 0.5 * gamma * lam * lam
    if outer_value < 0.5 * curvature * a * a:
        return s * outer
    return 0.0


@njit(cache=True)
def mcp_subdifferential(w, lam, gamma):
    if w == 0.0:
        return -lam, lam
    if abs(w) <= gamma * lam:
        g = (lam if w > 0.0 else -lam) - w / gamma
        return g, g
    return 0.0, 0.0


@njit(cache=True)
def penalty_value(w, lam, gamma, code):
    if code == L1:
        return lam * abs(w)
    if code == MCP:
        return mcp_value(w, lam, gamma)
    raise ValueError("unknown penalty code")


@njit(cache=True)
def penalty_prox(z, curvature, lam, gamma, code):
    """Global minimizer of ``curvature/2 * (w - z)**2 + penalty(w)``."""
    if code == L1:
        return soft_threshold(z, lam / curvature)
    if code == MCP:
        return mcp_prox(z, curvature, lam, gamma)
    raise ValueError("unknown penalty code")


@njit(cache=True)
def penalty_subdifferential(w, lam, gamma, code):
    """Interval ``[lo, hi]`` of the (Clarke) subdifferential of the sparsity penalty at ``w``."""
    if code == L1:
        return l1_subdifferential(w, lam)
    if code == MCP:
        return mcp_subdifferential(w, lam, gamma)
    raise ValueError("unknown penalty code")


@njit(cache=True)
def prox_is_convex(curvature, gamma, code):
    """Whether ``curvature/2 * (w - z)**2 + penalty(w)`` is convex: then its prox is 0 exactly for
    ``|z| <= lam / curvature``, as the soft threshold's."""
    if code == L1:
        return True
    if code == MCP:
        return curvature * gamma > 1.0
    raise ValueError("unknown penalty code")


@njit(cache=True)
def fused_lasso_prox(z, lam, out):
    """Johnson's dynamic program: ``out = argmin_b 1/2 ||b - z||^2 + lam * sum_j |b_{j+1} - b_j|``.

    O(len(z)) time and memory. ``z`` and ``out`` may not alias.
    """
    n = z.shape[0]
    if n == 0:
        return
    if n == 1 or lam <= 0.0:
        for i in range(n):
            out[i] = z[i]
        return
    knots = np.empty(2 * n)
    slope = np.empty(2 * n)
    offset = np.empty(2 * n)
    lower_knot = np.empty(n - 1)
    upper_knot = np.empty(n - 1)

    lower_knot[0] = z[0] - lam
    upper_knot[0] = z[0] + lam
    left = n - 1
    right = n
    knots[left] = lower_knot[0]
    knots[right] = upper_knot[0]
    slope[left] = 1.0
    offset[left] = lam - z[0]
    slope[right] = -1.0
    offset[right] = z[0] + lam
    first_slope = 1.0
    first_offset = -z[1] - lam
    last_slope = -1.0
    last_offset = z[1] - lam

    for k in range(1, n - 1):
        # lowest knot where the message derivative exceeds -lam: the next lower back-pointer
        lo_slope = first_slope
        lo_offset = first_offset
        lo = left
        while lo <= right and lo_slope * knots[lo] + lo_offset <= -lam:
            lo_slope += slope[lo]
            lo_offset += offset[lo]
            lo += 1
        # highest knot where the derivative is below lam: the next upper back-pointer
        hi_slope = last_slope
        hi_offset = last_offset
        hi = right
        while hi >= lo and -hi_slope * knots[hi] - hi_offset >= lam:
            hi_slope += slope[hi]
            hi_offset += offset[hi]
            hi -= 1
        lower_knot[k] = (-lam - lo_offset) / lo_slope
        left = lo - 1
        knots[left] = lower_knot[k]
        upper_knot[k] = (lam + hi_offset) / (-hi_slope)
        right = hi + 1
        knots[right] = upper_knot[k]
        slope[left] = lo_slope
        offset[left] = lo_offset + lam
        slope[right] = hi_slope
        offset[right] = hi_offset + lam
        first_slope = 1.0
        first_offset = -z[k + 1] - lam
        last_slope = -1.0
        last_offset = z[k + 1] - lam

    lo = left
    while lo <= right and first_slope * knots[lo] + first_offset <= 0.0:
        first_slope += slope[lo]
        first_offset += offset[lo]
        lo += 1
    out[n - 1] = -first_offset / first_slope
    for k in range(n - 2, -1, -1):
        if out[k + 1] > upper_knot[k]:
            out[k] = upper_knot[k]
        elif out[k + 1] < lower_knot[k]:
            out[k] = lower_knot[k]
        else:
            out[k] = out[k + 1]


@njit(cache=True)
def weighted_fused_lasso_prox(z, weights, lam, out):
    """``out = argmin_b 1/2 sum_j weights_j (b_j - z_j)^2 + lam * sum_j |b_{j+1} - b_j|`` (positive weights).

    Johnson's dynamic program as :func:`fused_lasso_prox`, each coordinate's message slope its weight (the
    weighted form of Arnold and Tibshirani's ``tf_dp_weight``). A coordinate held at ``z_j`` (a leaf that must stay
    at zero) is one of weight far above the others': its value moves by ``lam / weight`` at most, and its
    neighbours see ``lam * |b_j - z_j|`` where the unweighted prox would fuse them with it. O(len(z)).
    """
    n = z.shape[0]
    if n == 0:
        return
    if n == 1 or lam <= 0.0:
        for i in range(n):
            out[i] = z[i]
        return
    knots = np.empty(2 * n)
    slope = np.empty(2 * n)
    offset = np.empty(2 * n)
    lower_knot = np.empty(n - 1)
    upper_knot = np.empty(n - 1)

    lower_knot[0] = z[0] - lam / weights[0]
    upper_knot[0] = z[0] + lam / weights[0]
    left = n - 1
    right = n
    knots[left] = lower_knot[0]
    knots[right] = upper_knot[0]
    slope[left] = weights[0]
    offset[left] = lam - weights[0] * z[0]
    slope[right] = -weights[0]
    offset[right] = weights[0] * z[0] + lam
    first_slope = weights[1]
    first_offset = -weights[1] * z[1] - lam
    last_slope = -weights[1]
    last_offset = weights[1] * z[1] - lam

    for k in range(1, n - 1):
        lo_slope = first_slope
        lo_offset = first_offset
        lo = left
        while lo <= right and lo_slope * knots[lo] + lo_offset <= -lam:
            lo_slope += slope[lo]
            lo_offset += offset[lo]
            lo += 1
        hi_slope = last_slope
        hi_offset = last_offset
        hi = right
        while hi >= lo and -hi_slope * knots[hi] - hi_offset >= lam:
            hi_slope += slope[hi]
            hi_offset += offset[hi]
            hi -= 1
        lower_knot[k] = (-lam - lo_offset) / lo_slope
        left = lo - 1
        knots[left] = lower_knot[k]
        upper_knot[k] = (lam + hi_offset) / (-hi_slope)
        right = hi + 1
        knots[right] = upper_knot[k]
        slope[left] = lo_slope
        offset[left] = lo_offset + lam
        slope[right] = hi_slope
        offset[right] = hi_offset + lam
        first_slope = weights[k + 1]
        first_offset = -weights[k + 1] * z[k + 1] - lam
        last_slope = -weights[k + 1]
        last_offset = weights[k + 1] * z[k + 1] - lam

    lo = left
    while lo <= right and first_slope * knots[lo] + first_offset <= 0.0:
        first_slope += slope[lo]
        first_offset += offset[lo]
        lo += 1
    out[n - 1] = -first_offset / first_slope
    for k in range(n - 2, -1, -1):
        if out[k + 1] > upper_knot[k]:
            out[k] = upper_knot[k]
        elif out[k + 1] < lower_knot[k]:
            out[k] = lower_knot[k]
        else:
            out[k] = out[k + 1]


@njit(cache=True)
def fusion_value(w, offsets, lam_f):
    """``lam_f * sum_t ||D_t w_t||_1``: differences of neighbouring leaves within each tree only."""
    if lam_f == 0.0:
        return 0.0
    total = 0.0
    for t in range(offsets.shape[0] - 1):
        for j in range(offsets[t] + 1, offsets[t + 1]):
            total += abs(w[j] - w[j - 1])
    return lam_f * total


@njit(cache=True)
def penalty_total(problem, w, lam, lam_f):
    """The penalties of the FIRE objective at weights ``w`` of ``problem`` (``solver.problem.Problem``): each
    nonzero weight's sparsity penalty plus the fusion of neighbours within a block."""
    total = 0.0
    for j in range(w.shape[0]):
        if w[j] != 0.0:
            total += penalty_value(w[j], lam, problem.leaf_gamma[j], problem.penalty)
    return total + fusion_value(w, problem.offsets, lam_f)


@njit(cache=True)
def block_penalty(theta, lam, gamma, penalty, lam_f):
    """The penalties of one block's weights ``theta``: sparsity (code ``penalty``) plus fusion of neighbours."""
    total = 0.0
    for k in range(theta.shape[0]):
        total += penalty_value(theta[k], lam, gamma, penalty)
        if k > 0:
            total += lam_f * abs(theta[k] - theta[k - 1])
    return total


@njit(cache=True)
def _abs_change(new, old):
    """``|new| - |old|`` to the rounding of ``new - old``: subtracting the two absolute values instead loses
    ``eps * |old|``, which near a block's optimum is above the whole change of its objective."""
    if new >= 0.0 and old >= 0.0:
        return new - old
    if new <= 0.0 and old <= 0.0:
        return old - new
    return abs(new) - abs(old)  # opposite signs: both lie within |new - old| of zero


@njit(cache=True)
def penalty_change(old, new, lam, gamma, code):
    """``penalty(new) - penalty(old)`` of one coordinate, to the rounding of ``new - old`` (not of the values).
    MCP is ``gamma lam^2 / 2 - q`` with ``q = (gamma lam - |w|)^2 / (2 gamma)`` inside its knot, 0 beyond."""
    if code == L1:
        return lam * _abs_change(new, old)
    if code == MCP:
        knot = gamma * lam
        a_old, a_new = abs(old), abs(new)
        if a_old < knot and a_new < knot:
            return _abs_change(new, old) * (2.0 * knot - a_old - a_new) / (2.0 * gamma)
        q_old = (knot - a_old) ** 2 / (2.0 * gamma) if a_old < knot else 0.0
        q_new = (knot - a_new) ** 2 / (2.0 * gamma) if a_new < knot else 0.0
        return q_old - q_new
    raise ValueError("unknown penalty code")


@njit(cache=True)
def block_penalty_change(old, new, lam, gamma, penalty, lam_f):
    """``block_penalty(new) - block_penalty(old)``, summed term by term so that its error scales with the move
    ``new - old``, not with the penalties: a block's proximal step of size ``m / L_t`` lowers its objective by about
    ``m^2 / (2 L_t)``, below the rounding of the difference of the two totals once ``m`` is near the tolerance
    (a fused squared block at ``m = 7.6e-8``, ``L_t = 45``, penalties 2.84: a decrease of 3e-16 against a rounding of
    4.4e-16, its step refused pass after pass, its measure stuck above ``tol``)."""
    total = 0.0
    for k in range(new.shape[0]):
        total += penalty_change(old[k], new[k], lam, gamma, penalty)
        if k > 0:
            before = old[k] - old[k - 1]
            after = new[k] - new[k - 1]
            if (after >= 0.0 and before >= 0.0) or (after <= 0.0 and before <= 0.0):
                # same sign: |after| - |before| = +-(after - before), the difference of the two moves
                change = (new[k] - old[k]) - (new[k - 1] - old[k - 1])
                total += lam_f * (change if after + before >= 0.0 else -change)
            else:
                total += lam_f * (abs(after) - abs(before))  # opposite signs: both within the moves of zero
    return total


@njit(cache=True)
def fusion_change(old_before, old_after, new_before, new_after):
    """``|new_after - new_before| - |old_after - old_before|``, one fusion term's change, to the rounding of the
    moves (``block_penalty_change``'s): where the two differences share a sign it is +-(the moves' difference)."""
    before = old_after - old_before
    after = new_after - new_before
    if (after >= 0.0 and before >= 0.0) or (after <= 0.0 and before <= 0.0):
        change = (new_after - old_after) - (new_before - old_before)
        return change if after + before >= 0.0 else -change
    return abs(after) - abs(before)  # opposite signs: both within the moves of zero


@njit(cache=True)
def norm_penalty_change(old, new, change, lam, gamma, code):
    """``penalty(new) - penalty(old)`` of two nonnegative values (a group's norms) whose difference ``change`` the
    caller has computed to the rounding of the move (``penalty_change``, which takes it as ``new - old``)."""
    if code == L1:
        return lam * change
    if code == MCP:
        knot = gamma * lam
        if old < knot and new < knot:
            return change * (2.0 * knot - old - new) / (2.0 * gamma)
        q_old = (knot - old) ** 2 / (2.0 * gamma) if old < knot else 0.0
        q_new = (knot - new) ** 2 / (2.0 * gamma) if new < knot else 0.0
        return q_old - q_new
    raise ValueError("unknown penalty code")


@njit(cache=True)
def pinned_weights(usable):
    """Weights of the fusion prox of a block whose leaves outside ``usable`` (zero columns: no training rows, or
    below min_support) stay at zero: 1, and ``PINNED_WEIGHT`` for those; empty where every leaf is usable."""
    if usable.all():
        return np.empty(0)
    return np.where(usable, 1.0, PINNED_WEIGHT)


@njit(cache=True)
def fusion_prox(point, pins, lam_f, out):
    """The fusion prox of a block's ``point``. A leaf held at zero (``pins``, :func:`pinned_weights`) splits the
    chain: its neighbours pay ``lam_f |theta|`` against it, which the unweighted prox, treating it as a free
    value, does not see (it fused the neighbours with it, then the leaf went back to zero: a step that raised
    the objective, was refused every time, and left the block's measure above the tolerance for good)."""
    if pins.shape[0] == 0:
        fused_lasso_prox(point, lam_f, out)
    else:
        weighted_fused_lasso_prox(point, pins, lam_f, out)
