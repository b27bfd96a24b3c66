"""What every loss module shares: the descriptor a loss registers (:class:`Loss`, with its :class:`Metric` list) and
the column entry the kernels read a column's rows with.

A loss is one module of this package with two halves (docs/solver-api.md, "Adding a loss"): its numba kernels,
which ``solver.losses.kernels`` dispatches by the loss's ``code``, and one instance of a :class:`Loss` subclass,
registered in ``solver.losses.LOSSES``, which the rest of the library and the service read instead of naming the
loss.
"""

from dataclasses import dataclass

import numpy as np
from numba import njit

from .. import polish

# the most a rule may add to a score (multinomial: the norm of its amounts; Poisson, in a fused tree's steps: its
# log rate): odds or a rate factor of e^20 (5e8) say certainty; without a bound a nearly pure leaf (or one whose
# rows count nothing) in MCP's flat region has no finite minimiser and its weight never settles
MAX_AMOUNT = 20.0


@njit(cache=True, inline="always")
def column_entry(problem, j, p):
    """``v_j e_ij`` of column j at its position p (``solver.problem.Problem``): ``v_j`` for a rule."""
    if j < problem.first_linear:
        return problem.values[j]
    return problem.values[j] * problem.linear_values[p - problem.linear_start]


def unchecked(w):
    """A state's (gradient, checked) fields before its first full-gradient check (``solver.problem.State``), for
    weights ``w`` ((R,) or (R, K) with K intercepts)."""
    n_intercepts = 1 if w.ndim == 1 else w.shape[1]
    return np.zeros(w.shape), np.full(w.size + n_intercepts, np.nan)


@dataclass(frozen=True)
class Metric:
    """A readable metric of a path step (``solver.path.PathStep``'s ``train_<name>`` and ``val_<name>``)."""

    name: str  # "r2", "auc", ..., "loss" for the loss itself
    label: str  # how people read it: "R²", "AUC", "log loss", ...


# the readable metrics of a classifier's steps (logistic, multinomial), most telling first
CLASSIFIER_METRICS = (
    Metric("auc", "AUC"),
    Metric("accuracy", "accuracy"),
    Metric("brier", "Brier score"),
    Metric("loss", "log loss"),
)


