"""scikit-learn style estimator: a forest in, a small weighted rule set out."""

import numbers

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import (_check_feature_names, _check_n_features, _check_y, assert_all_finite,
                                      check_consistent_length, check_is_fitted, check_random_state, validate_data)

from .encoding import TableEncoding, has_text_columns
from .fitting import fit_rules
from .rules import RuleEnsemble
from .spec import ForestSpec, PathSpec, SpecError

DOCUMENT_FORMAT = "fire-rule-model"
_PATH = PathSpec()
_FOREST = ForestSpec()


class FireRegressor(RegressorMixin, BaseEstimator):
    """FIRE rule extraction (Liu & Mazumder, KDD 2023) as a scikit-learn regressor.

    Fits a tree ensemble (or takes a fitted one through ``forest``), treats every leaf as a candidate rule,
    computes a warm-started path of the FIRE problem (MCP or L1 sparsity plus fusion of neighbouring leaves
    of each tree) and keeps the step with the lowest validation loss among those with at most ``max_rules``
    rules. Without ``X_val``/``y_val`` in ``fit``, ``validation_fraction`` of the training rows is held out
    for that choice (and the forest, when fitted here, is fitted on the remaining rows only). The work is
    :func:`solver.fitting.fit_rules`, the same orchestration the service's workers run: the same table,
    settings and ``random_state`` give the same rules in both.

    ``X`` may be a DataFrame with text columns: they are one-hot encoded (:class:`solver.encoding.TableEncoding`,
    kept as ``encoding_``), and ``predict`` takes the original columns.

    Parameters
    ----------
    forest : fitted RandomForestRegressor, ExtraTreesRegressor, GradientBoostingRegressor,
        DecisionTreeRegressor or solver.TreeEnsemble, default=None
        Use these trees instead of fitting a forest (they should not have seen the validation rows).
    forest_kind, n_estimators, max_depth, max_features, learning_rate : the forest fitted when ``forest`` is
        None (:class:`solver.spec.ForestSpec`: ``forest_kind`` is its ``kind``).
    penalty, gamma, mcp_scaling, scaling, lambda_f, fusion_ratio, max_rules, lambdas, n_lambdas, lambda_min_ratio, tol,
    max_iter, block_selection, inner_iters, min_support, polish, validation_fraction : the path
        (:class:`solver.spec.PathSpec`,
        where each is documented with its default). ``fusion_ratio=None`` means 0.5 unless ``lambda_f`` is
        given; 0 turns fusion off.
    random_state : int, RandomState or None
        Seeds the forest and the validation split (an int is used as both seeds, as the service does).

    Attributes
    ----------
    forest_ : TreeEnsemble; estimator_ : the fitted scikit-learn forest (None when ``forest`` is given as a
    TreeEnsemble); encoding_ : TableEncoding of the training table (None for numeric input);
    path_ : list of dicts, one per step (lambda_s, lambda_f, n_rules, n_trees, n_antecedents, train_loss,
    val_loss, objective, n_iter, converged, seconds); coef_path_ : scipy.sparse CSR (steps x leaves);
    selected_step_ : int; coef_ : leaf weights of the selected step; intercept_ : float;
    n_iter_ : solver passes over the whole path; rule_ensemble_ : RuleEnsemble; rules_ : list of rule dicts;
    n_features_in_, feature_names_in_ (the original columns).
    """

    def __init__(self, forest=None, forest_kind=_FOREST.kind, n_estimators=_FOREST.n_estimators,
                 max_depth=_FOREST.max_depth, max_features=_FOREST.max_features,
                 learning_rate=_FOREST.learning_rate, penalty=_PATH.penalty, gamma=_PATH.gamma,
                 mcp_scaling=_PATH.mcp_scaling, scaling=_PATH.scaling, lambda_f=_PATH.lambda_f,
                 fusion_ratio=_PATH.fusion_ratio,
                 max_rules=_PATH.max_rules, lambdas=_PATH.lambdas, n_lambdas=_PATH.n_lambdas,
                 lambda_min_ratio=_PATH.lambda_min_ratio, tol=_PATH.tol, max_iter=_PATH.max_iter,
                 block_selection=_PATH.block_selection, inner_iters=_PATH.inner_iters,
                 min_support=_PATH.min_support, polish=_PATH.polish,
                 validation_fraction=_PATH.validation_fraction, random_state=None):
        self.forest = forest
        self.forest_kind = forest_kind
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.max_features = max_features
        self.learning_rate = learning_rate
        self.penalty = penalty
        self.gamma = gamma
        self.mcp_scaling = mcp_scaling
        self.scaling = scaling
        self.lambda_f = lambda_f
        self.fusion_ratio = fusion_ratio
        self.max_rules = max_rules
        self.lambdas = lambdas
        self.n_lambdas = n_lambdas
        self.lambda_min_ratio = lambda_min_ratio
        self.tol = tol
        self.max_iter = max_iter
        self.block_selection = block_selection
        self.inner_iters = inner_iters
        self.min_support = min_support
        self.polish = polish
        self.validation_fraction = validation_fraction
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    def path_spec(self, seed: int) -> PathSpec:
        """The estimator's path settings as the :class:`PathSpec` the library and the service run."""
        return PathSpec.from_dict({name: getattr(self, name) for name in PathSpec.defaults()
                                   if name != "random_state"} | {"random_state": seed})

    def forest_spec(self, seed: int) -> ForestSpec:
        """The forest fitted when none is given, as the :class:`ForestSpec` the service trains too."""
        try:
            return ForestSpec(kind=self.forest_kind, n_estimators=self.n_estimators, max_depth=self.max_depth,
                              max_features=self.max_features, learning_rate=self.learning_rate, random_state=seed)
        except SpecError as error:  # named as the estimator's parameter
            raise SpecError("forest_kind" if error.field == "kind" else error.field, error.detail) from None

    def fit(self, X, y, X_val=None, y_val=None, sample_weight=None):
        """Fit the forest (unless given), the FIRE path, and select the step within the rule budget."""
        self.encoding_ = TableEncoding.infer(X) if has_text_columns(X) else None
        if self.encoding_ is None:
            X, y = validate_data(self, X, y, ensure_all_finite="allow-nan", y_numeric=True, dtype=np.float64)
        else:
            X = self._table(X, reset=True)
            y = _check_y(y, y_numeric=True, estimator=self).astype(np.float64)
            check_consistent_length(X, y)
        if X.shape[0] < 2:
            raise ValueError(f"FireRegressor needs at least 2 samples, got n_samples = {X.shape[0]}")
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight, dtype=np.float64)
            if sample_weight.shape != (X.shape[0],):
                raise ValueError(f"sample_weight must have shape ({X.shape[0]},), got {sample_weight.shape}")
        if X_val is not None:
            X_val = self._table(X_val, reset=False)
        seed = (int(self.random_state) if isinstance(self.random_state, numbers.Integral)
                else int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max)))
        spec = self.path_spec(seed)
        fit = fit_rules(X, y, spec, forest=self.forest_spec(seed) if self.forest is None else self.forest,
                        X_val=X_val, y_val=y_val, sample_weight=sample_weight,
                        feature_names=self._encoded_feature_names(), encoding=self.encoding_)
        self.estimator_, self.forest_ = fit.estimator, fit.forest
        self.path_ = [step.to_dict() for step in fit.path.steps]
        self.coef_path_ = fit.path.coef_path
        self.lambda_max_ = fit.path.lambda_max
        self.n_iter_ = sum(step.n_iter for step in fit.path.steps)
        self.selected_step_ = fit.selected
        self.coef_ = fit.path.coef(fit.selected)
        self.intercept_ = float(fit.rules.intercept)
        self.rule_ensemble_ = fit.rules
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
            raise ValueError(f"this model was fitted on a table with text columns: pass a DataFrame with the "
                             f"columns {self.encoding_.column_names}")
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

    def predict(self, X):
        check_is_fitted(self, "rule_ensemble_")
        return self.rule_ensemble_.predict(self._table(X, reset=False))

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
            "feature_names_in": None if not hasattr(self, "feature_names_in_")
            else [str(v) for v in self.feature_names_in_],
            "columns": None if self.encoding_ is None else self.encoding_.to_dict(),
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
        model.path_ = list(document["path"])
        model.selected_step_ = int(document["selected_step"])
        model.rule_ensemble_ = RuleEnsemble.from_dict(document["rule_ensemble"])
        model.intercept_ = float(model.rule_ensemble_.intercept)
        return model
