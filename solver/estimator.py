"""scikit-learn style estimators: a forest in, a small weighted rule set out.

``FireRegressor`` (squared loss, or ``loss="poisson"`` for counts and rates) and ``FireClassifier`` (logistic loss
for two labels, multinomial for more) share everything but their target: the parameters, which are the fields of
:class:`solver.spec.ForestSpec` and :class:`solver.spec.PathSpec` with their defaults (``forest_kind`` for the
forest's ``kind``; the loss is the estimator's, ``random_state`` seeds both), the fit through
:func:`solver.fitting.fit_rules`, the encoding of tables with text columns, the rules and the JSON document.
"""

import inspect
import numbers

import numpy as np
import pandas as pd
from scipy.special import softmax
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_feature_names,
    _check_n_features,
    _check_y,
    assert_all_finite,
    check_consistent_length,
    check_is_fitted,
    check_random_state,
    validate_data,
)

from . import threads
from .encoding import TableEncoding, has_text_columns
from .fitting import class_labels, fit_half_samples, fit_rules
from .losses import DEFAULT_LOSS, LOSSES
from .losses.cox import concordance_index, signed_times
from .losses.logistic import probability
from .path import PathStep, best_rule_step, upgraded_step_record
from .rules import INVERSE_LINKS, RuleEnsemble
from .spec import ForestSpec, PathSpec, SpecError
from .stability import check_resamples, reference_cuts, rule_stability

DOCUMENT_FORMAT = "fire-rule-model"
# estimator parameter -> ForestSpec field, where the names differ
_FOREST_FIELDS = {"forest_kind": "kind"}


def _parameters(**extra) -> dict:
    """name -> default of an estimator's parameters, in order: ``forest``, the ForestSpec fields but its seed,
    the PathSpec fields but ``loss`` and the seed, ``extra``, ``random_state`` (None: fresh seeds)."""
    spec_name = {field: name for name, field in _FOREST_FIELDS.items()}
    forest = {
        spec_name.get(name, name): default for name, default in ForestSpec.defaults().items() if name != "random_state"
    }
    path = {name: default for name, default in PathSpec.defaults().items() if name not in ("loss", "random_state")}
    return {"forest": None, **forest, **path, **extra, "random_state": None}


def _init_taking(parameters: dict):
    """An ``__init__`` that stores each of ``parameters`` (keyword-only, their defaults where not given) and
    shows them as its signature, which is where scikit-learn reads an estimator's parameters from."""

    def __init__(self, **given):
        unknown = sorted(set(given) - set(parameters))
        if unknown:
            raise TypeError(f"{type(self).__name__} got an unexpected parameter {unknown[0]!r}")
        for name, default in parameters.items():
            setattr(self, name, given.get(name, default))

    __init__.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default)
            for name, default in parameters.items()
        ]
    )
    return __init__


