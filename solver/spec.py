"""The settings of a FIRE fit, each with its one default and its one check.

``PathSpec`` holds everything that shapes a path and its selected step; ``ForestSpec`` holds the recipe of
a forest trained for the fit. ``fit_path``, the estimators, the orchestration in ``solver.fitting`` and the
service's request schemas all take their defaults and their validation from here, so the library and the
service cannot disagree on what an omitted setting means.

Every check of a spec is made, and a spec with faults raises one :class:`SpecError`, a ``ValueError`` that names
every setting at fault (``faults``), so that a caller hears of them all at once; a check that reads another
setting is made only where that setting passed its own check.
"""

import math
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import MISSING, asdict, dataclass, field, fields
from numbers import Integral, Real
from typing import Literal, get_args

from .losses import DEFAULT_LOSS, LOSSES, LossName

# each choice as a type (for annotations: a type checker reads these) and as the tuple of its values (for checks)
Loss = LossName  # the registry's (solver.losses), named here for the service's schemas
Penalty = Literal["mcp", "l1"]
Selection = Literal["loss", "auc", "cindex", "1se"]
Scaling = Literal["unit", "leaf_value"]
CandidateKind = Literal["leaves", "nodes"]
McpScaling = Literal["block", "plain"]
BlockSelection = Literal["greedy", "cyclic"]
ForestKind = Literal["random_forest", "extra_trees", "gradient_boosting"]
MaxFeaturesName = Literal["sqrt", "log2"]
PENALTIES: tuple[Penalty, ...] = get_args(Penalty)
SELECTIONS: tuple[Selection, ...] = get_args(Selection)
SCALINGS: tuple[Scaling, ...] = get_args(Scaling)
CANDIDATE_KINDS: tuple[CandidateKind, ...] = get_args(CandidateKind)
MCP_SCALINGS: tuple[McpScaling, ...] = get_args(McpScaling)
BLOCK_SELECTIONS: tuple[BlockSelection, ...] = get_args(BlockSelection)
FOREST_KINDS: tuple[ForestKind, ...] = get_args(ForestKind)
MAX_FEATURES_NAMES: tuple[MaxFeaturesName, ...] = get_args(MaxFeaturesName)
# lambda_f = DEFAULT_FUSION_RATIO * lambda_s where neither lambda_f nor fusion_ratio is given: the paper's 0.5; in
# the default unit scaling it shares antecedents at no cost in error under 15 rules (bench/results/quality.md).
DEFAULT_FUSION_RATIO = 0.5
# 1% of the training rows: no rule of a handful of rows (airquality's support-1 rules); neutral on depth-3 forests,
# lower test error on depth-7 ones (bench/results/quality.md)
DEFAULT_MIN_SUPPORT = 0.01
# linear terms' winsorization quantile: RuleFit's trim quantile and pre's winsfrac
DEFAULT_LINEAR_QUANTILE = 0.025
# Candidates by measurement (bench/results/quality.md, bench/results/classification_quality.json; 5 splits, < 15
# terms, depth-3 forests): linear terms beside the leaves lower the median test error by 12.5% on the 7 regression
# tables and the log loss by 0.9% on the 5 binary ones, at no measurable cost in time, so they are on. Rules from
# every node give no lower error at depth 3 (fewer antecedents instead) at 2.4-3x the path time: they are offered
# (candidates="nodes", and in READABLE), not the default.
DEFAULT_LINEAR_TERMS = True
# The documented setting for rule sets that share antecedents (issue 18's "fusion that pays with margin"): rules
# from every node of at most two conditions, beside linear terms, with the default fusion. Short rules of one path
# share their conditions, and linear terms take up the trends that rules would spell out in many splits. Measured
# against MCP alone at 10-15 terms in bench/results/quality.md (it replaced fusion_ratio=1, whose 33% fewer
# antecedents at +4% error did not hold on every table).
READABLE = {"candidates": "nodes", "max_rule_length": 2, "linear_terms": True}
# The documented setting for rules that repeat on another sample (issue 29, bench/results/stability.md): rules of one
# condition from every node of forests split only at the deciles, beside linear terms; estimator parameters (a path's
# and a forest's: FireRegressor(**STABLE)). On two disjoint halves of 12 tables their median Dice index is 0.65
# against the defaults' 0.22 and SIRUS's 0.43, at 0.99 times the defaults' median error; they are not the default
# because rules of one condition cannot say an interaction, which costs where the target has them (test error +56% on
# churn, +33% on stock, +13% on kin8nm).
STABLE = {"candidates": "nodes", "max_rule_length": 1, "linear_terms": True, "threshold_bins": 10}
# A path with validation rows ends DEFAULT_PATIENCE steps past its best step once it holds PAST_BEST_RULE_FACTOR
# times the best step's rules: the long tail of a path (thousands of rules at 1e-3 lambda_max, most of its time) is
# past any step the selection would take.
DEFAULT_PATIENCE = 10
PAST_BEST_RULE_FACTOR = 2
# cross-validation's folds: each is a path and a forest, so more than 20 costs much and says little more
MAX_CV_FOLDS = 20


