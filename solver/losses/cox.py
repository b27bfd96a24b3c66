"""Cox proportional hazards (``loss="cox"``): time to an event, censored where it has not happened yet. Each rule
multiplies the hazard: ``h(t | x) = h0(t) exp(eta(x))``, a rule's factor ``exp(contribution)`` ("×1.8 hazard if ...").

Target: ONE float per row, the signed time (XGBoost's ``survival:cox`` convention): ``+t`` where the event happened
at time t, ``-t`` where the row was censored at t (times > 0; :func:`signed_times`).

Loss: the negative log partial likelihood with Breslow's handling of tied event times, with row weights s::

    L(eta) = sum_k d_k log W_k - sum_i s_i delta_i eta_i,   W_k = sum_{j: t_j >= t_k} s_j exp(eta_j)

over the distinct event times t_k, ``d_k`` the weighted count of events at t_k. Its residual per unit weight is the
martingale residual ``r_i = delta_i - exp(eta_i) H_i`` (``H_i = sum_{t_k <= t_i} d_k / W_k``, Breslow's cumulative
hazard), the diagonal of its Hessian ``exp(eta_i) H_i - s_i exp(2 eta_i) sum_{t_k <= t_i} d_k / W_k^2``: glmnet's
Newton weights. The loss does not change when a constant is added to every score, so there is no intercept. No bound
on the curvature serves GBCD's leaf steps well (the partial likelihood's curvature in a rule is at most a quarter per
event whose risk set meets the rule's rows, far above its true value for a small rule), so the path's steps are
proximal Newton steps certified by GBCD's measures (``solver.losses.newton``).

Each step records the partial-likelihood deviance per row, ``2 L / sum s`` (on validation rows, with their own risk
sets), and Harrell's C-index (:func:`concordance_index`, scikit-survival's ``concordance_index_censored``).
Survival curves: ``S(t | x) = exp(-H0(t) exp(eta(x)))`` with Breslow's baseline cumulative hazard
(:func:`baseline_hazard`).
"""

import numpy as np
import scipy.sparse as sp
from numba import njit

from .base import Metric
from .newton import NewtonLoss

CODE = 6  # no kernel dispatches it: its steps are Newton steps (solver.losses.newton)
TIED_RISK = 1e-8  # risk scores this close count as tied in the C-index (scikit-survival's tied_tol)
# a risk-set sum of exp(score - max score) below this has lost digits to underflow: the loss sums it in logs instead
RISK_FLOOR = 1e-280
RISK_SET_BLOCK = 4096  # distinct times per block of a polish refit's Hessian (a block's sums: RISK_SET_BLOCK x k)


def signed_times(time, event):
    """The Cox target of ``time`` (> 0) and ``event`` (true where the event happened): ``+time`` or ``-time``."""
    time = np.asarray(time, dtype=np.float64)
    event = np.asarray(event).astype(bool)
    if time.shape != event.shape or time.ndim != 1:
        raise ValueError(f"time and event must be 1-d of one length, got shapes {time.shape} and {event.shape}")
    if not np.all(np.isfinite(time) & (time > 0)):
        bad = np.flatnonzero(~(np.isfinite(time) & (time > 0)))
        raise ValueError(f"survival times must be positive and finite: row {bad[0]} has {time[bad[0]]:g}")
    return np.where(event, time, -time)


def split_times(y):
    """(time, event) of signed times ``y``."""
    y = np.asarray(y, dtype=np.float64)
    return np.abs(y), y > 0


