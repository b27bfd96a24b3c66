"""The independent route to a cross-validated path's folds (solver.cross_validation): each fold's path fitted as a
plain fit on that fold's training rows, validated on its rows, over the lambda grid of every row."""

from solver import fit_rules
from solver.cross_validation import fold_rows
from solver.fitting import cross_validation_grid, train_forest


def plain_fold_fits(X, y, spec, forest):
    """(the grid of every row, each fold's RuleFit in fold order) for ``spec`` (with ``cv_folds``) and the
    ForestSpec ``forest``."""
    grid = cross_validation_grid(X, y, spec, forest=train_forest(forest, X, y)[0])
    plain = spec.replace(cv_folds=None, lambdas=tuple(grid))
    fits = []
    for k in range(spec.cv_folds):
        train, val = fold_rows(len(y), spec.cv_folds, spec.random_state, k)
        fits.append(fit_rules(X[train], y[train], plain, forest=forest, X_val=X[val], y_val=y[val]))
    return grid, fits