class SpecError(ValueError):
    """Invalid settings: ``faults`` holds a (setting, what is wrong) pair per setting at fault, in the order of the
    checks; ``field`` and ``detail`` are the first of them."""

    def __init__(self, field: str, detail: str, faults: Sequence[tuple[str, str]] = ()):
        self.faults = tuple(faults) or ((field, detail),)
        super().__init__("; ".join(f"{name}: {text}" for name, text in self.faults))
        self.field = field
        self.detail = detail

    @classmethod
    def of(cls, faults: Sequence[tuple[str, str]]) -> "SpecError":
        """The error of these (setting, what is wrong) faults (at least one)."""
        return cls(*faults[0], faults)


def _doc(text: str) -> dict:
    return {"description": text}


def _is_number(value) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)


def _is_count(value) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


# the faults of the checks being made (``_checked``); None: a failed check raises at once
_collected: ContextVar[list[tuple[str, str]] | None] = ContextVar("spec_faults", default=None)


def _require(condition: bool, name: str, detail: str) -> bool:
    """Whether ``condition`` holds; where it does not, the fault of setting ``name`` (its first: a setting's later
    faults follow from it) is kept for :func:`_checked`, or raised outside of it."""
    if condition:
        return True
    faults = _collected.get()
    if faults is None:
        raise SpecError(name, detail)
    if all(field != name for field, _ in faults):
        faults.append((name, detail))
    return False


def _checked(checks: Callable[[], None]) -> None:
    """Make every check of ``checks`` (calls of :func:`_require`), then raise one :class:`SpecError` of all their
    faults, if any."""
    faults: list[tuple[str, str]] = []
    token = _collected.set(faults)
    try:
        checks()
    finally:
        _collected.reset(token)
    if faults:
        raise SpecError.of(faults)