class _FireEstimator(BaseEstimator):
    """FIRE rule extraction (Liu & Mazumder, KDD 2023): what the regressor and the classifier share.

    Fits a tree ensemble (or takes a fitted one through ``forest``), treats every leaf as a candidate rule,
    computes a warm-started path of the FIRE problem (MCP or L1 sparsity plus fusion of neighbouring leaves
    of each tree) and keeps the best step among those with at most ``max_rules`` terms (rules and linear terms
    counted alike; ``selection``). Without ``X_val``/``y_val`` in ``fit``, ``validation_fraction`` of the
    training rows is held out for that choice
    (and the forest, when fitted here, is fitted on the remaining rows only). The work is
    :func:`solver.fitting.fit_rules`, the same orchestration the service's workers run: the same table,
    settings and ``random_state`` give the same rules in both.

    ``X`` may be a DataFrame with text columns: they are one-hot encoded (:class:`solver.encoding.TableEncoding`,
    kept as ``encoding_``), and scoring takes the original columns.

    Parameters (keyword-only)
    -------------------------
    forest : fitted scikit-learn tree ensemble (see ``solver.sklearn_adapters``) or solver.TreeEnsemble,
        default=None. Use these trees instead of fitting a forest (they should not have seen the validation
        rows).
    forest_kind, n_estimators, max_depth, max_features, learning_rate : the forest fitted when ``forest`` is
        None (:class:`solver.spec.ForestSpec`: ``forest_kind`` is its ``kind``).
    penalty, gamma, mcp_scaling, scaling, ... : every other :class:`solver.spec.PathSpec` field, where each is
        documented with its default.
    stability_resamples : even int or None, default=None
        Also measure how the rules repeat (:mod:`solver.stability`): this many more fits, on the two disjoint
        halves of ``stability_resamples / 2`` random splits of the rows, each fitted as this one is; sets
        ``rule_stability_`` and ``stability_dice_``.
    n_jobs : int or None, default=None
        Threads of the solver's parallel kernels during ``fit``: a count, -1 for every core, None for
        ``FIRE_NUM_THREADS`` or every core (:mod:`solver.threads`). The rules do not depend on it.
    random_state : int, RandomState or None
        Seeds the forest and the validation split (an int is used as both seeds, as the service does).

    Attributes
    ----------
    forest_ : TreeEnsemble; estimator_ : the fitted scikit-learn forest (None when ``forest`` is given as a
    TreeEnsemble); encoding_ : TableEncoding of the training table (None for numeric input);
    candidates_ : Candidates (``solver.candidates``: the path's columns, rules from the forest's leaves or nodes,
    then linear terms); path_ : list of dicts, one per step (``solver.path.PathStep``); coef_path_ : scipy.sparse
    CSR (steps x terms, or terms x classes row-major); selected_step_ : int; coef_ : the weights of the selected
    step, one per candidate term ((R,), or (R, K) for K classes; ``candidates_.matrix(leaves, X) @ coef_`` plus
    ``intercept_`` is the score); intercept_ : float, or (K,) for K classes: the selected step's, paired with
    ``coef_`` (the rule ensemble's also holds each linear term's ``-coefficient * centre``; a model read by
    ``from_dict``, which has no ``coef_``, holds the rule ensemble's);
    n_iter_ : solver passes over the whole path; rule_ensemble_ : RuleEnsemble; rules_ : its rules (a tuple of
    ``solver.rule_types.Rule``);
    rule_step_ : ``solver.path.RuleStep``, the best step with a rule (one condition or more) beside the selected
    step: the selected step where it has one; else the step the same selection picks among those with one (None
    where none has), its cost in validation loss (difference, ratio, the standard error with ``cv_folds``) and a
    sentence saying why the selected step has no rule (None in a model read by ``from_dict`` whose steps' rule
    counts are unknown);
    n_features_in_, feature_names_in_ (the original columns);
    cv_fold_paths_ : with ``cv_folds``, each fold's path (lists of step dicts; ``path_``'s validation values are
    their means, with ``val_loss_se``), else None; cv_rule_stability_ : with ``cv_folds``, per rule then per linear
    term of ``rule_ensemble_``, the share of the folds whose path at the selected step holds it (conditions matched
    at the decile cuts of the training rows, as below), else None; cv_stability_dice_ : the folds' mean pairwise
    Dice index at the selected step (every step's: ``solver.fitting.fit_rules(...).fold_stability``), else None;
    cv_frontier_ : with ``cv_folds``, the steps within ``max_rules`` that no other step beats on mean validation loss,
    terms and that Dice index together (a list of ``solver.path.FrontierStep``: step, counts, ``val_loss`` ±
    ``val_loss_se``, ``dice``; ``solver.path.stability_frontier``), else None;
    rule_stability_ : with ``stability_resamples``, per rule then per linear term of ``rule_ensemble_``, the share
    of the half-sample fits that selected it (a rule counts as the same where its conditions fall at the same
    decile cuts of the training rows); stability_dice_ : the mean Dice–Sørensen index of the two halves' rule sets.
    """

    def _path_loss(self) -> str:
        """The PathSpec loss this estimator fits (once its target is known)."""
        raise NotImplementedError

    def __init_subclass__(cls, parameters: dict, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.__init__ = _init_taking(parameters)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    def path_spec(self, seed: int) -> PathSpec:
        """The estimator's path settings as the :class:`PathSpec` the library and the service run."""
        return PathSpec.from_dict(
            {name: getattr(self, name) for name in PathSpec.defaults() if name not in ("loss", "random_state")}
            | {"loss": self._path_loss(), "random_state": seed}
        )

    def forest_spec(self, seed: int) -> ForestSpec:
        """The forest fitted when none is given, as the :class:`ForestSpec` the service trains too."""
        spec_fields = {_FOREST_FIELDS.get(name, name) for name in ForestSpec.defaults()}
        names = {field: name for name, field in _FOREST_FIELDS.items()}
        try:
            return ForestSpec.from_dict(
                {field: getattr(self, names.get(field, field)) for field in spec_fields if field != "random_state"}
                | {"random_state": seed}
            )
        except SpecError as error:  # named as the estimator's parameter
            raise SpecError.of([(names.get(field, field), detail) for field, detail in error.faults]) from None

    def _sample_weight(self, y, sample_weight):
        """The row weights the forest and the path see (the classifier's class weights multiply them)."""
        return sample_weight

    def fit(self, X, y, X_val=None, y_val=None, sample_weight=None, offset=None):
        """Fit the forest (unless given), the FIRE path, and select the step within the rule budget. ``offset``
        (one per row, log-link and squared losses): added to each row's score, known and not fitted (the log of an
        exposure, a prior model's score); ``predict`` takes the rows' offsets likewise."""
        with threads.limit(self.n_jobs):
            return self._fit(X, y, X_val, y_val, sample_weight, offset)

    def _fit(self, X, y, X_val, y_val, sample_weight, offset=None):
        self.encoding_ = TableEncoding.infer(X) if has_text_columns(X) else None
        if self.encoding_ is None:
            X, y = validate_data(self, X, y, ensure_all_finite="allow-nan", dtype=np.float64)
        else:
            X = self._table(X, reset=True)
            check_consistent_length(X, y)
        y = self._target(y, fitting=True)
        if X.shape[0] < 2:
            raise ValueError(f"{type(self).__name__} needs at least 2 samples, got n_samples = {X.shape[0]}")
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight, dtype=np.float64)
            if sample_weight.shape != (X.shape[0],):
                raise ValueError(f"sample_weight must have shape ({X.shape[0]},), got {sample_weight.shape}")
        sample_weight = self._sample_weight(y, sample_weight)
        if X_val is not None:
            X_val = self._table(X_val, reset=False)
        if y_val is not None:
            y_val = self._target(y_val, fitting=False)
        seed = (
            int(self.random_state)
            if isinstance(self.random_state, numbers.Integral)
            else int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        )
        spec = self.path_spec(seed)
        if offset is not None:
            if X_val is not None:
                raise ValueError("an offset needs its validation rows in X (leave X_val out: validation_fraction)")
            y, sample_weight = spec.path_loss().offset_target(y, sample_weight, offset)
        forest = self.forest_spec(seed) if self.forest is None else self.forest
        fit = fit_rules(
            X,
            y,
            spec,
            forest=forest,
            X_val=X_val,
            y_val=y_val,
            sample_weight=sample_weight,
            feature_names=self._encoded_feature_names(),
            encoding=self.encoding_,
            classes=getattr(self, "classes_", None),
        )
        self.estimator_, self.forest_, self.candidates_ = fit.estimator, fit.forest, fit.candidates
        self.path_ = [step.to_dict() for step in fit.path.steps]
        self.coef_path_ = fit.path.coef_path
        self.lambda_max_ = fit.path.lambda_max
        self.n_iter_ = sum(step.n_iter for step in fit.path.steps)
        self.selected_step_ = fit.selected
        self.coef_ = fit.path.coef(fit.selected)
        self.intercept_ = _intercept(fit.path.intercepts[fit.selected])
        self.rule_ensemble_ = fit.rules
        self.rule_step_ = fit.rule_step
        self.cv_fold_paths_ = (
            None if fit.fold_steps is None else [[s.to_dict() for s in steps] for steps in fit.fold_steps]
        )
        self.cv_rule_stability_ = self.cv_stability_dice_ = None
        self.cv_frontier_ = fit.frontier
        if fit.fold_stability is not None:
            self.cv_rule_stability_ = fit.fold_stability.frequencies[fit.selected]
            self.cv_stability_dice_ = fit.fold_stability.dice[fit.selected]
        if self.stability_resamples is not None:
            n_pairs = check_resamples(self.stability_resamples)
            pairs = fit_half_samples(
                X,
                y,
                spec,
                n_pairs,
                forest=forest,
                sample_weight=sample_weight,
                feature_names=self._encoded_feature_names(),
                encoding=self.encoding_,
                classes=getattr(self, "classes_", None),
            )
            stability = rule_stability(fit.rules, pairs, reference_cuts(fit.X_train))
            self.rule_stability_, self.stability_dice_ = stability.frequencies, stability.dice
        return self

    def _encoded_feature_names(self):
        if self.encoding_ is not None:
            return self.encoding_.feature_names
        if hasattr(self, "feature_names_in_"):
            return [str(name) for name in self.feature_names_in_]
        return None

    def _table(self, X, reset):
        """Float matrix of ``X``; a table with text columns goes through the encoding of the training table."""
        if self.encoding_ is None:
            return validate_data(self, X, reset=reset, ensure_all_finite="allow-nan", dtype=np.float64)
        _check_feature_names(self, X, reset=reset)
        _check_n_features(self, X, reset=reset)
        if not isinstance(X, pd.DataFrame):
            raise ValueError(
                f"this model was fitted on a table with text columns: pass a DataFrame with the "
                f"columns {self.encoding_.column_names}"
            )
        X = self.encoding_.encode_frame(X)
        assert_all_finite(X, allow_nan=True, input_name="X")
        return X

    @property
    def rules_(self):
        check_is_fitted(self, "rule_ensemble_")
        return self.rule_ensemble_.rules

    @property
    def selected_(self):
        """The path record of the selected step."""
        check_is_fitted(self, "rule_ensemble_")
        return self.path_[self.selected_step_]

    def explain(self, X):
        """Per row, the rules that fired as ``{"id", "contribution"}`` (``RuleEnsemble.explain``)."""
        check_is_fitted(self, "rule_ensemble_")
        return self.rule_ensemble_.explain(self._table(X, reset=False))

    def to_text(self):
        check_is_fitted(self, "rule_ensemble_")
        return self.rule_ensemble_.to_text()

    def __str__(self):
        if hasattr(self, "rule_ensemble_"):
            return self.to_text()
        return repr(self)

    def to_dict(self):
        """JSON-ready document: parameters, the selected rule set and the path records."""
        check_is_fitted(self, "rule_ensemble_")
        params = {k: v for k, v in self.get_params().items() if k != "forest"}
        if params.get("lambdas") is not None:
            params["lambdas"] = [float(v) for v in params["lambdas"]]
        return {
            "format": DOCUMENT_FORMAT,
            "version": 1,
            "params": params,
            "n_features_in": int(self.n_features_in_),
            "feature_names_in": None
            if not hasattr(self, "feature_names_in_")
            else [str(v) for v in self.feature_names_in_],
            "columns": None if self.encoding_ is None else self.encoding_.to_dict(),
            "classes": self.classes_.tolist() if hasattr(self, "classes_") else None,
            "selected_step": int(self.selected_step_),
            "path": self.path_,
            "rule_ensemble": self.rule_ensemble_.to_dict(),
        }

    @classmethod
    def from_dict(cls, document):
        """Rebuild a fitted estimator (rules only: no forest, no coefficient path) from ``to_dict()``."""
        if not isinstance(document, dict) or document.get("format") != DOCUMENT_FORMAT:
            raise ValueError(f"not a {DOCUMENT_FORMAT!r} document")
        model = cls(**document["params"])
        model.n_features_in_ = int(document["n_features_in"])
        if document.get("feature_names_in") is not None:
            model.feature_names_in_ = np.asarray(document["feature_names_in"], dtype=object)
        columns = document.get("columns")
        model.encoding_ = None if columns is None else TableEncoding.from_dict(columns)
        if document.get("classes") is not None:
            model.classes_ = np.asarray(document["classes"])
        model.selected_step_ = int(document["selected_step"])
        model.rule_ensemble_ = RuleEnsemble.from_dict(document["rule_ensemble"])
        # a document written before the steps had n_terms: a path without linear candidates has none at any step,
        # the selected step as many as its rules hold; elsewhere the split is unknown
        without_linear = 0 if not document["params"].get("linear_terms", False) else None
        model.path_ = [
            upgraded_step_record(record, model.rule_ensemble_.n_linear if k == model.selected_step_ else without_linear)
            for k, record in enumerate(document["path"])
        ]
        model.intercept_ = _intercept(model.rule_ensemble_.intercept)
        steps = [PathStep.from_dict(record) for record in model.path_]
        known = all(step.n_rules is not None for step in steps)
        model.rule_step_ = (
            best_rule_step(steps, model.selected_step_, model.max_rules, model.selection) if known else None
        )
        return model


