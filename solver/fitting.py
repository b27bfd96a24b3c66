"""The one orchestration of a FIRE fit, shared by the estimators and the service's workers.

    rows ── holdout_split ──► training rows ─► forest (trained here, on these rows only, or given)
                        └──► validation rows (or a separate validation table)
    forest + rows ─► leaf indices (computed here, or the caller's cached ones) ─► fit_path ─► best step
    best step ─► RuleEnsemble

The path's loss decides the task through its descriptor (``solver.losses``): its ``forest_task`` says which variant
of a ``ForestSpec`` is trained, a classifier's ``y`` holds class codes (:func:`binary_labels` turns any two labels
into 0/1, :func:`class_labels` K labels into 0..K-1), and its ``rule_link`` and ``response`` say what the rules'
amounts are (log-odds of ``classes[1]``, one log-odds amount per class, log rates, or the target itself).

Validation rows are never rows a forest trained here has seen. A forest given fitted is the caller's
responsibility: it should not have been trained on the validation rows either.
"""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from . import binning, cross_validation
from .candidates import Candidates, LinearTerms, numeric_features
from .encoding import TableEncoding
from .forest import TreeEnsemble, as_tree_ensemble
from .losses import get_loss
from .path import FrontierStep, PathResult, PathStep, RuleStep, fit_path, path_grid, path_lambda_max, stability_frontier
from .rules import RuleEnsemble
from .spec import DEFAULT_LOSS, ForestSpec, PathSpec, SpecError
from .stability import FoldStability, PathRuleKeys, fold_stability, half_sample_pairs, path_rule_keys

MIN_TRAINING_ROWS = 2


