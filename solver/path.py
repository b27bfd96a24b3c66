"""Warm-started regularization paths over the sparsity parameter lambda_s."""

import time
from dataclasses import KW_ONLY, MISSING, asdict, dataclass, fields

import numpy as np
import scipy.sparse as sp

from . import gbcd, threads
from .leaf_matrix import count_antecedents
from .losses import multinomial_gbcd
from .polish import polish
from .problem import Problem, State
from .spec import PathSpec

SOLVERS = {"greedy": gbcd.solve_greedy, "cyclic": gbcd.solve_cyclic}
# a loss with one weight per class for each rule (Loss.per_class) has its own state and solver
CLASS_SOLVERS = {"greedy": multinomial_gbcd.solve_greedy, "cyclic": multinomial_gbcd.solve_cyclic}


# the metrics of a step beside its losses (those of its loss, Loss.metrics; see PathStep), each as a train_* and a
# val_* field
METRIC_NAMES = ("auc", "accuracy", "mae", "r2", "rmse", "brier", "cindex")
METRICS = tuple(f"{rows}_{name}" for name in METRIC_NAMES for rows in ("train", "val"))


@dataclass
class PathStep:
    """What one lambda step of a path produced, on the training rows (weighted by ``sample_weight``) and the
    validation rows. Losses are per-row means, beside the metrics people read for each loss:

    - squared loss: the loss is the mean squared error (not halved); ``r2`` (1 - MSE / variance of the target,
      scikit-learn's ``r2_score``; None where the target is constant), ``rmse`` (its square root) and ``mae``
      (mean absolute error of the prediction);
    - logistic and multinomial losses: the loss is the mean log loss; ``auc`` (macro one-vs-rest for K classes),
      ``accuracy`` (label 1 where the score is positive; the most probable class) and ``brier``, the Brier
      score: for two classes the mean (p - y)^2 of the probability of label 1, in [0, 1]; for K classes the
      mean over rows of sum_k (p_k - 1[y = k])^2, in [0, 2] (Brier's definition). Both are scikit-learn's
      ``brier_score_loss`` with its default ``scale_by_half="auto"`` (which halves only the binary score);
    - Poisson, Tweedie and Gamma losses: the loss is the mean deviance; ``mae`` of the mean (rate or amount);
    - Cox loss: the loss is the partial-likelihood deviance per row (each set of rows' own risk sets); ``cindex``,
      Harrell's concordance index of the risk scores (scikit-survival's ``concordance_index_censored``).

    The metrics a path does not have (another loss's, or every ``val_*`` without validation rows) are None.
    JSON-ready through ``to_dict``."""

    index: int
    lambda_s: float
    lambda_f: float
    # the selected rules, linear terms not counted: rule columns with a nonzero weight (the step's RuleEnsemble says
    # rules of the same conditions once, each column one of its members; None: see upgraded_step_record)
    n_rules: int | None
    n_trees: int
    n_antecedents: int | None
    train_loss: float
    val_loss: float | None
    objective: float
    n_iter: int
    converged: bool
    seconds: float
    _: KW_ONLY
    # every selected term, rules and linear terms: the count the rule budget (PathSpec.max_rules) bounds
    n_terms: int
    n_linear: int | None  # the selected linear terms (None: see upgraded_step_record)
    # the metrics beside the losses, None by default: records written before one existed read back
    train_auc: float | None = None
    val_auc: float | None = None
    train_accuracy: float | None = None
    val_accuracy: float | None = None
    train_mae: float | None = None
    val_mae: float | None = None
    train_r2: float | None = None
    val_r2: float | None = None
    train_rmse: float | None = None
    val_rmse: float | None = None
    train_brier: float | None = None
    val_brier: float | None = None
    train_cindex: float | None = None
    val_cindex: float | None = None
    # a cross-validated step's (solver.cross_validation): the standard error of val_loss, the folds' mean
    val_loss_se: float | None = None

    def to_dict(self):
        return asdict(self)

    @classmethod
    def from_dict(cls, record, n_linear=None):
        """The step of a ``to_dict()`` record (keys it does not know are ignored; the fields after the losses may
        be missing, as in records written before they existed). ``n_linear``: the linear terms of a record written
        before ``n_terms`` existed, where the caller knows them (:func:`upgraded_step_record`)."""
        record = upgraded_step_record(record, n_linear)
        return cls(**{f.name: record[f.name] for f in fields(cls) if f.default is MISSING or f.name in record})