def _intercept(intercept):
    """An intercept as the estimator shows it: a float, or an array (K,) for K classes."""
    return float(intercept) if np.ndim(intercept) == 0 else np.asarray(intercept, dtype=np.float64)


REGRESSION_LOSSES = tuple(name for name, loss in LOSSES.items() if not loss.classifier and loss.task != "survival")
# the classifier's loss by whether it has more than two classes (one weight per class)
CLASSIFIER_LOSSES = {loss.per_class: name for name, loss in LOSSES.items() if loss.classifier}


class FireRegressor(
    RegressorMixin, _FireEstimator, parameters=_parameters(loss=DEFAULT_LOSS, stability_resamples=None, n_jobs=None)
):
    """FIRE as a scikit-learn regressor. ``loss="squared"``: ``predict`` is the rules' sum. ``loss="poisson"``
    (counts or rates, y >= 0), ``"tweedie"`` (amounts with many zeros, y >= 0; ``power`` in (1, 2)) or ``"gamma"``
    (positive amounts), each with a log link: the rules add log means, ``predict`` is the mean ``exp(sum)`` and each
    rule multiplies it by ``exp(contribution)``; exposure goes in as scikit-learn's ``PoissonRegressor`` takes
    it: ``y = amount / exposure`` and ``sample_weight = exposure``, the predicted mean being per unit of exposure.
    See :class:`_FireEstimator` for the parameters and attributes."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        loss = LOSSES.get(self.loss)
        tags.target_tags.positive_only = loss is not None and loss.nonnegative_target  # as PoissonRegressor
        return tags

    def _path_loss(self) -> str:
        if self.loss not in REGRESSION_LOSSES:
            raise SpecError("loss", f"must be one of {list(REGRESSION_LOSSES)}, got {self.loss!r}")
        return self.loss

    def _target(self, y, fitting):
        return _check_y(y, y_numeric=True, estimator=self).astype(np.float64)

    def predict(self, X, offset=None):
        """The rules' sum (squared loss), or the mean ``exp(sum)`` (Poisson, Tweedie, Gamma); with ``offset`` added
        to each row's sum first (as in ``fit``)."""
        check_is_fitted(self, "rule_ensemble_")
        X = self._table(X, reset=False)
        if offset is None:
            return self.rule_ensemble_.predict_mean(X)
        score = self.rule_ensemble_.predict(X) + np.asarray(offset, dtype=np.float64)
        return INVERSE_LINKS[self.rule_ensemble_.link](score)