def holdout_split(n_rows: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(training rows, validation rows), each sorted: ``round(fraction * n_rows)`` rows drawn for validation.

    A fraction of 0 holds nothing out (the step is then chosen on the training loss).
    """
    n_val = int(round(n_rows * fraction))
    if fraction > 0 and (n_val < 1 or n_rows - n_val < MIN_TRAINING_ROWS):
        raise SpecError(
            "validation_fraction",
            f"{fraction} of {n_rows} rows leaves {n_val} validation and "
            f"{n_rows - n_val} training rows; at least 1 and "
            f"{MIN_TRAINING_ROWS} are needed",
        )
    order = np.random.default_rng(seed).permutation(n_rows)
    return np.sort(order[n_val:]), np.sort(order[:n_val])


def class_labels(values, max_classes: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(classes, y): the distinct labels of ``values`` in sorted order (strings, booleans, numbers, as given) and
    ``y`` the float code of each value's class, its position in ``classes`` (0/1 for two labels, as
    :func:`binary_labels`). Fewer than two labels, more than ``max_classes`` or missing ones are a ValueError."""
    values = np.asarray(values)
    if values.ndim != 1:
        raise ValueError(f"labels must be one-dimensional, got shape {values.shape}")
    if pd.isna(values).any():
        raise ValueError("labels must not be missing")
    classes, codes = np.unique(values, return_inverse=True)
    shown = [str(c) for c in classes[:5]]
    if len(classes) < 2:
        raise ValueError(f"classification needs at least two classes, got 1 class: {shown}")
    if max_classes is not None and len(classes) > max_classes:
        raise ValueError(f"{len(classes)} classes, more than the {max_classes} allowed: {shown}, ...")
    return classes, codes.astype(np.float64)


def binary_labels(values) -> tuple[np.ndarray, np.ndarray]:
    """(classes, y): the two distinct labels of ``values`` in sorted order (strings, booleans, numbers, as
    given) and ``y`` = 1.0 where a value is ``classes[1]``, 0.0 elsewhere: scikit-learn's convention, so
    ``classes[1]`` is the label whose log-odds logistic rules add. Anything but two distinct labels (missing
    ones included) is a ValueError."""
    values = np.asarray(values)
    if values.ndim != 1:
        raise ValueError(f"labels must be one-dimensional, got shape {values.shape}")
    if pd.isna(values).any():
        raise ValueError("labels must not be missing")
    classes = np.unique(values)
    shown = [str(c) for c in classes[:5]]
    if len(classes) > 2:  # scikit-learn's wording, which its estimator checks look for
        raise ValueError(f"Only binary classification is supported: got {len(classes)} classes, {shown}")
    if len(classes) < 2:
        raise ValueError(f"binary classification needs two classes, got 1 class: {shown}")
    return classes, (values == classes[1]).astype(np.float64)


def train_forest(spec: ForestSpec, X, y, sample_weight=None, feature_names=None, *, loss=DEFAULT_LOSS):
    """(fitted scikit-learn forest, its TreeEnsemble) of ``spec`` on these rows: the loss's ``forest_task``,
    regressors of its ``forest_target`` (``y``; Cox: martingale residuals), or classifiers of the class codes ``y``
    for the classifiers' losses (whose TreeEnsemble predicts the
    probabilities, or the log-odds for gradient boosting: see ``solver.sklearn_adapters``)."""
    from sklearn import ensemble as forests

    X = np.asarray(X, dtype=np.float64)
    spec.check_data(X.shape[1], bool(np.isnan(X).any()))
    common = dict(
        n_estimators=spec.n_estimators,
        max_depth=spec.max_depth,
        max_features=spec.max_features,
        random_state=spec.random_state,
    )
    descriptor = get_loss(loss)
    task = descriptor.forest_task
    cuts = None
    if spec.threshold_bins is not None:
        cuts = binning.quantile_cuts(X, spec.threshold_bins)
        X_grown = binning.bin_codes(X, cuts)
    else:
        X_grown = X
    if spec.kind == "gradient_boosting":
        estimator = getattr(forests, f"GradientBoosting{task}")(learning_rate=spec.learning_rate, **common)
    elif spec.kind == "extra_trees":
        estimator = getattr(forests, f"ExtraTrees{task}")(n_jobs=1, **common)
    else:
        estimator = getattr(forests, f"RandomForest{task}")(n_jobs=1, **common)
    estimator.fit(X_grown, descriptor.forest_target(y), sample_weight=sample_weight)
    if cuts is not None:
        binning.raw_thresholds(estimator, X, cuts)
    return estimator, _named(TreeEnsemble.from_sklearn(estimator), feature_names)


@dataclass
class RuleFit:
    """What a fit produced: the forest, the whole path, the selected step and its rules, which rows did what."""

    forest: TreeEnsemble
    estimator: object  # the fitted scikit-learn forest; None where a TreeEnsemble was given
    path: PathResult
    selected: int
    candidates: Candidates  # the path's columns: rules from the forest's nodes, then linear terms
    train_rows: np.ndarray  # rows of X the path (and a forest trained here) was fitted on
    val_rows: np.ndarray | None  # rows of X held out to select the step; None with a separate X_val
    X_train: np.ndarray  # X[train_rows]: the rules' support, display thresholds and importance
    y_train: np.ndarray  # y[train_rows] (a Cox model's baseline hazard)
    train_weight: np.ndarray | None  # sample_weight[train_rows]
    encoding: TableEncoding | None  # the table's encoding: the rules read in its words
    classes: Sequence | None  # the labels of y's codes (fit_rules' ``classes``)
    rules: RuleEnsemble = field(init=False)  # the selected step's
    # the best step with a rule beside the selected one, and its cost (solver.path.best_rule_step)
    rule_step: RuleStep = field(init=False)
    # a cross-validated fit's (PathSpec.cv_folds): each fold's path's steps, whose validation losses path.steps average
    fold_steps: list[list[PathStep]] | None = field(init=False, default=None)
    # and how each step's rules repeat over the folds' paths (solver.stability.fold_stability)
    fold_stability: FoldStability | None = field(init=False, default=None)
    # and the steps within the budget that no other beats on loss, terms and Dice (solver.path.stability_frontier)
    frontier: list[FrontierStep] | None = field(init=False, default=None)

    def __post_init__(self):
        self.rules = self.rules_at(self.selected)
        self.rule_step = self.path.rule_step(self.selected)

    def step_terms(self) -> Iterator[RuleEnsemble]:
        """The terms of every step's rules in turn (``rules_at``'s conditions, weights and linear terms), without what
        the training rows add to them (support, importance, display thresholds, a Cox baseline): a fraction of the
        cost, for what only reads their terms (:func:`solver.stability.path_rule_keys`)."""
        return (self._from_weights(step, X=None) for step in range(len(self.path.steps)))

    def measure_fold_stability(self, fold_keys: Sequence[PathRuleKeys], X, step_rules=None) -> None:
        """How this cross-validated refit's rules repeat over its folds' paths (``fold_keys``: ``path_rule_keys`` of
        each fold's rules, binned on the same rows ``X``), and the frontier of loss, terms and that stability it
        gives: sets ``fold_stability`` and ``frontier``. ``step_rules``: every step's rules where the caller has them
        (``rules_at``), else ``step_terms()``."""
        refit = path_rule_keys(self.step_terms() if step_rules is None else step_rules, X)
        self.fold_stability = fold_stability(refit, fold_keys)
        self.frontier = stability_frontier(self.path.steps, self.fold_stability.dice, self.path.spec.max_rules)

    def rules_at(self, step: int) -> RuleEnsemble:
        """The rules of any step of the path, built as the selected step's are (the service stores every step's)."""
        loss = get_loss(self.path.spec.loss)
        rules = self._from_weights(step, X=self.X_train)
        baseline = loss.baseline(self.y_train, rules.predict(self.X_train), self.train_weight)
        if baseline is not None:
            rules.set_baseline_hazard(*baseline)
        return rules

    def _from_weights(self, step: int, X) -> RuleEnsemble:
        loss = get_loss(self.path.spec.loss)
        per_class = loss.per_class
        classes = self.classes
        if per_class and classes is None:
            classes = np.arange(self.path.n_classes)
        return RuleEnsemble.from_weights(
            self.candidates,
            self.path.coef(step),
            self.path.intercepts[step] if per_class else float(self.path.intercepts[step]),
            classes=[_plain(c) for c in classes] if per_class else None,
            link=loss.rule_link,
            encoding=self.encoding,
            X=X,
            response=loss.response(classes),
        )


def fit_rules(
    X,
    y,
    spec: PathSpec,
    *,
    forest,
    X_val=None,
    y_val=None,
    rows=None,
    sample_weight=None,
    feature_names=None,
    encoding=None,
    classes=None,
    leaves=None,
    val_leaves=None,
    callback=None,
) -> RuleFit:
    """Forest, path, selected step and rule ensemble of the table ``X`` (float, encoded), ``y`` (0/1 labels for
    the logistic loss).

    ``forest``: a :class:`ForestSpec` (trained here on the training rows), a fitted scikit-learn forest or a
    :class:`TreeEnsemble`. Without ``X_val``/``y_val`` the rows are split by :func:`holdout_split` with the
    spec's ``validation_fraction`` and ``random_state``, or by ``rows`` = (training rows, validation rows) where the
    caller chose them (a fold); with ``spec.cv_folds`` the step is cross-validated (:func:`fit_cross_validated`).
    ``encoding``: the TableEncoding ``X`` was encoded with
    (its feature names name the forest's features; the rules read in its words, see ``RuleEnsemble``).
    ``leaves``/``val_leaves``: the forest's leaf
    indices (n, T) on all rows of ``X``/``X_val`` where the caller has them (a cache); computed otherwise.
    ``classes``: the labels ``y``'s 0 and 1 stand for (logistic loss; :func:`binary_labels`), named by the
    rules' response, ``"log-odds of 'yes'"``, or its codes 0..K-1 (multinomial loss; :func:`class_labels`),
    the classes of the rules' amounts. ``callback(step)``: as in :func:`solver.fit_path`.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if encoding is not None:
        feature_names = encoding.feature_names
    if (X_val is None) != (y_val is None):
        raise ValueError("give both X_val and y_val, or neither")
    spec.path_loss().check_targets(y, "y")  # before any split: a bad row is named by its row of y
    if spec.cv_folds is not None:
        if X_val is not None or rows is not None:
            raise ValueError("cv_folds validates on folds of X: give no X_val, y_val or rows with it")
        return fit_cross_validated(
            X,
            y,
            spec,
            forest=forest,
            sample_weight=sample_weight,
            feature_names=feature_names,
            encoding=encoding,
            classes=classes,
            leaves=leaves,
            callback=callback,
        )
    if X_val is not None:
        train_rows, val_rows = np.arange(len(y)), None
    elif rows is not None:
        train_rows, val_rows = (np.asarray(r, dtype=np.int64) for r in rows)
    else:
        train_rows, val_rows = holdout_split(len(y), spec.validation_fraction, spec.random_state)
    _check_classes(y[train_rows], spec, classes)
    prepared = _prepare(X, y, spec, forest, train_rows, sample_weight, feature_names, encoding, leaves)
    leaves, candidates = prepared.leaves, prepared.candidates
    val_matrix, y_holdout, val_weight = None, None, None
    if val_rows is not None and len(val_rows):
        val_matrix, y_holdout = candidates.matrix(leaves[val_rows], X[val_rows]), y[val_rows]
        val_weight = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)[val_rows]
    elif X_val is not None:
        X_val = np.asarray(X_val, dtype=np.float64)
        y_holdout = np.asarray(y_val, dtype=np.float64).ravel()
        if y_holdout.shape != (len(X_val),):
            raise ValueError(f"X_val has {len(X_val)} rows but y_val has {y_holdout.size} values")
        val_matrix = candidates.matrix(prepared.ensemble.apply(X_val) if val_leaves is None else val_leaves, X_val)

    path = fit_path(
        candidates.matrix(leaves[train_rows], prepared.X_train),
        y[train_rows],
        spec,
        sample_weight=prepared.train_weight,
        val_matrix=val_matrix,
        y_val=y_holdout,
        val_weight=val_weight,
        leaf_ancestors=candidates.ancestors,
        column_trees=candidates.trees,
        column_rules=candidates.rule_ids,
        callback=callback,
    )
    return prepared.rule_fit(path, path.select(), train_rows, val_rows, encoding, classes)


def cross_validation_grid(
    X, y, spec: PathSpec, *, forest, sample_weight=None, feature_names=None, encoding=None, leaves=None
) -> np.ndarray:
    """The lambda grid every fold of a cross-validated fit (``spec.cv_folds``) follows: that of all the rows, with
    ``forest`` fitted (or trained here) on all of them."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    everything = np.arange(len(y))
    prepared = _prepare(X, y, spec, forest, everything, sample_weight, feature_names, encoding, leaves)
    matrix = prepared.candidates.matrix(prepared.leaves, X)
    return path_grid(spec, path_lambda_max(matrix, y, spec, prepared.train_weight))


def fit_fold(
    X,
    y,
    spec: PathSpec,
    grid,
    fold: int,
    *,
    forest,
    sample_weight=None,
    feature_names=None,
    encoding=None,
    classes=None,
    leaves=None,
    callback=None,
) -> RuleFit:
    """The fit of fold ``fold`` of ``spec.cv_folds``: its path on ``grid`` (:func:`cross_validation_grid`), fitted on
    the other folds' rows (a ``ForestSpec`` trained on them only) and validated on the fold's; its rules at every
    step give the refit's fold stability (:func:`solver.stability.path_rule_keys` of ``step_terms()`` and X)."""
    rows = cross_validation.fold_rows(len(y), spec.cv_folds, spec.random_state, fold)
    return fit_rules(
        X,
        y,
        cross_validation.fold_spec(spec, grid),
        forest=forest,
        rows=rows,
        sample_weight=sample_weight,
        feature_names=feature_names,
        encoding=encoding,
        classes=classes,
        leaves=leaves,
        callback=callback,
    )


def refit_cross_validated(
    X,
    y,
    spec: PathSpec,
    grid,
    fold_steps: list[list[PathStep]],
    *,
    forest,
    sample_weight=None,
    feature_names=None,
    encoding=None,
    classes=None,
    leaves=None,
    callback=None,
) -> RuleFit:
    """The cross-validated fit of ``spec``: the path on all the rows over the steps every fold reached, each step
    holding the folds' mean validation loss and metrics (and the loss's standard error), and the step selected by
    them (``spec.selection``, "1se" included). ``fold_steps``: the steps of each fold's path (:func:`fit_fold`), in
    fold order."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if len(fold_steps) != spec.cv_folds:
        raise ValueError(f"{len(fold_steps)} fold paths for cv_folds={spec.cv_folds}")
    everything = np.arange(len(y))
    _check_classes(y, spec, classes)
    prepared = _prepare(X, y, spec, forest, everything, sample_weight, feature_names, encoding, leaves)
    candidates = prepared.candidates
    refit = fit_path(
        candidates.matrix(prepared.leaves, X),
        y,
        cross_validation.refit_spec(spec, grid, cross_validation.common_steps(fold_steps)),
        sample_weight=prepared.train_weight,
        leaf_ancestors=candidates.ancestors,
        column_trees=candidates.trees,
        column_rules=candidates.rule_ids,
        callback=callback,
    )
    path = cross_validation.with_fold_means(refit, fold_steps, spec)
    fit = prepared.rule_fit(path, path.select(), everything, None, encoding, classes)
    fit.fold_steps = [list(steps) for steps in fold_steps]
    return fit


def fit_cross_validated(
    X,
    y,
    spec: PathSpec,
    *,
    forest,
    sample_weight=None,
    feature_names=None,
    encoding=None,
    classes=None,
    leaves=None,
    callback=None,
) -> RuleFit:
    """:func:`fit_rules` with ``spec.cv_folds``: the grid of all the rows, each fold's path, then the refit, and how
    the refit's rules repeat over the folds' paths at each step (``fold_stability``), and the steps on the frontier of
    loss, terms and that stability (``frontier``). A ``ForestSpec`` is trained once on all the rows (grid and refit)
    and once per fold on its training rows."""
    X = np.asarray(X, dtype=np.float64)
    if isinstance(forest, ForestSpec):
        weight = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        estimator, _ = train_forest(forest, X, np.asarray(y, dtype=np.float64), weight, feature_names, loss=spec.loss)
        everything = estimator
    else:
        everything = forest
    if leaves is None:  # the grid and the refit read the same forest's leaves: computed once for both
        leaves = as_tree_ensemble(everything).apply(X)
    shared = dict(sample_weight=sample_weight, feature_names=feature_names, encoding=encoding)
    grid = cross_validation_grid(X, y, spec, forest=everything, leaves=leaves, **shared)
    fold_steps, fold_keys = [], []
    for k in range(spec.cv_folds):  # each fold's steps and rules kept, not its fit (a forest and a matrix each)
        fold = fit_fold(X, y, spec, grid, k, forest=forest, classes=classes, **shared)
        fold_steps.append(fold.path.steps)
        fold_keys.append(path_rule_keys(fold.step_terms(), X))
    fit = refit_cross_validated(
        X,
        y,
        spec,
        grid,
        fold_steps,
        forest=everything,
        classes=classes,
        leaves=leaves,
        callback=callback,
        **shared,
    )
    fit.measure_fold_stability(fold_keys, X)
    return fit


def fit_half_samples(
    X,
    y,
    spec: PathSpec,
    n_pairs: int,
    *,
    forest,
    sample_weight=None,
    feature_names=None,
    encoding=None,
    classes=None,
    on_fit=None,
) -> list[tuple[RuleEnsemble, RuleEnsemble]]:
    """The rules :func:`fit_rules` selects on each half of ``n_pairs`` random splits of the rows into two disjoint
    halves (``solver.stability.half_sample_pairs``, seeded by ``spec.random_state``), each half a whole fit: its
    own validation rows (or folds) and, for a ``ForestSpec``, its own forest. For ``solver.stability``.
    ``on_fit(done, total)`` runs after each of the ``2 * n_pairs`` fits (progress)."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    weight = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)

    done = 0

    def half_fit(rows) -> RuleEnsemble:
        nonlocal done
        rules = fit_half(
            X,
            y,
            spec,
            rows,
            forest=forest,
            sample_weight=weight,
            feature_names=feature_names,
            encoding=encoding,
            classes=classes,
        )
        done += 1
        if on_fit is not None:
            on_fit(done, 2 * n_pairs)
        return rules

    return [(half_fit(a), half_fit(b)) for a, b in half_sample_pairs(len(y), n_pairs, spec.random_state)]


def fit_half(
    X, y, spec: PathSpec, rows, *, forest, sample_weight=None, feature_names=None, encoding=None, classes=None
) -> RuleEnsemble:
    """The selected rules of :func:`fit_rules` on the rows ``rows`` of the table alone (one half-sample fit)."""
    return fit_rules(
        X[rows],
        y[rows],
        spec,
        forest=forest,
        sample_weight=None if sample_weight is None else sample_weight[rows],
        feature_names=feature_names,
        encoding=encoding,
        classes=classes,
    ).rules


@dataclass
class _Prepared:
    """A forest on some training rows: its leaves on every row of X, and the candidate terms of the path."""

    estimator: object
    ensemble: TreeEnsemble
    leaves: np.ndarray
    candidates: Candidates
    X_train: np.ndarray
    y_train: np.ndarray
    train_weight: np.ndarray | None

    def rule_fit(self, path, selected, train_rows, val_rows, encoding, classes) -> RuleFit:
        return RuleFit(
            self.ensemble,
            self.estimator,
            path,
            selected,
            self.candidates,
            train_rows,
            val_rows,
            self.X_train,
            self.y_train,
            self.train_weight,
            encoding,
            classes,
        )


def _prepare(X, y, spec, forest, train_rows, sample_weight, feature_names, encoding, leaves) -> _Prepared:
    X_train = X[train_rows]
    train_weight = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)[train_rows]
    if isinstance(forest, ForestSpec):
        estimator, ensemble = train_forest(forest, X_train, y[train_rows], train_weight, feature_names, loss=spec.loss)
    else:
        estimator = None if isinstance(forest, TreeEnsemble) else forest
        ensemble = _named(as_tree_ensemble(forest), feature_names)
    if ensemble.n_features != X.shape[1]:
        raise ValueError(f"the forest splits on {ensemble.n_features} features, X has {X.shape[1]}")
    leaves = ensemble.apply(X) if leaves is None else leaves
    candidates = candidate_terms(ensemble, spec, X_train, train_weight, encoding)
    return _Prepared(estimator, ensemble, leaves, candidates, X_train, y[train_rows], train_weight)