def upgraded_step_record(record, n_linear=None):
    """A step record (``PathStep.to_dict()``, or a document's copy of its counts) with this version's counts.

    A record written before ``n_terms`` existed counted every selected term, linear ones included, as ``n_rules``:
    that count becomes ``n_terms``. How many of them are linear is known only where the caller knows it
    (``n_linear``: 0 for a path without linear candidates, or the count of a step whose rules are at hand); else
    ``n_rules`` and ``n_linear`` are None (unknown), rather than a figure that may be wrong."""
    if "n_terms" in record or "n_rules" not in record:
        return dict(record)
    terms = record["n_rules"]
    rules = None if n_linear is None or terms is None else terms - n_linear
    return {**record, "n_terms": terms, "n_linear": None if rules is None else n_linear, "n_rules": rules}


def best_step(steps, max_rules=None, selection=PathSpec().selection):
    """Position in ``steps`` of the best one within the rule budget, or None where no step fits it.

    The one selection rule of the library and the service (final choice, progress, grid cells): among steps
    with at most ``max_rules`` terms (``n_terms``: the budget counts rules and linear terms alike), the lowest
    validation loss (``selection="loss"``) or the highest validation AUC (``"auc"``) or C-index (``"cindex"``;
    ``PathSpec.selection``), from the training rows where a step has no validation metric; the earlier (sparser)
    step on ties. ``"1se"``: the earliest (sparsest) step whose
    validation loss is at most the lowest one plus that step's standard error (``val_loss_se``, cross-validated
    steps), glmnet's one-standard-error rule; the lowest where a step has no standard error.
    """
    eligible = [k for k, s in enumerate(steps) if max_rules is None or s.n_terms <= max_rules]
    if not eligible:
        return None
    if selection == "1se":
        lowest = best_step([steps[k] for k in eligible], None, "loss")
        assert lowest is not None
        best = steps[eligible[lowest]]
        if best.val_loss is None or best.val_loss_se is None:
            return eligible[lowest]
        threshold = best.val_loss + best.val_loss_se
        # (the lowest itself where the threshold is NaN: a fold whose loss overflowed compares false everywhere)
        return next((k for k in eligible if steps[k].val_loss <= threshold), eligible[lowest])
    if selection in ("auc", "cindex"):  # the highest metric
        has_val = all(getattr(steps[k], f"val_{selection}") is not None for k in eligible)
        rows = "val" if has_val else "train"
        return min(eligible, key=lambda k: (-getattr(steps[k], f"{rows}_{selection}"), k))
    has_val = all(steps[k].val_loss is not None for k in eligible)
    return min(eligible, key=lambda k: (steps[k].val_loss if has_val else steps[k].train_loss, k))


@dataclass(frozen=True)
class RuleStep:
    """The best step of a path that has a rule with a condition (``n_rules >= 1``), beside its selected step, and
    what choosing it would cost: :func:`best_rule_step`. JSON-ready through ``to_dict``.

    ``step`` is the selected step itself where that has a rule, else the step the selection rule picks among the
    steps within the budget that have one; None where no such step exists. The costs compare the two steps' losses
    on the rows the selection compared them on (``loss_rows``: "validation", or "training" for a path without
    validation rows): ``loss_difference`` is the rule step's loss minus the selected step's, ``loss_ratio`` the one
    over the other (None where the selected step's loss is not positive), ``loss_se`` the standard error of the rule
    step's cross-validated loss (None without folds). ``reason``: the sentence a person reads where the selected
    step has no rule (only linear terms, or the intercept alone); None where it has one."""

    selected: int
    step: int | None
    loss_rows: str
    loss_difference: float | None
    loss_ratio: float | None
    loss_se: float | None
    reason: str | None

    def to_dict(self):
        return asdict(self)