class _RiskSets:
    """The distinct times of ``y`` in ascending order and, per row, its time's position among them."""

    def __init__(self, y):
        time, self.event = split_times(y)
        self.times, self.group = np.unique(time, return_inverse=True)

    _last: tuple = (None, None)  # (y, its risk sets): a path asks for the same training rows' at every Newton step

    @classmethod
    def of(cls, y):
        """The risk sets of ``y``, computed once for the array a path solves on (it is never changed in place)."""
        last = cls._last  # read once: another thread's path may replace it meanwhile
        if last[0] is not y:
            last = (y, cls(y))
            cls._last = last
        return last[1]

    def sums(self, score, sample_weight):
        """(per distinct time: W, the weighted risk-set sum of ``exp(score - shift)``, and d, the weighted events;
        shift): shifted by the largest score so that exp cannot overflow."""
        shift = float(score.max()) if score.size else 0.0
        at_time = np.bincount(self.group, weights=sample_weight * np.exp(score - shift), minlength=len(self.times))
        risk = np.cumsum(at_time[::-1])[::-1]  # sum over the rows whose time is at least this one
        events = np.bincount(self.group, weights=sample_weight * self.event, minlength=len(self.times))
        return risk, events, shift

    def log_sums(self, score, sample_weight):
        """Per distinct time, the log of the weighted risk-set sum of ``exp(score)``, summed in logs: exact whatever
        the scores' range (:meth:`sums` shifts every score by one amount), at the cost of a log per row."""
        with np.errstate(divide="ignore"):  # a row of weight 0 adds nothing: log 0 = -inf
            terms = np.log(sample_weight) + score
        at_time = np.full(len(self.times), -np.inf)
        np.logaddexp.at(at_time, self.group, terms)
        return np.logaddexp.accumulate(at_time[::-1])[::-1]


def _hazard_steps(risk, events, power=1):
    """``d_k / W_k^power`` per distinct time (0 where no event or no row at risk)."""
    return np.divide(events, risk**power, out=np.zeros_like(events), where=(events > 0) & (risk > 0))


def baseline_hazard(y, score, sample_weight=None):
    """Breslow's baseline cumulative hazard of scores ``score`` on rows with signed times ``y``: (the distinct event
    times and the last follow-up time, H0 just after each), ``H0(t) = sum_{t_k <= t} d_k / sum_{j: t_j >= t_k} s_j
    exp(eta_j)``. The last time of the rows closes the list (where it is censored, H0 there is the last event's):
    the curves are estimated up to it and no further (:func:`survival_function`)."""
    y, score = np.asarray(y, dtype=np.float64), np.asarray(score, dtype=np.float64)
    weights = np.ones_like(y) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    sets = _RiskSets(y)
    risk, events, shift = sets.sums(score, weights)
    steps = _hazard_steps(risk, events) * np.exp(-shift)
    kept = events > 0
    kept[-1] = True  # the last follow-up time: the end of the times the curves are known at
    return sets.times[kept], np.cumsum(steps)[kept]


def check_survival_times(times, at) -> np.ndarray:
    """``at`` as float64 where every time is in [0, last follow-up] (``times[-1]``, :func:`baseline_hazard`'s last
    time); a ValueError naming the first outside. Past the last follow-up no row was at risk, so nothing estimates
    S(t | x) there: scikit-survival's step functions raise outside their domain in the same way (lifelines repeats
    the last value, a figure no data gave)."""
    at = np.asarray(at, dtype=np.float64)
    last = float(times[-1])
    outside = ~((at >= 0.0) & (at <= last))  # NaN too
    if outside.any():
        bad = float(at.reshape(-1)[np.flatnonzero(outside.reshape(-1))[0]])
        raise ValueError(
            f"survival time {bad:g} is outside [0, {last:g}]: the curves are estimated up to the last follow-up time "
            f"of the training rows, {last:g}"
        )
    return at


def survival_function(times, cumulative_hazard, score, at):
    """``S(t | x) = exp(-H0(t) exp(eta(x)))`` (rows, len(at)) from the baseline ``(times, cumulative_hazard)`` of
    :func:`baseline_hazard`, scores ``score`` and times ``at`` in [0, times[-1]] (H0 is a step function: 0 before the
    first event); a ValueError (:func:`check_survival_times`) for a time outside."""
    at = check_survival_times(times, at)
    positions = np.searchsorted(times, at, side="right")
    at_times = np.concatenate([[0.0], cumulative_hazard])[positions]
    return np.exp(-np.outer(np.exp(np.asarray(score, dtype=np.float64)), at_times))