def _check_classes(y_train, spec: PathSpec, classes) -> None:
    """Every class of a per-class loss has training rows."""
    if not get_loss(spec.loss).per_class:
        return
    n_classes = len(classes) if classes is not None else int(y_train.max()) + 1
    missing = sorted(set(range(n_classes)) - set(np.unique(y_train).astype(int)))
    if missing:
        shown = [str(classes[k]) if classes is not None else str(k) for k in missing[:5]]
        raise ValueError(
            f"no training row has class {', '.join(shown)}: every class needs training rows (its rows all fell "
            "in the validation rows: give more rows of it, a smaller validation_fraction or another random_state)"
        )


def _plain(label):
    """A numpy label as the Python value a JSON document holds."""
    return label.item() if isinstance(label, np.generic) else label


def candidate_terms(forest: TreeEnsemble, spec: PathSpec, X_train, sample_weight=None, encoding=None) -> Candidates:
    """The candidate terms of ``spec`` (``candidates``, ``max_rule_length``, ``linear_terms``) for ``forest``, the
    linear terms' bounds taken from the training rows ``X_train`` (encoded; ``encoding`` says which features are
    numeric columns)."""
    linear = None
    if spec.linear_terms:
        features = numeric_features(encoding, forest.n_features)
        linear = LinearTerms.fit(X_train, features, spec.linear_quantile, sample_weight)
    return Candidates.of(forest, spec.candidates, spec.max_rule_length, linear)


def _named(forest: TreeEnsemble, feature_names) -> TreeEnsemble:
    """The forest with the table's feature names (a copy where they change: the caller's forest is kept)."""
    if feature_names is None:
        return forest
    if len(feature_names) != forest.n_features:
        raise ValueError(f"{len(feature_names)} feature names for a forest of {forest.n_features} features")
    return forest.with_feature_names([str(name) for name in feature_names])