def best_rule_step(steps, selected, max_rules=None, selection=PathSpec().selection) -> RuleStep:
    """The best step of ``steps`` with a rule beside ``selected`` (the step :func:`best_step` chose with the same
    ``max_rules`` and ``selection``), as a :class:`RuleStep`: the selected step where it has a rule, else
    :func:`best_step` over the steps that have one (a step whose rule count is unknown, ``n_rules`` None, counts as
    having none)."""
    chosen = steps[selected]
    rows = "validation" if chosen.val_loss is not None else "training"
    if chosen.n_rules:
        return RuleStep(
            selected, selected, rows, 0.0, 1.0 if _loss(chosen, rows) > 0 else None, chosen.val_loss_se, None
        )
    with_rules = [k for k, s in enumerate(steps) if s.n_rules]
    best = best_step([steps[k] for k in with_rules], max_rules, selection)
    within = "" if max_rules is None else f" within {max_rules} terms"
    holds = "uses only linear terms" if chosen.n_terms else "has no term (the intercept alone)"
    text = f"The best step{within}, step {selected}, {holds}"
    if best is None:
        reason = f"{text}, and no step of the path{within} has a rule with a condition."
        return RuleStep(selected, None, rows, None, None, None, reason)
    step = with_rules[best]
    ours, theirs = _loss(chosen, rows), _loss(steps[step], rows)
    difference, ratio, se = theirs - ours, theirs / ours if ours > 0 else None, steps[step].val_loss_se
    percent = "" if ratio is None else f" ({100 * (ratio - 1):+.1f}%)"
    spread = "" if se is None else f", standard error of its {rows} loss {se:.4g}"
    cost = f"costs {difference:+.4g} {rows} loss" if difference >= 0 else f"has {-difference:.4g} less {rows} loss"
    reason = f"{text}: step {step}, the best with a rule ({_terms_text(steps[step])}), {cost}{percent}{spread}."
    return RuleStep(selected, step, rows, difference, ratio, se, reason)


@dataclass(frozen=True)
class FrontierStep:
    """A step of a cross-validated path on its accuracy–stability–size frontier (:func:`stability_frontier`): its
    position ``step``, its terms (``n_terms``, of which ``n_rules`` rules and ``n_linear`` linear terms, as
    :class:`PathStep` counts them), its mean validation loss over the folds and that mean's standard error
    (``val_loss``, ``val_loss_se``) and the folds' Dice index there (``dice``: ``solver.stability.FoldStability``).
    JSON-ready through ``to_dict``."""

    step: int
    n_terms: int
    n_rules: int | None
    n_linear: int | None
    val_loss: float
    val_loss_se: float | None
    dice: float

    def to_dict(self):
        return asdict(self)


def stability_frontier(steps, dice, max_rules=None) -> list[FrontierStep]:
    """The accuracy–stability–size frontier of a cross-validated path (MOSS's trade-off, with size as a third
    axis): of its ``steps`` within the rule budget (``n_terms <= max_rules``; None: every step), those no other step
    dominates, in step order. A step dominates another where it has at most its terms, at most its mean validation
    loss and at least its Dice index (``dice[k]``: the folds' at step k, ``solver.stability.FoldStability.dice``),
    and is better on one of the three; of steps equal on all three (a run of steps that changed no term) the earliest
    alone is on it. A step whose mean loss is not finite (a fold's loss overflowed) is on no frontier and dominates
    none."""
    if len(dice) != len(steps):
        raise ValueError(f"the frontier needs one Dice index per step: {len(dice)} for {len(steps)} steps")
    if any(step.val_loss is None for step in steps):
        raise ValueError("the frontier needs each step's cross-validated loss (val_loss): a path with cv_folds")
    within = [
        k for k, s in enumerate(steps) if (max_rules is None or s.n_terms <= max_rules) and np.isfinite(s.val_loss)
    ]
    point = {k: (steps[k].n_terms, steps[k].val_loss, -dice[k]) for k in within}  # each lower is better
    # in this order a step comes after every step that dominates or equals it (the earliest of equals first), one of
    # the frontier's among them (what dominates a step's dominator dominates the step): each step is compared with
    # the frontier found before it alone
    kept: list[int] = []
    for k in sorted(within, key=lambda k: (point[k], k)):
        if not any(all(a <= b for a, b in zip(point[j], point[k])) for j in kept):
            kept.append(k)
    return [
        FrontierStep(
            k,
            steps[k].n_terms,
            steps[k].n_rules,
            steps[k].n_linear,
            float(steps[k].val_loss),
            None if steps[k].val_loss_se is None else float(steps[k].val_loss_se),
            float(dice[k]),
        )
        for k in sorted(kept)
    ]


def _loss(step, rows):
    return step.val_loss if rows == "validation" else step.train_loss


def _terms_text(step) -> str:
    """A step's counts in words, as the dashboard says them: "6 terms: 4 rules, 2 linear terms", "3 rules"."""

    def counted(count, noun):
        return f"{count} {noun}{'' if count == 1 else 's'}"

    if step.n_rules is None or step.n_linear is None:
        return counted(step.n_terms, "term")
    if not step.n_linear:
        return counted(step.n_rules, "rule")
    return f"{counted(step.n_terms, 'term')}: {counted(step.n_rules, 'rule')}, {counted(step.n_linear, 'linear term')}"