class _Spec:
    """Shared behaviour of the frozen settings dataclasses below."""

    @classmethod
    def defaults(cls) -> dict:
        return {f.name: f.default for f in fields(cls) if f.default is not MISSING}

    @classmethod
    def descriptions(cls) -> dict:
        return {f.name: f.metadata.get("description", "") for f in fields(cls)}

    @classmethod
    def from_dict(cls, values: dict):
        """The spec of a mapping of settings; unknown names are a :class:`SpecError` naming each."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise SpecError.of([(name, f"is not a setting; the settings are {sorted(known)}") for name in unknown])
        return cls(**values)

    def __post_init__(self):
        _checked(self._check)

    def _check(self) -> None:
        """Every check of the settings (calls of ``_require``)."""

    def to_dict(self) -> dict:
        return asdict(self)

    def replace(self, **changes):
        return self.from_dict({**self.to_dict(), **changes})


@dataclass(frozen=True)
class PathSpec(_Spec):
    """Every setting of a FIRE path: loss, penalty, fusion, lambda grid, rule budget, solver, validation split."""

    loss: str = field(
        default=DEFAULT_LOSS,
        metadata=_doc(
            "'squared' (regression), 'logistic' (binary classification: y holds 0/1 labels and the rules add "
            "log-odds of label 1), 'multinomial' (K classes: y holds class codes 0..K-1, each rule adds one log-odds "
            "amount per class and is in or out for all classes at once), 'poisson' (counts or rates: y >= 0, the "
            "rules multiply the rate; an exposure enters as row weights), 'tweedie' (amounts with many zeros: y >= 0, "
            "the rules multiply the mean; see power), 'gamma' (positive amounts: y > 0, the rules multiply the mean) "
            "or 'cox' (time to an event: y holds +time where the event happened, -time where censored; the rules "
            "multiply the hazard)"
        ),
    )
    power: float = field(
        default=1.5,
        metadata=_doc(
            "the Tweedie variance power p in (1, 2) of loss='tweedie' (variance mean^p: 1 is Poisson, 2 Gamma; "
            "1.5 is the usual start for claim amounts); the other losses ignore it"
        ),
    )
    penalty: str | None = field(
        default=None,
        metadata=_doc(
            "sparsity penalty: 'mcp' (selects without shrinking large weights) or 'l1'; None: the loss's own, 'mcp' "
            "for every loss but cox, 'l1' for cox (on a few hundred events MCP's validation deviance keeps one or two "
            "linear terms and no rule)"
        ),
    )
    gamma: float = field(
        default=1.1,
        metadata=_doc(
            "MCP concavity (> 1 in block scaling, > 0 in plain); near 1 selects aggressively, large acts like l1"
        ),
    )
    mcp_scaling: str = field(
        default="block",
        metadata=_doc("'block': the paper's per-tree concavity gamma / L_t; 'plain': one gamma for every leaf"),
    )
    scaling: str = field(
        default="unit",
        metadata=_doc(
            "units the penalties weigh a rule in: 'unit' (its column of M scaled to unit norm on the training rows, "
            "so lambda_s and lambda_f mean the same for a rule of 10 rows as of 1000 and fusion compares neighbours' "
            "contributions per row) or 'leaf_value' (M's columns are the leaf values, as in the paper)"
        ),
    )
    lambda_f: float | None = field(
        default=None, metadata=_doc("fixed fusion strength; give this or fusion_ratio, not both")
    )
    fusion_ratio: float | None = field(
        default=None,
        metadata=_doc(
            f"fusion strength as a multiple of lambda_s at every step; {DEFAULT_FUSION_RATIO} when neither this nor "
            "lambda_f is given, 0 for no fusion"
        ),
    )
    lambdas: tuple[float, ...] | None = field(
        default=None,
        metadata=_doc(
            "explicit lambda_s grid (positive, used in decreasing order); otherwise n_lambdas geometric steps"
        ),
    )
    n_lambdas: int = field(
        default=50, metadata=_doc("steps of the geometric grid from lambda_max down to lambda_min_ratio * lambda_max")
    )
    lambda_min_ratio: float = field(default=1e-3, metadata=_doc("smallest lambda_s as a fraction of lambda_max"))
    max_rules: int | None = field(
        default=None,
        metadata=_doc(
            "rule budget of the selected step: the most terms it may hold, rules and linear terms counted alike; the "
            "path stops after the first step past it"
        ),
    )
    patience: int | None = field(
        default=DEFAULT_PATIENCE,
        metadata=_doc(
            "a path with validation rows stops once this many steps have passed its best one (the selection within "
            f"max_rules) and it holds at least {PAST_BEST_RULE_FACTOR} times the best step's terms; None: every step "
            "of the grid"
        ),
    )
    selection: str = field(
        default="loss",
        metadata=_doc(
            "how the selected step is chosen among those within max_rules: 'loss' (the lowest validation loss: "
            "squared error, log loss for the logistic and multinomial losses, Poisson deviance) or 'auc' (the highest "
            "validation AUC, macro one-vs-rest for the multinomial loss; classifiers only), 'cindex' (the highest "
            "validation C-index; loss='cox') or '1se' (the sparsest step "
            "whose cross-validated loss is within one standard error of the lowest: glmnet's one-standard-error "
            "rule; needs cv_folds)"
        ),
    )
    tol: float = field(
        default=1e-4,
        metadata=_doc("stationarity tolerance relative to lambda_max (no direction entry or block move larger)"),
    )
    max_iter: int = field(default=10_000, metadata=_doc("cap on solver passes per lambda step"))
    block_selection: str = field(
        default="greedy",
        metadata=_doc("'greedy': steepest trees and leaves first (the paper's GBCD); 'cyclic': every tree in turn"),
    )
    inner_iters: int = field(default=3, metadata=_doc("fused proximal steps per visit of a tree"))
    min_support: int | float = field(
        default=DEFAULT_MIN_SUPPORT,
        metadata=_doc(
            "leaves that fewer training rows reach are not candidate rules: a row count (an integer >= 0) or a "
            "fraction of the training rows in (0, 1)"
        ),
    )
    candidates: str | None = field(
        default=None,
        metadata=_doc(
            "candidate rules: 'leaves' (each leaf of each tree, the paper's) or 'nodes' (every node below the root: "
            "a node at depth d is a rule of d conditions, so shallow trees' short rules and deep ones' long rules "
            "compete; solver.candidates); None: the candidates that can satisfy max_rule_length, 'leaves' without "
            "one, 'nodes' (every node, cut to the cap) with one"
        ),
    )
    max_rule_length: int | None = field(
        default=None,
        metadata=_doc("the most conditions (antecedents) a rule may have: only candidates this deep or shallower"),
    )
    linear_terms: bool = field(
        default=DEFAULT_LINEAR_TERMS,
        metadata=_doc(
            "also offer each numeric column as a linear term (winsorized at linear_quantile, scaled as RuleFit "
            "does), selected and counted in the rule budget like a rule"
        ),
    )
    linear_quantile: float = field(
        default=DEFAULT_LINEAR_QUANTILE,
        metadata=_doc("linear terms are clipped to these lower and upper quantiles of the training rows, in [0, 0.5)"),
    )
    polish: bool | None = field(
        default=None,
        metadata=_doc(
            "refit the weights of each step's rules (and the intercept, where the loss has one) without the "
            "penalties on the training rows by the loss's own likelihood (least squares, logistic, Poisson, Tweedie "
            "or Gamma regression, Cox's partial likelihood), keeping the rules the penalties selected "
            "(solver.polish); refused for the multinomial loss; None: on for the squared loss, off for the others "
            "(unpenalised logistic refits of small, nearly pure leaves overfit: on the classification tables, "
            "bench/classification.py, validation log loss rose from the first rule)"
        ),
    )
    validation_fraction: float = field(
        default=0.2,
        metadata=_doc(
            "share of the rows held out to select the step when no validation rows are given and cv_folds is None"
        ),
    )
    cv_folds: int | None = field(
        default=None,
        metadata=_doc(
            "cross-validate the step instead of holding rows out: one path per fold of the rows (K >= 2 folds drawn "
            "with random_state), each on the lambda grid of all the rows with its own forest trained on the other "
            "folds; a step's validation loss and metrics are the folds' means, with the standard error of the loss, "
            "and the rules are refitted on all the rows (solver.cross_validation)"
        ),
    )
    random_state: int = field(default=0, metadata=_doc("seed of the validation split"))

    def _check(self) -> None:
        loss_known = _require(self.loss in LOSSES, "loss", f"must be one of {list(LOSSES)}, got {self.loss!r}")
        _require(_is_number(self.power) and 1 < self.power < 2, "power", f"must be in (1, 2), got {self.power!r}")
        _require(
            self.penalty is None or self.penalty in PENALTIES,
            "penalty",
            f"must be one of {list(PENALTIES)} or none, got {self.penalty!r}",
        )
        _require(
            self.mcp_scaling in MCP_SCALINGS,
            "mcp_scaling",
            f"must be one of {list(MCP_SCALINGS)}, got {self.mcp_scaling!r}",
        )
        _require(self.scaling in SCALINGS, "scaling", f"must be one of {list(SCALINGS)}, got {self.scaling!r}")
        floor = 1.0 if self.mcp_scaling == "block" else 0.0
        _require(
            _is_number(self.gamma) and self.gamma > floor,
            "gamma",
            f"must be a number > {floor:g} ({self.mcp_scaling} MCP scaling), got {self.gamma!r}",
        )
        for name in ("lambda_f", "fusion_ratio"):
            value = getattr(self, name)
            _require(
                value is None or (_is_number(value) and value >= 0),
                name,
                f"must be a finite non-negative number, got {value!r}",
            )
        _require(
            self.lambda_f is None or self.fusion_ratio is None,
            "lambda_f",
            "give either lambda_f (fixed) or fusion_ratio (lambda_f = ratio * lambda_s), not both",
        )
        if self.lambdas is not None:
            try:
                grid = tuple(float(v) for v in self.lambdas)
            except (TypeError, ValueError):
                grid = ()
            _require(
                len(grid) > 0 and all(math.isfinite(v) and v > 0 for v in grid),
                "lambdas",
                "must be a non-empty list of finite positive numbers",
            )
            object.__setattr__(self, "lambdas", tuple(sorted(grid, reverse=True)))
        _require(
            _is_count(self.n_lambdas) and self.n_lambdas >= 1,
            "n_lambdas",
            f"must be an integer >= 1, got {self.n_lambdas!r}",
        )
        _require(
            _is_number(self.lambda_min_ratio) and 0 < self.lambda_min_ratio < 1,
            "lambda_min_ratio",
            f"must be in (0, 1), got {self.lambda_min_ratio!r}",
        )
        _require(
            self.max_rules is None or (_is_count(self.max_rules) and self.max_rules >= 0),
            "max_rules",
            f"must be a non-negative integer or none, got {self.max_rules!r}",
        )
        _require(
            self.patience is None or (_is_count(self.patience) and self.patience >= 1),
            "patience",
            f"must be an integer >= 1 or none, got {self.patience!r}",
        )
        _require(
            self.selection in SELECTIONS, "selection", f"must be one of {list(SELECTIONS)}, got {self.selection!r}"
        )
        allowing = [name for name, loss in LOSSES.items() if self.selection in loss.selections]
        _require(
            not loss_known or self.loss in allowing,
            "selection",
            f"{self.selection!r} needs loss=" + " or ".join(repr(name) for name in allowing),
        )
        _require(
            self.cv_folds is None or (_is_count(self.cv_folds) and 2 <= self.cv_folds <= MAX_CV_FOLDS),
            "cv_folds",
            f"must be an integer in [2, {MAX_CV_FOLDS}] or none, got {self.cv_folds!r}",
        )
        _require(
            self.selection != "1se" or self.cv_folds is not None,
            "selection",
            "'1se' reads the standard errors of a cross-validated path: give cv_folds (5 or 10), or use 'loss'",
        )
        _require(_is_number(self.tol) and 0 < self.tol < 1, "tol", f"must be in (0, 1), got {self.tol!r}")
        _require(
            _is_count(self.max_iter) and self.max_iter >= 1,
            "max_iter",
            f"must be an integer >= 1, got {self.max_iter!r}",
        )
        _require(
            self.block_selection in BLOCK_SELECTIONS,
            "block_selection",
            f"must be one of {list(BLOCK_SELECTIONS)}, got {self.block_selection!r}",
        )
        _require(
            _is_count(self.inner_iters) and self.inner_iters >= 1,
            "inner_iters",
            f"must be an integer >= 1, got {self.inner_iters!r}",
        )
        _require(
            (_is_count(self.min_support) and self.min_support >= 0)
            or (_is_number(self.min_support) and 0 < self.min_support < 1),
            "min_support",
            f"must be a row count >= 0 or a fraction in (0, 1), got {self.min_support!r}",
        )
        if self.candidates is None:  # resolved here, so a spec (and a job document) says what the fit used
            object.__setattr__(self, "candidates", "leaves" if self.max_rule_length is None else "nodes")
        _require(
            self.candidates in CANDIDATE_KINDS,
            "candidates",
            f"must be one of {list(CANDIDATE_KINDS)}, got {self.candidates!r}",
        )
        _require(
            self.max_rule_length is None or (_is_count(self.max_rule_length) and self.max_rule_length >= 1),
            "max_rule_length",
            f"must be an integer >= 1 or none, got {self.max_rule_length!r}",
        )
        _require(
            isinstance(self.linear_terms, bool), "linear_terms", f"must be true or false, got {self.linear_terms!r}"
        )
        _require(
            _is_number(self.linear_quantile) and 0 <= self.linear_quantile < 0.5,
            "linear_quantile",
            f"must be in [0, 0.5), got {self.linear_quantile!r}",
        )
        _require(
            self.polish is None or isinstance(self.polish, bool),
            "polish",
            f"must be true, false or null, got {self.polish!r}",
        )
        if loss_known:
            _require(
                not self.polish or LOSSES[self.loss].polish_allowed, "polish", str(LOSSES[self.loss].polish_refusal)
            )
        _require(
            _is_number(self.validation_fraction) and 0 <= self.validation_fraction < 1,
            "validation_fraction",
            f"must be in [0, 1), got {self.validation_fraction!r}",
        )
        _require(
            _is_count(self.random_state) and 0 <= self.random_state < 2**32,
            "random_state",
            f"must be an integer in [0, {2**32 - 1}], got {self.random_state!r}",
        )

    @property
    def n_steps(self) -> int:
        """How many lambda steps the path has at most (it may stop earlier at its rule budget)."""
        return len(self.lambdas) if self.lambdas else self.n_lambdas

    def min_support_rows(self, n_rows: int) -> int:
        """The fewest training rows (of ``n_rows``) a leaf must hold to be a candidate rule."""
        if _is_count(self.min_support):
            return int(self.min_support)
        return math.ceil(self.min_support * n_rows)

    def path_loss(self):
        """The path's loss (``solver.losses.Loss``) with the settings it reads from this spec (``Loss.configured``)."""
        return LOSSES[self.loss].configured(self)

    def penalty_used(self) -> str:
        """The sparsity penalty of the path: ``penalty``, or where it is None, the loss's ``penalty_default``."""
        return LOSSES[self.loss].penalty_default if self.penalty is None else self.penalty

    def polishes(self) -> bool:
        """Whether each step is polished: ``polish``, or where it is None, the loss's ``polish_default``."""
        return LOSSES[self.loss].polish_default if self.polish is None else self.polish

    def past_its_best(self, steps: Sequence, best: int | None) -> bool:
        """Whether a path whose steps so far are ``steps`` (``solver.path.PathStep``), the best of them at position
        ``best`` (``solver.path.best_step``), is done: it has validation losses, ``patience`` steps passed since its
        best and it holds at least PAST_BEST_RULE_FACTOR times the best step's terms (``n_terms``: rules and linear
        terms, as the budget counts them)."""
        if self.patience is None or best is None or steps[-1].val_loss is None:
            return False
        last, chosen = steps[-1], steps[best]
        return last.index - chosen.index >= self.patience and last.n_terms >= PAST_BEST_RULE_FACTOR * max(
            chosen.n_terms, 1
        )

    def fusion_strength(self, lambda_s: float) -> float:
        """lambda_f at the step with sparsity ``lambda_s``."""
        if self.lambda_f is not None:
            return float(self.lambda_f)
        ratio = DEFAULT_FUSION_RATIO if self.fusion_ratio is None else self.fusion_ratio
        return float(ratio * lambda_s)