class FireClassifier(
    ClassifierMixin, _FireEstimator, parameters=_parameters(class_weight=None, stability_resamples=None, n_jobs=None)
):
    """FIRE as a scikit-learn classifier. Two labels: the logistic loss; the rules add log-odds of ``classes_[1]``.
    K > 2 labels: the multinomial loss; each rule adds one amount per class to the class scores (in or out for
    all classes at once) and the probabilities are their softmax.

    Any labels (strings, booleans, numbers; ``classes_`` in sorted order, scikit-learn's convention).
    ``decision_function`` is the rules' sum: (n,) log-odds of ``classes_[1]`` for two classes, (n, K) class
    scores for more; ``predict_proba`` (n, K) its sigmoid or softmax (rows sum to 1), ``predict`` the label of
    the largest probability (the first on ties). The path records log loss, AUC (macro one-vs-rest for K > 2)
    and accuracy per step; ``selection="auc"`` chooses the step by validation AUC instead of log loss.
    ``class_weight``: None, "balanced" or {label: weight}, multiplying ``sample_weight`` in the forest and the
    path alike. ``forest`` may be a fitted scikit-learn classifier (RandomForestClassifier, ExtraTreesClassifier,
    GradientBoostingClassifier, ...), an XGBoost/LightGBM binary model loaded with ``solver.formats`` or a
    regression forest. See :class:`_FireEstimator` for the other parameters and attributes.
    """

    def _path_loss(self) -> str:
        return CLASSIFIER_LOSSES[len(self.classes_) > 2]

    def _target(self, y, fitting):
        y = _check_y(y, estimator=self)
        if fitting:
            check_classification_targets(y)
            self.classes_, codes = class_labels(y)
            return codes
        unknown = ~np.isin(y, self.classes_)
        if unknown.any():
            raise ValueError(
                f"y_val has labels the training labels {self.classes_.tolist()} do not: "
                f"{np.unique(y[unknown])[:5].tolist()}"
            )
        return np.searchsorted(self.classes_, y).astype(np.float64)

    def _sample_weight(self, y, sample_weight):
        if self.class_weight is None:
            return sample_weight
        labels = self.classes_[y.astype(np.int64)]
        weights = compute_sample_weight(self.class_weight, labels)
        return weights if sample_weight is None else weights * sample_weight

    def decision_function(self, X):
        """Intercept + the contributions of the rules that fire: the log-odds of ``classes_[1]`` (n,) for two
        classes, the class scores (n, K) for more."""
        check_is_fitted(self, "rule_ensemble_")
        return self.rule_ensemble_.predict(self._table(X, reset=False))

    def predict_proba(self, X):
        """(n, K) class probabilities in ``classes_`` order: ``1 - p`` and ``p = 1 / (1 + exp(-score))`` for two
        classes, the softmax of the class scores for more."""
        score = self.decision_function(X)
        if score.ndim == 2:
            return softmax(score, axis=1)
        p = probability(score)
        return np.column_stack([1.0 - p, p])

    def predict(self, X):
        score = self.decision_function(X)  # first: it raises NotFittedError before classes_ is read
        if score.ndim == 2:
            return self.classes_[np.argmax(score, axis=1)]
        return self.classes_[(score > 0.0).astype(np.int64)]