@dataclass
class PathResult:
    """Every step of a path, the weights of each step (sparse, steps x R, or steps x R*K row-major for K classes),
    the intercepts (steps,) or (steps, K) and the spec."""

    steps: list
    coef_path: sp.csr_matrix
    intercepts: np.ndarray
    lambda_max: float
    spec: PathSpec
    stop_reason: str = "completed"
    n_classes: int = 1  # K of a multinomial path: one weight per class for each rule

    def coef(self, k):
        """Dense weights of step ``k``: (R,), or (R, K) for a multinomial path."""
        weights = np.asarray(self.coef_path[k].toarray()).ravel()
        return weights if self.n_classes == 1 else weights.reshape(-1, self.n_classes)

    def select(self, max_rules=None):
        """Index of the best step within ``max_rules`` (the spec's budget by default): see :func:`best_step`."""
        budget = self.spec.max_rules if max_rules is None else max_rules
        k = best_step(self.steps, budget, self.spec.selection)
        if k is None:
            raise ValueError(f"no step of the path has at most max_rules={budget} terms (rules and linear terms)")
        return k

    def rule_step(self, selected, max_rules=None) -> RuleStep:
        """The best step with a rule beside the step ``selected`` (:meth:`select`'s, with the same ``max_rules``):
        see :func:`best_rule_step`."""
        budget = self.spec.max_rules if max_rules is None else max_rules
        return best_rule_step(self.steps, selected, budget, self.spec.selection)


def lambda_grid(lambda_max, n_lambdas, lambda_min_ratio):
    """Geometric grid from ``lambda_max`` down to ``lambda_min_ratio * lambda_max`` (checked by PathSpec)."""
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


def fit_path(
    matrix,
    y,
    spec=None,
    *,
    sample_weight=None,
    val_matrix=None,
    y_val=None,
    val_weight=None,
    leaf_ancestors=None,
    column_trees=None,
    column_rules=None,
    callback=None,
    n_jobs=None,
    **settings,
):
    """Solve the FIRE problem along a decreasing, warm-started grid of lambda_s.

    ``matrix`` is a :class:`solver.LeafMatrix` (M, implicit). The settings are a :class:`solver.spec.PathSpec`
    (``spec``, its defaults where None), with any of its fields given as keywords on top
    (``fit_path(M, y, penalty="l1", fusion_ratio=0)``). ``tol`` is relative to lambda_max: a step stops when no
    steepest-direction entry and no block's proximal move exceeds ``tol * lambda_max``. ``max_iter`` caps the
    passes (working-set passes and full sweeps) per step (``PathStep.converged`` is False where it was hit).
    ``callback(step)`` runs after every step; a truthy return stops the path (progress, cancel, deadline).
    The path also stops after the first step whose count of terms (``n_terms``) passes ``max_rules``, and once it
    is past its best step (``PathSpec.past_its_best``: ``patience`` steps with no better validation loss and twice
    the terms). The
    validation split settings of the spec are the caller's business (``solver.fitting``): here validation rows are
    given, with their weights ``val_weight`` (None: equal), which weight their losses and metrics.
    With ``scaling="unit"`` the solver runs on M with unit-norm columns (``LeafMatrix.unit_columns``;
    ``lambda_s``, ``lambda_f`` and ``objective`` are in those units) and every recorded weight is mapped back to
    M's. Leaves that fewer than ``min_support`` training rows reach are kept at zero; with ``polish`` each step
    records (weights, intercept, losses) refitted on its rules (``solver.polish``), the path itself running on
    the penalized solutions (its warm starts, ``objective``).

    Candidates (``solver.candidates``): ``matrix``'s rule columns may be nodes in blocks per tree level, and its
    linear columns terms; ``leaf_ancestors`` (``Candidates.ancestors``) counts antecedents over the rule columns
    and ``column_trees`` (``Candidates.trees``, (R,)) names each rule column's tree for ``PathStep.n_trees``
    (default: its block); ``column_rules`` (``Candidates.rule_ids``, (R,)) names each rule column's rule, where
    several columns say one rule (default: each column its own). A step's ``n_rules`` counts the rules of its selected
    rule columns, ``n_linear`` its selected linear terms and ``n_terms`` both (what ``max_rules`` bounds).
    ``n_jobs`` caps the threads of the parallel kernels (``solver.threads.limit``; None: ``FIRE_NUM_THREADS`` or
    every core); the path does not depend on it.
    """
    with threads.limit(n_jobs):
        columns = _Columns(leaf_ancestors, column_trees, column_rules)
        return _fit_path(matrix, y, spec, sample_weight, val_matrix, y_val, val_weight, columns, callback, settings)