@dataclass(frozen=True)
class Loss:
    """A loss as the library and the service read it. Each loss module defines a subclass, which provides the
    methods below that raise NotImplementedError, and registers one instance of it (``solver.losses``)."""

    name: str  # PathSpec.loss
    code: int  # the kernels' code (Problem.loss), dispatched by solver.losses.kernels; unique
    task: str  # the dataset task it is made for: "regression", "classification", "multiclass", "count"
    other_tasks: tuple[str, ...]  # the dataset tasks where a path may also ask for it
    link: str  # how a score becomes the prediction: "identity", "logit", "softmax", "log"
    rule_link: str | None  # the RuleEnsemble link of its rules (None: RuleEnsemble's default for the amounts)
    classifier: bool  # y holds class codes, the forest is a classifier, the rules have classes
    per_class: bool  # one weight per class for each rule: its own state and solver (solver.losses.multinomial_gbcd)
    forest_task: str  # the scikit-learn forest train_forest builds: "Regressor" or "Classifier"
    nonnegative_target: bool  # y >= 0 (the estimator's positive_only tag)
    metrics: tuple[Metric, ...]  # the readable metrics of a path step in the order people read them, "loss" included
    chart_metric: str  # the metric a chart of the path shows
    selections: tuple[str, ...]  # the PathSpec.selection values it allows
    polish_default: bool  # PathSpec.polish where it is None
    # why PathSpec.polish=True is refused (a loss whose refit, ``refit``, cannot be made right); None: allowed
    polish_refusal: str | None = None
    has_intercept: bool = True  # False: the loss ignores a constant added to every score (Cox), b stays 0
    penalty_default: str = "mcp"  # PathSpec.penalty where it is None

    @property
    def polish_allowed(self) -> bool:
        return self.polish_refusal is None

    def check_targets(self, y, name, sample_weight=None):
        """Raise a ValueError naming ``name`` where ``y`` (float) is no target of this loss (with positive weight
        where ``sample_weight`` is given)."""

    def curvature_scale(self, y, sample_weight) -> float:
        """kappa of the kernels' curvature ``c_j = kappa S_j v_j^2`` (solver.problem.Problem)."""
        raise NotImplementedError

    def initial_state(self, problem):
        """The fields (w, residual, intercept, residual_sum, score) of the single-output state where a path starts
        (``solver.problem.State.initial``): w = 0, the intercept-only model."""
        raise NotImplementedError

    def configured(self, spec):
        """The loss with the settings of ``spec`` (a PathSpec) it reads (Tweedie: its power); itself by default."""
        return self

    def step_solve(self, penalty, solve, kernels):
        """The solve a path step runs, given the GBCD ``solve`` of the path's block selection and the GBCD module
        ``kernels`` (passed in: GBCD's kernels import the losses'): that solve, unless the loss has a strategy of its
        own for ``penalty``."""
        return solve

    def path_objective(self, kernels):
        """The FIRE objective a path step records, ``objective(problem, state, lam, lam_f)``: GBCD's (``kernels``, the
        GBCD module), unless the kernels do not compute this loss's value (``solver.losses.newton.loss_objective``)."""
        return kernels.objective_value

    def initial_intercept(self, y, sample_weight) -> float:
        """b of the intercept-only model (where a Newton path and a likelihood refit start)."""
        raise NotImplementedError

    def refit(self, columns, y, sample_weight):
        """(weights of ``columns``, a sparse (n, k) matrix of the rules a path step selected, and the intercept) of
        this loss's fit on them without the penalties, with ``solver.polish``'s tiny ridge: the polish of a step
        (``PathSpec.polish``). By default Newton's method on the loss's own likelihood
        (``solver.polish.likelihood_newton``: ``loss_total``, ``weight_derivatives``, ``initial_intercept``, the
        intercept only where ``has_intercept``); the squared loss solves its least squares directly."""
        return polish.likelihood_newton(self, columns, y, sample_weight)

    def weight_derivatives(self, y, score, sample_weight, design):
        """(gradient, Hessian) of ``loss_total`` at scores ``score`` in the weights of the columns of ``design``
        (sparse (n, k)), dense (k,) and (k, k): ``-design^T (s r)`` and ``design^T diag(s h) design`` with ``r`` and
        ``h`` from ``newton_terms``, the exact Hessian of a loss that sums a term per row (Cox's adds its risk sets'
        coupling)."""
        residual, curvature = self.newton_terms(y, score, sample_weight)
        gradient = design.T @ -(sample_weight * residual)
        hessian = (design.T @ design.multiply((sample_weight * curvature)[:, None])).toarray()
        return gradient, hessian

    def newton_terms(self, y, score, sample_weight):
        """(residual, curvature) per unit of row weight at scores ``score``: ``d loss / d score_i = -s_i r_i`` and
        ``d2 loss / d score_i2`` (or the diagonal of the Hessian) ``~ s_i h_i`` (``solver.losses.newton``)."""
        raise NotImplementedError

    def loss_total(self, y, score, sample_weight) -> float:
        """The loss term of the FIRE objective at scores ``score`` (weighted sum over the rows), for the losses whose
        value the kernels do not compute (``path_objective``)."""
        raise NotImplementedError

    def baseline(self, y, score, sample_weight):
        """What a model of this loss keeps of its training rows beyond the rules (targets ``y``, scores ``score``):
        Cox's baseline cumulative hazard (``RulesDocument.baseline_hazard``); None for the others."""
        return None

    def offset_target(self, y, sample_weight, offset):
        """(target, row weights) whose fit with this loss is the fit of ``y`` and ``sample_weight`` (None: ones) with
        ``offset`` added to every row's score, exactly (the objectives differ by a constant). Users' offsets and
        exposures enter the library this way; a loss with no such form raises a ValueError."""
        raise ValueError(f"the {self.name} loss takes no offset (offsets are for the log-link losses and squared)")

    def forest_target(self, y):
        """What a forest trained for this loss regresses or classifies (``solver.fitting.train_forest``): ``y``."""
        return y

    def state_score(self, problem, state):
        """The training scores ``b + M w`` read from the single-output ``state`` (O(n)), where it holds them as a
        fresh computation would; None: the path computes them afresh (O(n T)): a score kept by moves carries the
        rounding of every move, enough to break the ties AUC counts."""
        return None

    def mean_loss(self, y, score, sample_weight=None) -> float:
        """The per-row loss of scores ``score`` against ``y`` averaged over the rows (weighted where
        ``sample_weight`` is given): PathStep's ``train_loss`` and ``val_loss``."""
        raise NotImplementedError

    def step_metrics(self, y, score, sample_weight=None) -> dict:
        """The step's metrics (name -> value or None) on rows with targets ``y`` and scores ``score``: the names of
        ``metrics``, as ``solver.path.PathStep`` defines them."""
        raise NotImplementedError

    def response(self, classes=None) -> str | None:
        """What its rules add where it is not the target itself (``RuleEnsemble.response``)."""
        return None

    def predicts(self, target, classes=None) -> str:
        """What a model of this loss predicts, in words, for a target column named ``target``."""
        return str(target)

    def warmup_target(self, y):
        """A valid target of this loss made from a continuous ``y`` (the worker's warm-up fits)."""
        raise NotImplementedError

    def to_document(self) -> dict:
        """The loss as API documents carry it (JSON-ready)."""
        return {
            "name": self.name,
            "task": self.task,
            "link": self.link,
            "classifier": self.classifier,
            "per_class": self.per_class,
            "metrics": [{"name": metric.name, "label": metric.label} for metric in self.metrics],
            "chart_metric": self.chart_metric,
            "other_tasks": list(self.other_tasks),
            "selections": list(self.selections),
        }