@njit(cache=True)
def _concordance(time, event, score, tied):
    """(concordant + half the tied pairs, comparable pairs) of Harrell's C-index: a pair (i, j) is comparable where
    i had the event and ``t_j > t_i``, or ``t_j == t_i`` and j was censored; concordant where ``score_j < score_i``.
    O(n log n): rows enter a Fenwick tree over the score order from the latest time down."""
    n = time.shape[0]
    by_score = np.argsort(score)
    sorted_score = score[by_score]
    position = np.empty(n, dtype=np.int64)
    position[by_score] = np.arange(n)
    tree = np.zeros(n + 1, dtype=np.int64)
    order = np.argsort(-time)
    numerator, pairs = 0.0, 0.0
    entered = 0
    start = 0
    while start < n:
        stop = start + 1
        while stop < n and time[order[stop]] == time[order[start]]:
            stop += 1
        for k in range(start, stop):  # the censored rows of this time count for its events
            if not event[order[k]]:
                _add(tree, position[order[k]])
                entered += 1
        for k in range(start, stop):
            i = order[k]
            if event[i]:
                lower = np.searchsorted(sorted_score, score[i] - tied, side="left")
                upper = np.searchsorted(sorted_score, score[i] + tied, side="right")
                below = _count(tree, lower)
                ties = _count(tree, upper) - below
                numerator += below + 0.5 * ties
                pairs += entered
        for k in range(start, stop):
            if event[order[k]]:
                _add(tree, position[order[k]])
                entered += 1
        start = stop
    return numerator, pairs


@njit(cache=True)
def _add(tree, position):
    k = position + 1
    while k < tree.shape[0]:
        tree[k] += 1
        k += k & -k


@njit(cache=True)
def _count(tree, end):
    """How many entered rows sit at score positions below ``end``."""
    total = 0
    k = end
    while k > 0:
        total += tree[k]
        k -= k & -k
    return total


def concordance_index(y, score):
    """Harrell's C-index of risk scores ``score`` on signed times ``y`` (scikit-survival's
    ``concordance_index_censored``, ties within ``TIED_RISK`` counting one half); None without a comparable pair."""
    time, event = split_times(y)
    numerator, pairs = _concordance(time, event, np.asarray(score, dtype=np.float64), TIED_RISK)
    return float(numerator / pairs) if pairs > 0 else None