@dataclass(frozen=True)
class _Columns:
    """What a path's steps count their rule columns by (fit_path's arguments of these names)."""

    leaf_ancestors: tuple | None
    column_trees: np.ndarray | None
    column_rules: np.ndarray | None


def _fit_path(matrix, y, spec, sample_weight, val_matrix, y_val, val_weight, columns, callback, settings):
    spec = spec or PathSpec()
    if settings:
        spec = spec.replace(**settings)
    max_rules, max_iter, inner_iters = spec.max_rules, spec.max_iter, spec.inner_iters

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
    loss = spec.path_loss()
    setup = _Setup.of(matrix, y, weights, spec)  # the training rows' checks first: they name what to fix first
    if y_val is not None:
        loss.check_targets(y_val, "y_val")
        if val_weight is not None:
            val_weight = np.asarray(val_weight, dtype=np.float64)
            if val_weight.shape != y_val.shape or np.any(val_weight < 0) or not val_weight.sum() > 0:
                raise ValueError(
                    "the validation rows' sample_weight must be non-negative with a positive sum (every validation "
                    "row has weight 0: give some positive weight, or another validation split)"
                )
    matrix, problem, state, scale, n_classes = setup.matrix, setup.problem, setup.state, setup.scale, setup.n_classes
    kernels, solve, objective_value = setup.kernels, setup.solve, setup.objective
    n_leaves = problem.values.shape[0]
    lambda_max = kernels.lambda_max(problem, state)
    grid = path_grid(spec, lambda_max)
    tol_abs = spec.tol * max(lambda_max, np.finfo(float).tiny)
    unscale = scale if n_classes == 1 else scale[:, None]

    steps, rows, intercepts = [], [], []
    stop_reason = "completed"
    for index, lam in enumerate(grid):
        started = time.perf_counter()
        lam_f = spec.fusion_strength(lam)
        n_iter, converged = solve(problem, state, float(lam), lam_f, tol_abs, max_iter, inner_iters)
        objective = objective_value(problem, state, float(lam), lam_f)
        w = state.w * unscale
        intercept = state.intercept[0] if n_classes == 1 else state.intercept.copy()
        if spec.polishes():
            w, intercept = polish(matrix, y, weights, w, loss, (problem.leaf_rows, problem.leaf_ptr))
        train_score = _training_score(loss, problem, state, matrix, w, intercept, spec.polishes())
        step = _record_step(
            index,
            lam,
            lam_f,
            loss,
            problem,
            w,
            intercept,
            train_score,
            objective,
            n_iter,
            converged,
            val_matrix,
            y_val,
            val_weight,
            columns,
            time.perf_counter() - started,
        )
        flat = w.ravel()
        nonzero = np.flatnonzero(flat)
        rows.append((nonzero, flat[nonzero].copy()))
        intercepts.append(intercept)
        steps.append(step)
        if callback is not None and callback(step):
            stop_reason = "callback"
            break
        if max_rules is not None and step.n_terms > max_rules:
            stop_reason = "max_rules"
            break
        if spec.past_its_best(steps, best_step(steps, max_rules, spec.selection)):
            stop_reason = "past_its_best"
            break

    indptr = np.cumsum([0] + [len(idx) for idx, _ in rows])
    indices = np.concatenate([idx for idx, _ in rows]) if rows else np.zeros(0, dtype=np.int64)
    coefs = np.concatenate([vals for _, vals in rows]) if rows else np.zeros(0)
    coef_path = sp.csr_matrix((coefs, indices, indptr), shape=(len(rows), n_leaves * n_classes))
    return PathResult(steps, coef_path, np.asarray(intercepts), lambda_max, spec, stop_reason, n_classes)