@dataclass(frozen=True)
class ForestSpec(_Spec):
    """The recipe of a forest trained for a fit (scikit-learn regressors; deterministic for a fixed seed)."""

    kind: str = field(default="random_forest", metadata=_doc("'random_forest', 'extra_trees' or 'gradient_boosting'"))
    n_estimators: int = field(default=500, metadata=_doc("number of trees"))
    max_depth: int = field(default=3, metadata=_doc("depth of every tree: rules have at most this many conditions"))
    max_features: float | int | str | None = field(
        default="sqrt",
        metadata=_doc(
            "features tried per split as scikit-learn takes it: a fraction in (0, 1], a count, 'sqrt', 'log2', "
            "or None for all"
        ),
    )
    learning_rate: float = field(default=0.1, metadata=_doc("shrinkage of gradient boosting (other kinds ignore it)"))
    threshold_bins: int | None = field(
        default=None,
        metadata=_doc(
            "split each column only at its threshold_bins-quantiles on the training rows (SIRUS's restriction): the "
            "forests of two samples then split at nearly the same thresholds, so their rules repeat; None: any "
            "threshold"
        ),
    )
    random_state: int = field(default=0, metadata=_doc("seed of the forest"))

    def _check(self) -> None:
        _require(self.kind in FOREST_KINDS, "kind", f"must be one of {list(FOREST_KINDS)}, got {self.kind!r}")
        _require(
            _is_count(self.n_estimators) and self.n_estimators >= 1,
            "n_estimators",
            f"must be an integer >= 1, got {self.n_estimators!r}",
        )
        _require(
            _is_count(self.max_depth) and self.max_depth >= 1,
            "max_depth",
            f"must be an integer >= 1, got {self.max_depth!r}",
        )
        value = self.max_features
        valid = (
            value is None
            or value in MAX_FEATURES_NAMES
            or (_is_count(value) and value >= 1)
            or (_is_number(value) and not _is_count(value) and 0 < value <= 1)
        )
        _require(
            valid, "max_features", f"must be a fraction in (0, 1], a count >= 1, 'sqrt', 'log2' or none, got {value!r}"
        )
        _require(
            _is_number(self.learning_rate) and 0 < self.learning_rate <= 1,
            "learning_rate",
            f"must be in (0, 1], got {self.learning_rate!r}",
        )
        _require(
            self.threshold_bins is None or (_is_count(self.threshold_bins) and 2 <= self.threshold_bins <= 256),
            "threshold_bins",
            f"must be an integer in [2, 256] or none, got {self.threshold_bins!r}",
        )
        _require(
            _is_count(self.random_state) and 0 <= self.random_state < 2**32,
            "random_state",
            f"must be an integer in [0, {2**32 - 1}], got {self.random_state!r}",
        )

    def check_data(self, n_features: int, has_missing: bool) -> None:
        """The checks that need the training table: a :class:`SpecError` naming each setting at fault."""
        _checked(lambda: self._check_data(n_features, has_missing))

    def _check_data(self, n_features: int, has_missing: bool) -> None:
        _require(
            not (self.kind == "gradient_boosting" and has_missing),
            "kind",
            "gradient boosting cannot train on missing values: use random_forest or extra_trees, or fill them",
        )
        _require(
            not (_is_count(self.max_features) and self.max_features > n_features),
            "max_features",
            f"{self.max_features} exceeds the {n_features} features",
        )