# the descriptor fields the log-link losses of the Tweedie family share (LogLinkMean's subclasses' registrations)
LOG_LINK_FIELDS = dict(
    link="log",
    rule_link="log",
    classifier=False,
    per_class=False,
    forest_task="Regressor",
    nonnegative_target=True,
    metrics=(Metric("loss", "deviance"), Metric("mae", "MAE")),
    chart_metric="loss",
    selections=("loss", "1se"),
    polish_default=False,
)


class LogLinkMean(Loss):
    """What the log-link losses of the Tweedie family share (Poisson, variance power 1; Tweedie, p in (1, 2); Gamma,
    2): the mean ``exp(score)``, the steps' deviance and MAE, the intercept-only model, and offsets."""

    @property
    def variance_power(self) -> float:
        """p of the variance ``mean^p``."""
        raise NotImplementedError

    def initial_intercept(self, y, sample_weight) -> float:
        """The log of the weighted mean of ``y``: the intercept-only optimum whatever the power."""
        return float(np.log(np.dot(sample_weight, y) / sample_weight.sum()))

    def offset_target(self, y, sample_weight, offset):
        """With ``mu = exp(offset + eta)`` a row's loss is ``exp((2 - p) offset)`` times the loss of ``y exp(-offset)``
        at ``exp(eta)``, up to a constant (the unit deviance scales as ``d(c y, c mu) = c^(2-p) d(y, mu)``)."""
        y, offset = checked_offset(y, offset)
        weights = np.ones_like(y) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        return y * np.exp(-offset), weights * np.exp((2.0 - self.variance_power) * offset)

    def step_metrics(self, y, score, sample_weight=None):
        """The loss (the mean deviance) and ``mae`` of the mean ``exp(score)``."""
        return {
            "loss": self.mean_loss(y, score, sample_weight),
            "mae": float(np.average(np.abs(y - np.exp(score)), weights=sample_weight)),
        }

    def response(self, classes=None):
        return "log mean"

    def predicts(self, target, classes=None):
        return f"the mean of {target} (amounts)"


def checked_offset(y, offset):
    """(y, offset) as float arrays; a ValueError unless the offset is finite with one value per row of ``y``."""
    y, offset = np.asarray(y, dtype=np.float64), np.asarray(offset, dtype=np.float64)
    if offset.shape != y.shape or not np.all(np.isfinite(offset)):
        raise ValueError(f"offset must be finite, one per row of y ({y.shape[0]}), got shape {offset.shape}")
    return y, offset