@dataclass
class _Setup:
    """The problem a path solves (the penalties' units, the state at zero weights, the kernels of its loss)."""

    matrix: object  # the LeafMatrix without the leaves of too few rows, in M's units
    problem: Problem
    state: object
    scale: np.ndarray  # the solver's weights are w / scale
    n_classes: int
    kernels: object  # the GBCD module: lambda_max
    solve: object  # a step's solve
    objective: object  # the FIRE objective a step records

    @classmethod
    def of(cls, matrix, y, weights, spec: PathSpec) -> "_Setup":
        loss = spec.path_loss()
        loss.check_targets(y, "y", weights)
        matrix = matrix.without_small_leaves(spec.min_support_rows(len(y)))
        if spec.scaling == "unit":
            solved, scale = matrix.unit_columns(weights)
        else:
            solved, scale = matrix, np.ones(matrix.shape[1])
        problem = Problem.from_leaf_matrix(solved, y, weights, loss, spec.penalty_used(), spec.gamma, spec.mcp_scaling)
        if loss.per_class:
            n_classes = int(y.max()) + 1
            state = multinomial_gbcd.ClassState.initial(problem, n_classes)
            solve, objective = CLASS_SOLVERS[spec.block_selection], multinomial_gbcd.objective_value
            return cls(matrix, problem, state, scale, n_classes, multinomial_gbcd, solve, objective)
        solve = loss.step_solve(spec.penalty_used(), SOLVERS[spec.block_selection], gbcd)
        return cls(matrix, problem, State.initial(problem, loss), scale, 1, gbcd, solve, loss.path_objective(gbcd))


def path_lambda_max(matrix, y, spec: PathSpec, sample_weight=None) -> float:
    """lambda_max of the path ``fit_path(matrix, y, spec, sample_weight=...)`` would solve: the smallest lambda_s
    at which every weight is zero (cross-validation's folds share the grid of all the rows)."""
    y = np.ascontiguousarray(y, dtype=np.float64)
    setup = _Setup.of(matrix, y, _validated_sample_weight(sample_weight, len(y)), spec)
    return float(setup.kernels.lambda_max(setup.problem, setup.state))


def path_grid(spec: PathSpec, lambda_max: float) -> np.ndarray:
    """The lambda_s steps of a path: the spec's own, or its geometric grid below ``lambda_max``."""
    if spec.lambdas is not None:
        return np.asarray(spec.lambdas)
    if lambda_max > 0:
        return lambda_grid(lambda_max, spec.n_lambdas, spec.lambda_min_ratio)
    return np.zeros(1)


def _training_score(loss, problem, state, matrix, w, intercept, polished):
    """``intercept + M w`` on the training rows: from the state where it holds them and its weights are the
    step's (``Loss.state_score``, O(n)), else computed afresh (O(n T))."""
    if loss.per_class:
        return class_scores(matrix, w, intercept)
    kept = None if polished else loss.state_score(problem, state)
    return intercept + matrix.matvec(w) if kept is None else kept


def _record_step(
    index,
    lam,
    lam_f,
    loss,
    problem,
    w,
    intercept,
    train_score,
    objective,
    n_iter,
    converged,
    val_matrix,
    y_val,
    val_weight,
    columns,
    seconds,
):
    active = w != 0 if w.ndim == 1 else np.any(w != 0, axis=1)
    rules = active[: problem.first_linear]  # then the linear terms' columns
    column_trees = columns.column_trees
    if column_trees is None:
        column_trees = np.repeat(np.arange(len(problem.offsets) - 1), np.diff(problem.offsets))[: len(rules)]
    n_rules = int(rules.sum()) if columns.column_rules is None else len(np.unique(columns.column_rules[rules]))
    n_linear = int(active[problem.first_linear :].sum())
    train = loss.step_metrics(problem.y, train_score, problem.sample_weight)
    val = {}
    if val_matrix is not None:
        val_score = class_scores(val_matrix, w, intercept) if w.ndim == 2 else intercept + val_matrix.matvec(w)
        val = loss.step_metrics(y_val, val_score, val_weight)
    n_antecedents = None
    if columns.leaf_ancestors is not None:
        n_antecedents = int(count_antecedents(rules, *columns.leaf_ancestors))
    return PathStep(
        index=index,
        lambda_s=float(lam),
        lambda_f=lam_f,
        n_rules=n_rules,
        n_linear=n_linear,
        n_terms=n_rules + n_linear,
        n_trees=len(np.unique(column_trees[rules])),
        n_antecedents=n_antecedents,
        train_loss=train["loss"],
        val_loss=val.get("loss"),
        **{
            f"{rows}_{name}": found.get(name)
            for rows, found in (("train", train), ("val", val))
            for name in METRIC_NAMES
        },
        objective=float(objective),
        n_iter=int(n_iter),
        converged=bool(converged),
        seconds=seconds,
    )


def class_scores(matrix, w, intercept):
    """``intercept + M W`` (n, K) of per-class weights ``w`` (R, K): O(n T K)."""
    return intercept + np.column_stack([matrix.matvec(np.ascontiguousarray(w[:, k])) for k in range(w.shape[1])])
