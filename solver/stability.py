"""Whether a rule set repeats on another sample: rule identity up to quantile bins, the Dice–Sørensen index, and
each rule's selection frequency over half-samples.

Two fits on two samples of one table never split at exactly the same numbers, so rules are compared as SIRUS
compares them (Bénard et al., 2021): a condition is its column, its direction, whether a missing value satisfies it,
and the quantile cut of its column nearest its threshold (``QUANTILE_BINS``-quantiles of reference rows: the
training rows of the model read). A rule is the set of its conditions; a linear term is its column.

Whether a missing value satisfies a condition is part of it only where its column has missing values in the
reference rows (``missing_features``): elsewhere the flag says only where a split would send a value it never saw
(scikit-learn sends it to the larger child), which differs between two samples' forests and says nothing about the
table.

The stability of a procedure is the Dice–Sørensen index ``2 |A ∩ B| / (|A| + |B|)`` of the rule sets ``A`` and ``B``
it extracts from two independent samples of the same size: the two halves of a random split (``half_sample_pairs``).
A rule's selection frequency is the share of half-sample fits whose rule set holds it.

A cross-validated path has fitted K paths already, one per fold, on the same lambda grid as its refit: at each step,
a rule's fold frequency is the share of the folds whose path at that step holds it, and the folds' stability their
mean pairwise Dice index (``fold_stability``), at no cost beyond reading each fold's rules (``PathRuleKeys``).
"""

from collections.abc import Collection, Hashable, Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from .binning import quantile_cuts
from .spec import SpecError, _is_count

# deciles, as the measurement and SIRUS's default q = 10
QUANTILE_BINS = 10
# half-sample fits of one stability measurement: each is a whole fit
MAX_RESAMPLES = 100

RuleKey = frozenset[Hashable]


def reference_cuts(X: np.ndarray, n_bins: int = QUANTILE_BINS) -> list[np.ndarray]:
    """The quantile cuts of each column of the reference rows ``X`` (encoded) that conditions are binned on."""
    return quantile_cuts(np.asarray(X, dtype=np.float64), n_bins)


def missing_features(X: np.ndarray) -> frozenset[int]:
    """The columns of the reference rows ``X`` (encoded) that have missing values."""
    return frozenset(np.flatnonzero(np.isnan(np.asarray(X, dtype=np.float64)).any(axis=0)).tolist())


def rule_keys(ensemble, cuts: Sequence[np.ndarray], with_missing: Collection[int] | None = None) -> list[RuleKey]:
    """One key per rule of ``ensemble`` (a RuleEnsemble), then one per linear term, in the ensemble's order.
    ``with_missing``: the features whose conditions' missing flag is part of the key (``missing_features`` of the
    reference rows); None: every feature's."""
    keys = []
    for rule in ensemble.rules:
        keys.append(
            frozenset(
                (
                    c.feature_index,
                    c.operator,
                    c.missing if with_missing is None or c.feature_index in with_missing else None,
                    _nearest_cut(cuts[c.feature_index], c.threshold),
                )
                for c in rule.conditions
            )
        )
    keys.extend(frozenset({("linear", term.feature_index)}) for term in ensemble.linear)
    return keys


def _nearest_cut(column_cuts: np.ndarray, threshold: float) -> int:
    if len(column_cuts) == 0:
        return 0
    return int(np.argmin(np.abs(column_cuts - threshold)))


def dice(a: set | frozenset, b: set | frozenset) -> float:
    """Dice–Sørensen index of two sets: 1 for equal sets (two empty ones included), 0 for disjoint ones."""
    if not a and not b:
        return 1.0
    return 2 * len(a & b) / (len(a) + len(b))