class FireSurvival(_FireEstimator, parameters=_parameters(stability_resamples=None, n_jobs=None)):
    """FIRE for time to an event (Cox proportional hazards, ``solver.losses.cox``): each rule multiplies the hazard
    by ``exp(contribution)``.

    ``y``: scikit-survival's structured array (a boolean event field, then a time field, as ``sksurv.util.Surv``
    makes), an (n, 2) array of (time, event), or signed times (+time where the event happened, -time where censored).
    ``predict`` is the risk score, the log hazard ratio against the baseline (as scikit-survival's Cox models);
    ``predict_survival_function(X, times)`` the curves ``S(t | x)`` from Breslow's baseline hazard of the training
    rows (``baseline_hazard_``); ``score`` Harrell's C-index. The path records the partial-likelihood deviance and the
    C-index per step; ``selection="cindex"`` chooses the step by validation C-index instead of the deviance. See
    :class:`_FireEstimator` for the other parameters and attributes.
    """

    def _path_loss(self) -> str:
        return "cox"

    def fit(self, X, y, X_val=None, y_val=None, sample_weight=None):
        """As the other estimators' ``fit`` (no offset: Cox's partial likelihood has no exact offset form here),
        ``y`` (and ``y_val``) in any of the class docstring's forms."""
        y_val = None if y_val is None else survival_target(y_val)
        return super().fit(X, survival_target(y), X_val, y_val, sample_weight)

    def _target(self, y, fitting):
        return survival_target(y)

    def predict(self, X):
        """The log hazard ratio of each row against the baseline (the rules' sum)."""
        check_is_fitted(self, "rule_ensemble_")
        return self.rule_ensemble_.predict(self._table(X, reset=False))

    def predict_survival_function(self, X, times):
        """(n, len(times)): each row's probability of no event by each of ``times``, each in [0, the last follow-up
        time of the training rows] (``baseline_hazard_[0][-1]``); a ValueError for a time outside, as
        scikit-survival's step functions raise outside their domain: past the last follow-up no row was at risk, and
        nothing estimates S(t | x) there."""
        check_is_fitted(self, "rule_ensemble_")
        return self.rule_ensemble_.predict_survival(self._table(X, reset=False), times)

    def predict_cumulative_hazard_function(self, X, times):
        """(n, len(times)): each row's cumulative hazard ``H0(t) exp(score)`` at each of ``times`` (those of
        ``predict_survival_function``)."""
        return -np.log(self.predict_survival_function(X, times))

    @property
    def baseline_hazard_(self):
        """(the distinct event times and the last follow-up time, Breslow's baseline cumulative hazard just after each)
        of the training rows: the curves are defined from 0 to the last of these times."""
        check_is_fitted(self, "rule_ensemble_")
        return self.rule_ensemble_.baseline_hazard

    def score(self, X, y, sample_weight=None):
        """Harrell's C-index of ``predict(X)`` on ``y`` (scikit-survival's ``concordance_index_censored``)."""
        return concordance_index(survival_target(y), self.predict(X))


def survival_target(y) -> np.ndarray:
    """Signed times (``solver.losses.cox``) of a survival target as users hold it: scikit-survival's structured array
    (the boolean field is the event, the other the time), an (n, 2) array of (time, event) or signed times."""
    if isinstance(y, np.ndarray) and y.dtype.names is not None:
        if len(y.dtype.names) != 2:
            raise ValueError(f"a structured survival target has an event and a time field, got {y.dtype.names}")
        event_name = next((name for name in y.dtype.names if y.dtype[name] == np.bool_), None)
        if event_name is None:
            raise ValueError(f"a structured survival target needs a boolean event field, got {y.dtype}")
        (time_name,) = [name for name in y.dtype.names if name != event_name]
        return signed_times(y[time_name], y[event_name])
    y = np.asarray(y, dtype=np.float64)
    if y.ndim == 2 and y.shape[1] == 2:
        return signed_times(y[:, 0], y[:, 1] != 0)
    if y.ndim != 1:
        raise ValueError(
            f"a survival target is signed times (n,), (time, event) pairs (n, 2) or a structured array; got {y.shape}"
        )
    return signed_times(np.abs(y), y > 0)
