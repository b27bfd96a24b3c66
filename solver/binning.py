"""Forests that split each column only at its quantiles (``ForestSpec.threshold_bins``), as SIRUS restricts its trees.

A forest grown on two samples of one table splits a column at thresholds that differ in the third digit, so the
rules it offers never repeat exactly. Restricted to the q-quantiles of each column, two samples' forests split at
nearly the same places and their rules repeat (Bénard et al., SIRUS, 2021; histogram gradient boosting bins its
columns for speed in the same way).

The forest is grown on each value's bin code, the number of cuts below it (``np.searchsorted(cuts, x, "left")``):
a split ``code <= b + 0.5`` means ``x <= cuts[b]``. Each threshold is then put back in the column's units, halfway
between ``cuts[b]`` and the next training value above it, where scikit-learn itself puts a threshold
(:func:`split_points`). The forest returned splits the raw columns and sends every training row to the leaf the
binned forest sent its codes to.

The service's drift bins (``app.core.drift``) are the same deciles and split points (:func:`quantile_edges`): a
value read back from its text one unit in the last place off lands in the bin its training value did.
"""

import numpy as np


def quantile_cuts(X: np.ndarray, n_bins: int) -> list[np.ndarray]:
    """Per column, its distinct ``n_bins``-quantiles among the non-missing values (training values, so each cut is
    a value some row has)."""
    levels = np.arange(1, n_bins) / n_bins
    cuts = []
    for column in X.T:
        present = column[~np.isnan(column)]
        cuts.append(np.unique(np.quantile(present, levels, method="lower")) if len(present) else np.zeros(0))
    return cuts


def bin_codes(X: np.ndarray, cuts: list[np.ndarray]) -> np.ndarray:
    """Each value's bin code: how many of its column's cuts lie below it (missing values stay missing)."""
    codes = np.empty_like(X, dtype=np.float64)
    for j, column_cuts in enumerate(cuts):
        column = X[:, j]
        codes[:, j] = np.where(np.isnan(column), np.nan, np.searchsorted(column_cuts, column, side="left"))
    return codes


def raw_thresholds(estimator, X: np.ndarray, cuts: list[np.ndarray]) -> None:
    """Put the thresholds of ``estimator`` (a scikit-learn forest or boosting grown on ``bin_codes(X, cuts)``) back
    in ``X``'s units, in place."""
    # position b + 1 holds the threshold of "code <= b": below every code (-inf), between cuts, above them all (inf:
    # scikit-learn's "every present value goes left", which separates the missing values only)
    at_code = [
        np.concatenate(([-np.inf], split_points(column[~np.isnan(column)], column_cuts), [np.inf]))
        for column, column_cuts in zip(X.T, cuts)
    ]
    for tree in np.ravel(estimator.estimators_):
        nodes = tree.tree_
        split = nodes.feature >= 0
        # a split between codes b and b + 1 lies in (b, b + 1): the midpoint, or anywhere for extra trees; inf (the
        # missing values' split) is clipped first, as no integer holds it
        codes = np.floor(np.minimum(nodes.threshold[split], max(map(len, cuts), default=0) + 1)).astype(np.int64)
        features = nodes.feature[split]
        nodes.threshold[split] = [at_code[f][min(max(b + 1, 0), len(at_code[f]) - 1)] for f, b in zip(features, codes)]


def split_points(values: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """Per cut (a value of ``values``), where to split after it: halfway between the cut and the next larger value in
    ``values``, so that no value lies on the split (two adjacent floats have no float between them: the cut itself
    then, as scikit-learn does); the cut itself where no value is larger."""
    distinct = np.unique(values)
    after = np.searchsorted(distinct, cuts, side="right")
    following = distinct[np.minimum(after, len(distinct) - 1)]
    halfway = (cuts + following) / 2
    return np.where((after < len(distinct)) & (halfway < following), halfway, cuts)


def quantile_edges(values: np.ndarray, n_bins: int) -> np.ndarray:
    """The edges of a column's ``n_bins``-quantile bins, none of them on a value of the column: the split point
    after each distinct quantile cut (:func:`quantile_cuts`, :func:`split_points`) but the largest value (no value
    lies above it). Bin k is ``(edges[k-1], edges[k]]``, as a tree's ``x <= t`` splits; a binary column has one
    edge halfway between its two values, a constant or empty column none. Missing values are ignored."""
    present = values[~np.isnan(values)]
    if not len(present):
        return np.zeros(0)
    cuts = quantile_cuts(present[:, None], n_bins)[0]
    return split_points(present, cuts[cuts < present.max()])