def half_sample_pairs(n_rows: int, n_pairs: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``n_pairs`` random splits of ``n_rows`` rows into two disjoint halves (sorted rows; the first half gets the
    odd row), each pair drawn from its own stream of ``seed``."""
    return [_halves(n_rows, k, seed) for k in range(n_pairs)]


def half_sample(n_rows: int, resample: int, seed: int) -> np.ndarray:
    """The rows of resample fit ``resample`` alone: half ``resample % 2`` of pair ``resample // 2`` of
    ``half_sample_pairs`` (a fit each, run apart: the service runs each as a job of its own)."""
    return _halves(n_rows, resample // 2, seed)[resample % 2]


def _halves(n_rows: int, pair: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.random.default_rng([seed, pair]).permutation(n_rows)
    half = (n_rows + 1) // 2
    return np.sort(order[:half]), np.sort(order[half:])


def check_resamples(n_resamples, field: str = "stability_resamples") -> int:
    """The number of pairs of half-sample fits of ``n_resamples`` fits (an even count >= 2), or a SpecError."""
    if not _is_count(n_resamples) or n_resamples < 2 or n_resamples % 2 or n_resamples > MAX_RESAMPLES:
        raise SpecError(
            field,
            f"must be an even number of fits in [2, {MAX_RESAMPLES}] (pairs of disjoint halves), got {n_resamples!r}",
        )
    return n_resamples // 2


def selection_frequencies(keys: Sequence[RuleKey], fitted: Sequence[Collection[RuleKey]]) -> np.ndarray:
    """Each key's selection frequency: the share of the ``fitted`` rule sets (resamples, folds) that hold it."""
    return np.array([np.mean([key in keys_of_fit for keys_of_fit in fitted]) for key in keys])


@dataclass
class RuleStability:
    """How a rule set repeats over half-samples: ``frequencies`` (one per rule, then per linear term, of the model
    read: the share of the resample fits holding it), ``dice`` (the mean Dice index of the pairs' two halves, SIRUS's
    stability), ``pair_dice`` (each pair's), ``n_resamples`` (fits: two per pair)."""

    frequencies: np.ndarray
    dice: float
    pair_dice: list[float]
    n_resamples: int

    def to_dict(self) -> dict:
        return {
            "frequencies": [float(f) for f in self.frequencies],
            "dice": self.dice,
            "pair_dice": list(self.pair_dice),
            "n_resamples": self.n_resamples,
        }


def rule_stability(
    model, resample_pairs: Sequence[tuple], cuts: Sequence[np.ndarray], with_missing: Collection[int] | None = None
) -> RuleStability:
    """The stability of ``model`` (a RuleEnsemble) from the rule ensembles fitted on the two halves of each pair in
    ``resample_pairs`` (``[(ensemble of half a, ensemble of half b), ...]``), conditions binned on ``cuts`` (and
    missing flags kept ``with_missing``, as in ``rule_keys``)."""
    if not resample_pairs:
        raise ValueError("rule stability needs at least one pair of half-sample fits")
    sets = [(set(rule_keys(a, cuts, with_missing)), set(rule_keys(b, cuts, with_missing))) for a, b in resample_pairs]
    fits = [keys for pair in sets for keys in pair]
    frequencies = selection_frequencies(rule_keys(model, cuts, with_missing), fits)
    pair_dice = [dice(a, b) for a, b in sets]
    return RuleStability(frequencies, float(np.mean(pair_dice)), pair_dice, len(fits))


@dataclass
class PathRuleKeys:
    """Each step's rule keys of a path (``rule_keys`` of its step's rules, in their order), said compactly as a
    fold's job stores them: the distinct keys once (``keys``), and per step the positions of its keys among them
    (``steps``; a path's steps share most of their rules)."""

    keys: list[RuleKey]
    steps: list[list[int]]

    @classmethod
    def of(cls, step_keys: Iterable[Sequence[RuleKey]]) -> "PathRuleKeys":
        position: dict[RuleKey, int] = {}
        steps = [[position.setdefault(key, len(position)) for key in keys] for keys in step_keys]
        return cls(list(position), steps)

    def at(self, step: int) -> list[RuleKey]:
        """Step ``step``'s keys, in its rules' order."""
        return [self.keys[k] for k in self.steps[step]]

    def to_dict(self) -> dict:
        """JSON-ready: each key a list of its conditions, each a list (sorted: a key is a set)."""
        return {"keys": [sorted((list(c) for c in key), key=repr) for key in self.keys], "steps": self.steps}

    @classmethod
    def from_dict(cls, data: dict) -> "PathRuleKeys":
        return cls([frozenset(tuple(c) for c in key) for key in data["keys"]], [list(s) for s in data["steps"]])


def path_rule_keys(ensembles: Iterable, X: np.ndarray) -> PathRuleKeys:
    """The keys of each step's rules ``ensembles`` (RuleEnsembles, one per step) of a path in a cross-validation,
    conditions binned on the quantile cuts of the reference rows ``X`` (encoded: every row of the table, the refit's
    training rows) and missing flags kept where ``X`` has missing values: each fold's forest is its own, and sends an
    unseen missing value wherever its split's larger child is."""
    cuts, with_missing = reference_cuts(X), missing_features(X)
    return PathRuleKeys.of(rule_keys(ensemble, cuts, with_missing) for ensemble in ensembles)


@dataclass
class FoldStability:
    """How the rules of a cross-validated path repeat over its K folds, step by step (the refit's step k against
    each fold's path at step k, on the same lambda): ``frequencies[k]`` per rule then per linear term of the refit's
    step k, the share of the folds whose path at step k holds it; ``dice[k]`` the mean Dice index of the folds' rule
    sets at step k over their K (K - 1) / 2 pairs; ``n_folds`` K."""

    frequencies: list[np.ndarray]
    dice: list[float]
    n_folds: int

    def to_dict(self) -> dict:
        return {
            "frequencies": [[float(f) for f in step] for step in self.frequencies],
            "dice": list(self.dice),
            "n_folds": self.n_folds,
        }


def fold_stability(refit: PathRuleKeys, folds: Sequence[PathRuleKeys]) -> FoldStability:
    """The fold stability (``FoldStability``) of the refit's steps ``refit`` over the paths of its ``folds``
    (``path_rule_keys`` of each, binned on the same reference rows): every fold reached each of the refit's steps."""
    if len(folds) < 2:
        raise ValueError(f"fold stability needs the paths of at least 2 folds, got {len(folds)}")
    if any(len(fold.steps) < len(refit.steps) for fold in folds):
        raise ValueError(f"a fold's path stops before the refit's {len(refit.steps)} steps")
    frequencies, dices = [], []
    for k in range(len(refit.steps)):
        sets = [set(fold.at(k)) for fold in folds]
        frequencies.append(selection_frequencies(refit.at(k), sets))
        dices.append(float(np.mean([dice(a, b) for a, b in combinations(sets, 2)])))
    return FoldStability(frequencies, dices, len(folds))
