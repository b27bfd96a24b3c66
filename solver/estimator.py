"""scikit-learn style estimator: a forest in, a small weighted rule set out."""

import numbers

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.ensemble import ExtraTreesRegressor, GradientBoostingRegressor, RandomForestRegressor
from sklearn.model_selection import train_test_split
from sklearn.utils.validation import check_is_fitted, check_random_state, validate_data

from .forest import TreeEnsemble, leaf_matrix
from .path import DEFAULT_FUSION_RATIO, fit_path
from .rules import RuleEnsemble

FOREST_KINDS = {
    "random_forest": RandomForestRegressor,
    "extra_trees": ExtraTreesRegressor,
    "gradient_boosting": GradientBoostingRegressor,
}
DOCUMENT_FORMAT = "fire-rule-model"


class FireRegressor(RegressorMixin, BaseEstimator):
    """FIRE rule extraction (Liu & Mazumder, KDD 2023) as a scikit-learn regressor.

    Fits a tree ensemble (or takes a fitted one through ``forest``), treats every leaf as a candidate rule,
    computes a warm-started path of the FIRE problem (MCP or L1 sparsity plus fusion of neighbouring leaves
    of each tree) and keeps the step with the lowest validation loss among those with at most ``max_rules``
    rules. Without ``X_val``/``y_val`` in ``fit``, ``validation_fraction`` of the training rows is held out
    for that choice (and the forest, when fitted here, is fitted on the remaining rows only).

    Parameters
    ----------
    forest : fitted RandomForestRegressor, ExtraTreesRegressor, GradientBoostingRegressor,
        DecisionTreeRegressor or solver.TreeEnsemble, default=None
        Use these trees instead of fitting a forest.
    forest_kind : {"random_forest", "extra_trees", "gradient_boosting"}, default="random_forest"
    n_estimators, max_depth, max_features : forest parameters (ignored when ``forest`` is given).
    penalty : {"mcp", "l1"}, default="mcp"
    gamma : float, default=1.1
        MCP concavity (> 1); close to 1 selects aggressively, large values behave like L1.
    mcp_scaling : {"block", "plain"}, default="block"
        "block": the paper's per-tree concavity gamma / L_t; "plain": one gamma for every leaf (the
        objective of skglm's MCPRegression on the same columns with alpha = lambda/n, gamma*n).
    lambda_f : float, default=None
        Fixed fusion strength. Exclusive with ``fusion_ratio``.
    fusion_ratio : float, default=0.5
        Fusion strength as a multiple of lambda_s at every step (the paper suggests 0.5 to 2).
    max_rules : int, default=None
        Rule budget for the selected step; the path stops once it passes it.
    lambdas : array-like, default=None
        Explicit lambda_s grid (sorted decreasing); otherwise ``n_lambdas`` geometric steps from
        lambda_max down to ``lambda_min_ratio * lambda_max`` (50 chose rule sets under 15 rules as well as
        100 on the seven benchmark datasets: bench/results/quality.md).
    tol, max_iter, block_selection : solver settings (see ``solver.fit_path``).
    validation_fraction : float, default=0.2
    random_state : int, RandomState or None
        Seeds the forest and the validation split.

    Attributes
    ----------
    forest_ : TreeEnsemble; estimator_ : the fitted scikit-learn forest (None when ``forest`` is given as a
    TreeEnsemble); path_ : list of dicts, one per step (lambda_s, lambda_f, n_rules, n_trees, n_antecedents,
    train_loss, val_loss, objective, n_iter, converged, seconds); coef_path_ : scipy.sparse CSR
    (steps x leaves); selected_step_ : int; coef_ : leaf weights of the selected step; intercept_ : float;
    n_iter_ : solver passes over the whole path;
    rule_ensemble_ : RuleEnsemble; rules_ : list of rule dicts; n_features_in_, feature_names_in_.
    """

    def __init__(self, forest=None, forest_kind="random_forest", n_estimators=500, max_depth=3,
                 max_features="sqrt", penalty="mcp", gamma=1.1, mcp_scaling="block", lambda_f=None,
                 fusion_ratio=DEFAULT_FUSION_RATIO, max_rules=None, lambdas=None, n_lambdas=50,
                 lambda_min_ratio=1e-3, tol=1e-4, max_iter=10_000, block_selection="greedy",
                 validation_fraction=0.2, random_state=None):
        self.forest = forest
        self.forest_kind = forest_kind
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.max_features = max_features
        self.penalty = penalty
        self.gamma = gamma
        self.mcp_scaling = mcp_scaling
        self.lambda_f = lambda_f
        self.fusion_ratio = fusion_ratio
        self.max_rules = max_rules
        self.lambdas = lambdas
        self.n_lambdas = n_lambdas
        self.lambda_min_ratio = lambda_min_ratio
        self.tol = tol
        self.max_iter = max_iter
        self.block_selection = block_selection
        self.validation_fraction = validation_fraction
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    def fit(self, X, y, X_val=None, y_val=None, sample_weight=None):
        """Fit the forest (unless given), the FIRE path, and select the step within the rule budget."""
        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan", y_numeric=True, dtype=np.float64)
        if X.shape[0] < 2:
            raise ValueError(f"FireRegressor needs at least 2 samples, got n_samples = {X.shape[0]}")
        self._check_params()
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight, dtype=np.float64)
            if sample_weight.shape != (X.shape[0],):
                raise ValueError(f"sample_weight must have shape ({X.shape[0]},), got {sample_weight.shape}")
        rng = check_random_state(self.random_state)
        seed = rng.randint(np.iinfo(np.int32).max)

        if (X_val is None) != (y_val is None):
            raise ValueError("give both X_val and y_val, or neither")
        if X_val is not None:
            X_val = validate_data(self, X_val, reset=False, ensure_all_finite="allow-nan", dtype=np.float64)
            y_val = np.asarray(y_val, dtype=np.float64).ravel()
            if y_val.shape[0] != X_val.shape[0]:
                raise ValueError("X_val and y_val have different numbers of rows")
            X_train, y_train, w_train = X, y, sample_weight
        elif X.shape[0] >= 5 and self.validation_fraction > 0:
            parts = train_test_split(np.arange(X.shape[0]), test_size=self.validation_fraction,
                                     random_state=seed)
            train_rows, val_rows = parts
            X_train, y_train, X_val, y_val = X[train_rows], y[train_rows], X[val_rows], y[val_rows]
            w_train = None if sample_weight is None else sample_weight[train_rows]
        else:
            X_train, y_train, w_train = X, y, sample_weight

        self.estimator_, self.forest_ = self._fitted_forest(X_train, y_train, w_train, seed)
        if self.forest_.n_features != X.shape[1]:
            raise ValueError(f"the forest was fitted on {self.forest_.n_features} features, X has {X.shape[1]}")
        if hasattr(self, "feature_names_in_"):
            self.forest_.feature_names = [str(name) for name in self.feature_names_in_]

        result = fit_path(
            leaf_matrix(self.forest_, X_train), y_train, penalty=self.penalty, gamma=self.gamma,
            mcp_scaling=self.mcp_scaling, lambda_f=self.lambda_f,
            fusion_ratio=None if self.lambda_f is not None else self.fusion_ratio, lambdas=self.lambdas,
            n_lambdas=self.n_lambdas, lambda_min_ratio=self.lambda_min_ratio, max_rules=self.max_rules,
            tol=self.tol, max_iter=self.max_iter, block_selection=self.block_selection,
            sample_weight=w_train,
            val_matrix=None if X_val is None else leaf_matrix(self.forest_, X_val), y_val=y_val,
            leaf_ancestors=self.forest_.leaf_ancestors)
        self.path_ = [step.to_dict() for step in result.steps]
        self.coef_path_ = result.coef_path
        self.lambda_max_ = result.lambda_max
        self.n_iter_ = sum(step.n_iter for step in result.steps)
        self.selected_step_ = result.select(self.max_rules)
        self.coef_ = result.coef(self.selected_step_)
        self.intercept_ = float(result.intercepts[self.selected_step_])
        self.rule_ensemble_ = RuleEnsemble.from_weights(self.forest_, self.coef_, self.intercept_)
        return self

    def _check_params(self):
        if self.forest_kind not in FOREST_KINDS:
            raise ValueError(f"forest_kind must be one of {sorted(FOREST_KINDS)}, got {self.forest_kind!r}")
        if not (isinstance(self.validation_fraction, numbers.Real) and 0 <= self.validation_fraction < 1):
            raise ValueError(f"validation_fraction must be in [0, 1), got {self.validation_fraction!r}")
        if self.max_rules is not None and not (isinstance(self.max_rules, numbers.Integral)
                                               and self.max_rules >= 0):
            raise ValueError(f"max_rules must be a non-negative integer or None, got {self.max_rules!r}")

    def _fitted_forest(self, X, y, sample_weight, seed):
        if self.forest is None:
            params = dict(n_estimators=self.n_estimators, max_depth=self.max_depth, random_state=seed)
            if self.forest_kind != "gradient_boosting" or self.max_features != "sqrt":
                params["max_features"] = self.max_features
            estimator = FOREST_KINDS[self.forest_kind](**params)
            estimator.fit(X, y, sample_weight=sample_weight)
            return estimator, TreeEnsemble.from_sklearn(estimator)
        if isinstance(self.forest, TreeEnsemble):
            return None, self.forest
        check_is_fitted(self.forest)
        return self.forest, TreeEnsemble.from_sklearn(self.forest)

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
        X = validate_data(self, X, reset=False, ensure_all_finite="allow-nan", dtype=np.float64)
        return self.rule_ensemble_.predict(X)

    def explain(self, X):
        """Per row, the indices (into ``rules_``) of the rules that fired."""
        check_is_fitted(self, "rule_ensemble_")
        X = validate_data(self, X, reset=False, ensure_all_finite="allow-nan", dtype=np.float64)
        return self.rule_ensemble_.explain(X)

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
        model.path_ = list(document["path"])
        model.selected_step_ = int(document["selected_step"])
        model.rule_ensemble_ = RuleEnsemble.from_dict(document["rule_ensemble"])
        model.intercept_ = float(model.rule_ensemble_.intercept)
        return model