class Cox(NewtonLoss):
    def check_targets(self, y, name, sample_weight=None):
        """Signed times: nonzero, with at least one event (with positive weight where ``sample_weight`` is given)."""
        if np.any(y == 0):
            row = int(np.flatnonzero(y == 0)[0])
            raise ValueError(
                f"the Cox loss needs {name} as signed times (+time for an event, -time if censored; times > 0): "
                f"row {row} has time 0"
            )
        events = y > 0 if sample_weight is None else (y > 0) & (sample_weight > 0)
        if not events.any():
            raise ValueError(f"the Cox loss needs at least one event in {name} (a positive signed time): all censored")

    def newton_terms(self, y, score, sample_weight):
        sets = _RiskSets.of(y)
        risk, events, shift = sets.sums(score, sample_weight)
        hazard = np.cumsum(_hazard_steps(risk, events))[sets.group]
        squared = np.cumsum(_hazard_steps(risk, events, power=2))[sets.group]
        relative = np.exp(score - shift)
        return sets.event - relative * hazard, relative * hazard - sample_weight * relative**2 * squared

    def weight_derivatives(self, y, score, sample_weight, design):
        """The gradient ``-design^T (s r)`` (martingale residuals r) and the full Hessian of the partial likelihood
        in the weights of ``design``'s columns ``x``: ``sum_i s_i exp(eta_i) H_i x_i x_i^T - sum_k d_k (m_k / W_k)
        (m_k / W_k)^T`` with ``m_k = sum_{j: t_j >= t_k} s_j exp(eta_j) x_j`` (each risk set's rows move its sum
        together, so it is not the diagonal of ``newton_terms``). O(nnz k + n k^2), the m_k summed over the times
        from the last in blocks of ``RISK_SET_BLOCK``."""
        sets = _RiskSets.of(y)
        risk, events, shift = sets.sums(score, sample_weight)
        relative = np.exp(score - shift)
        hazard = np.cumsum(_hazard_steps(risk, events))[sets.group]
        gradient = design.T @ -(sample_weight * (sets.event - relative * hazard))
        hessian = (design.T @ design.multiply((sample_weight * relative * hazard)[:, None])).toarray()
        n_times, n_rows = len(sets.times), len(y)
        at_time = sp.csr_matrix((np.ones(n_rows), (sets.group, np.arange(n_rows))), shape=(n_times, n_rows)) @ (
            sp.csr_matrix(design.multiply((sample_weight * relative)[:, None]))
        )  # per distinct time: the sum of s exp(eta) x over its rows
        counted = (events > 0) & (risk > 0)  # the times whose events couple their risk sets' rows
        later = np.zeros(design.shape[1])  # m of the time after the block
        for stop in range(n_times, 0, -RISK_SET_BLOCK):
            start = max(stop - RISK_SET_BLOCK, 0)
            sums = np.cumsum(at_time[start:stop].toarray()[::-1], axis=0)[::-1] + later
            later = sums[0]
            block = slice(start, stop)
            means = sums[counted[block]] / risk[block][counted[block], None]  # m_k / W_k: no W_k^2 to underflow
            hessian -= means.T @ (means * events[block][counted[block], None])
        return gradient, hessian

    def loss_total(self, y, score, sample_weight):
        sets = _RiskSets.of(y)
        risk, events, shift = sets.sums(score, sample_weight)
        has_event = events > 0
        if np.all(risk[has_event] > RISK_FLOOR):
            log_risk = np.log(risk[has_event]) + shift
        else:  # scores so far apart that one shift underflows a risk set's sum (a refit's trial step): each in logs
            log_risk = sets.log_sums(score, sample_weight)[has_event]
        return float(np.dot(events[has_event], log_risk) - np.dot(sample_weight * sets.event, score))

    def mean_loss(self, y, score, sample_weight=None):
        """The partial-likelihood deviance per row, ``2 L / sum s`` (module docstring)."""
        y, score = np.asarray(y, dtype=np.float64), np.asarray(score, dtype=np.float64)
        weights = np.ones_like(y) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        return 2.0 * self.loss_total(y, score, weights) / float(weights.sum())

    def step_metrics(self, y, score, sample_weight=None):
        """The loss and ``cindex`` (Harrell's, unweighted, as scikit-survival's)."""
        return {"loss": self.mean_loss(y, score, sample_weight), "cindex": concordance_index(y, score)}

    def baseline(self, y, score, sample_weight):
        """Breslow's baseline cumulative hazard at the training scores (:func:`baseline_hazard`)."""
        return baseline_hazard(y, score, sample_weight)

    def forest_target(self, y):
        """The martingale residuals of the model without rules, ``delta_i - H_NA(t_i)`` (Nelson-Aalen): a regression
        forest on them splits where the hazard differs (the first step of Cox gradient boosting)."""
        y = np.asarray(y, dtype=np.float64)
        return self.newton_terms(y, np.zeros_like(y), np.ones_like(y))[0]

    def response(self, classes=None):
        return "log hazard ratio"

    def predicts(self, target, classes=None):
        return f"the hazard ratio of {target} (relative to the baseline hazard)"

    def warmup_target(self, y):
        time = np.exp(y - y.max()) + 1e-3
        return np.where(np.arange(len(y)) % 3 == 0, -time, time)


LOSS = Cox(
    name="cox",
    code=CODE,
    task="survival",
    other_tasks=(),
    link="log",
    rule_link="log",
    classifier=False,
    per_class=False,
    forest_task="Regressor",
    nonnegative_target=False,
    metrics=(Metric("cindex", "C-index"), Metric("loss", "deviance")),
    chart_metric="cindex",
    selections=("loss", "cindex", "1se"),
    polish_default=False,
    has_intercept=False,
    # L1: on 20 splits of the four shared survival tables MCP's validation deviance kept one or two linear terms and
    # no rule in 13, L1 with fusion a rule in 18, its median test C-index 0.706 against 0.694 (bench/survival.py)
    penalty_default="l1",
)


def kaplan_meier(y, at):
    """The Kaplan-Meier estimate of the survival function of rows with signed times ``y`` at times ``at``: the
    product over event times ``t_k <= t`` of ``1 - d_k / n_k`` (``n_k`` rows at risk), 1 before the first event."""
    sets = _RiskSets(np.asarray(y, dtype=np.float64))
    ones = np.ones(len(sets.group))
    at_risk = np.cumsum(np.bincount(sets.group, weights=ones, minlength=len(sets.times))[::-1])[::-1]
    events = np.bincount(sets.group, weights=sets.event.astype(np.float64), minlength=len(sets.times))
    survival = np.cumprod(1.0 - events / at_risk)
    positions = np.searchsorted(sets.times, np.asarray(at, dtype=np.float64), side="right")
    return np.concatenate([[1.0], survival])[positions]
