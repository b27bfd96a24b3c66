"""Drift of a served model, rule by rule and column by column: the training profile it is measured against, the
binning of scored rows into counts, and the statistics of live counts against the profile. Pure: no Redis.

A model's **training profile** (:func:`training_profile`) is taken once, at promotion, from the rows of the table
its job ran on (at most PROFILE_ROWS of them, an even sample): how many rows each rule fires on, and each
column's rows per bin. A numeric column's bins are its training deciles, bin k ``(e_k-1, e_k]`` with each edge
halfway between a decile and the next larger training value (``solver.binning.quantile_edges``, the points where the
forests split): no training value profiled lies on an edge, so a value read back from its text one unit in the last
place off lands in its training bin, and ties merge bins (a binary column has two, ``<= 0.5`` and ``> 0.5`` for 0/1). A
categorical column's bins are its levels; both kinds have a last bin for missing values.

A profile records how its edges were cut (``TrainingProfile.version``, PROFILE_VERSION); one stored with the
training deciles themselves as edges (version 1, before issue 37) is taken again from the model's dataset where it
is still stored (``ModelStore.profile``), and read as it is where it is not. Counts are kept under field names of
their profile's version (:meth:`Layout.field_names`): counts binned on one profile's edges are never read in
another's bins.

Scored rows are counted in the same layout (:class:`Counts`): rows, each rule's firing rows, each column's rows
per bin, and each column's rows refused for a level the training table never had (an unseen level is a 422, so
those rows have no bins). :func:`drift_report` compares counts with the profile:

- a rule's live firing rate against its training rate: their ratio, and the two-sided p-value of the
  two-proportion z-test (pooled) on the counts;
- a column's population stability index over its bins, ``PSI = sum (live - train) * ln(live / train)`` with
  shares floored at PSI_FLOOR (an empty bin would make it infinite), its missing share live and in training, and
  its unseen-level share (refused rows over all rows sent);
- flags from the model's :class:`DriftThresholds`: a rule drifts where its ratio is at least ``firing_ratio``
  (or at most its inverse) and the test's p-value is below ``p_value``; a column where its PSI is at least
  ``psi`` (0.10 and 0.25 are the credit-scorecard thresholds of a moderate and a significant shift) or its
  unseen share at least ``unseen_share``; neither before ``min_rows`` rows were counted.
"""

import math
from itertools import pairwise
from typing import Literal

import numpy as np
from pydantic import ConfigDict, Field

from app.core.blobs import Document
from solver import RuleEnsemble
from solver.binning import quantile_edges
from solver.encoding import TableEncoding

PROFILE_ROWS = 200_000
PROFILE_VERSION = 2  # edges halfway between training values (1: the training deciles themselves)
N_BINS = 10  # deciles
PSI_FLOOR = 1e-4
Source = Literal["live", "batch"]
SOURCES: tuple[Source, ...] = ("live", "batch")


class ColumnProfile(Document):
    name: str
    kind: Literal["numeric", "categorical"]
    edges: list[float] = Field(
        description="numeric: increasing; bin k is (edges[k-1], edges[k]]; each edge halfway between a training "
        "decile and the next larger training value (no training value lies on one, but where the two are adjacent "
        "floats: the decile then; version 1: the deciles)"
    )
    bins: list[str] = Field(
        description="each bin's label ('<= 0.5', '(0.5, 2.5]', '> 2.5', ...; each edge shown to 4 significant "
        "digits or more, as many as keep it between the training values either side), the last 'missing'"
    )
    rows: list[int] = Field(description="training rows per bin")


class TrainingProfile(Document):
    version: int = Field(
        1,
        description=f"how the numeric edges were cut: {PROFILE_VERSION}, between training values; 1 (a profile "
        "stored without a version), on the training deciles themselves",
    )
    n_rows: int = Field(description="training rows profiled (an even sample of at most PROFILE_ROWS)")
    rule_rows: list[int] = Field(description="training rows each rule fires on, in the model's rule order")
    columns: list[ColumnProfile]


class DriftThresholds(Document):
    """A model's monitoring settings (PUT /v1/models/{id}/monitoring): a body as strict as every other (``"0.3"`` and
    ``true`` are no numbers, ``1e400`` and ``Infinity`` no finite ones), stored and read with this same model."""

    model_config = ConfigDict(strict=True)

    enabled: bool = Field(True, description="count this model's scored rows (false: counted nowhere)")
    psi: float = Field(0.25, gt=0, description="a column drifts at this population stability index or above")
    firing_ratio: float = Field(
        2.0, gt=1, description="a rule drifts where its live/training firing rate is at least this, or at most 1/this"
    )
    p_value: float = Field(0.001, gt=0, lt=1, description="... and the two-proportion test's p-value is below this")
    unseen_share: float = Field(
        0.01, gt=0, le=1, description="a column drifts where this share of rows was refused for an unseen level"
    )
    min_rows: int = Field(100, ge=1, description="nothing is flagged before this many rows were counted")


class Layout:
    """Where each count sits in a flat count vector: rows, then each column's unseen rows, each rule's firing
    rows, each column's bins."""

    def __init__(self, profile: TrainingProfile):
        self.version = profile.version
        self.n_rules = len(profile.rule_rows)
        self.n_columns = len(profile.columns)
        self.rules_at = 1 + self.n_columns
        sizes = [len(column.bins) for column in profile.columns]
        self.bins_at = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64) + self.rules_at + self.n_rules
        self.size = int(self.bins_at[-1])

    def field_names(self) -> list[str]:
        """The Redis hash field of each count: ``n``, ``u:{column}``, ``r:{rule}``, ``c:{column}:{bin}``, each after
        ``v{version}/`` for a profile of version 2 or later (a profile taken again with other edges counts apart)."""
        names = ["n", *(f"u:{j}" for j in range(self.n_columns)), *(f"r:{i}" for i in range(self.n_rules))]
        for j in range(self.n_columns):
            names += [f"c:{j}:{b}" for b in range(int(self.bins_at[j + 1] - self.bins_at[j]))]
        prefix = "" if self.version == 1 else f"v{self.version}/"
        return [prefix + name for name in names]


class Binning:
    """Bins scored rows (encoded as the model's TableEncoding encodes them) into a profile's layout."""

    def __init__(self, ensemble: RuleEnsemble, encoding: TableEncoding, profile: TrainingProfile):
        self.ensemble = ensemble
        self.profile = profile
        self.layout = Layout(profile)
        self._blocks = _feature_blocks(encoding)

    def count(self, X: np.ndarray) -> np.ndarray:
        """The count vector of encoded rows ``X`` (n, features)."""
        counts = np.zeros(self.layout.size, dtype=np.int64)
        counts[0] = len(X)
        if len(X) == 0:
            return counts
        at = self.layout.rules_at
        counts[at : at + self.layout.n_rules] = self.ensemble.fires(X).sum(axis=0)
        for j, (column, block) in enumerate(zip(self.profile.columns, self._blocks)):
            start, stop = self.layout.bins_at[j], self.layout.bins_at[j + 1]
            counts[start:stop] = np.bincount(_bin_of(column, X[:, block]), minlength=stop - start)
        return counts

    def unseen(self, column: str, n_rows: int) -> np.ndarray:
        """The count vector of ``n_rows`` rows refused for an unseen level of ``column``."""
        counts = np.zeros(self.layout.size, dtype=np.int64)
        names = [c.name for c in self.profile.columns]
        if column in names:
            counts[1 + names.index(column)] = n_rows
        return counts


def _feature_blocks(encoding: TableEncoding) -> list[slice]:
    blocks, position = [], 0
    for column in encoding.columns:
        width = 1 if column.kind == "numeric" else len(column.categories)
        blocks.append(slice(position, position + width))
        position += width
    return blocks


def _bin_of(column: ColumnProfile, block: np.ndarray) -> np.ndarray:
    """Each row's bin: a numeric value's bin k where ``edges[k-1] < value <= edges[k]`` (the last bin where
    missing); a categorical row's level (its one-hot indicator; the last bin where none is set)."""
    if column.kind == "numeric":
        values = block[:, 0]
        bins = np.searchsorted(np.asarray(column.edges), values, side="left")
        return np.where(np.isnan(values), len(column.bins) - 1, bins)
    return np.where(block.any(axis=1), block.argmax(axis=1), len(column.bins) - 1)


def training_profile(ensemble: RuleEnsemble, encoding: TableEncoding, X: np.ndarray) -> TrainingProfile:
    """The profile of encoded training rows ``X`` (an even sample of PROFILE_ROWS where there are more)."""
    if len(X) > PROFILE_ROWS:
        X = X[np.linspace(0, len(X) - 1, PROFILE_ROWS).astype(np.int64)]
    blocks = _feature_blocks(encoding)
    columns = []
    for column, block in zip(encoding.columns, blocks):
        if column.kind == "numeric":
            values = X[:, block][:, 0]
            edges = quantile_edges(values, N_BINS)
            labels = _interval_labels(edges, values[~np.isnan(values)])
            profile = ColumnProfile(
                name=column.name, kind="numeric", edges=edges.tolist(), bins=[*labels, "missing"], rows=[]
            )
        else:
            levels = list(column.categories)
            profile = ColumnProfile(name=column.name, kind="categorical", edges=[], bins=[*levels, "missing"], rows=[])
        profile.rows = np.bincount(_bin_of(profile, X[:, block]), minlength=len(profile.bins)).tolist()
        columns.append(profile)
    rule_rows = ensemble.fires(X).sum(axis=0).tolist() if len(X) else [0] * len(ensemble.rules)
    return TrainingProfile(version=PROFILE_VERSION, n_rows=len(X), rule_rows=rule_rows, columns=columns)


def _interval_labels(edges: np.ndarray, values: np.ndarray) -> list[str]:
    """``<= e0``, ``(e0, e1]``, ..., ``> e_last`` (``all`` without edges), each edge of the training ``values`` with 4
    significant digits, or as many more as keep it between the training values on either side of it: a label never
    reads as though a training value were in another bin than its own."""
    if not len(edges):
        return ["all"]
    distinct = np.unique(values)
    after = np.searchsorted(distinct, edges, side="right")  # an edge lies below the largest value, at or above a cut
    shown = [_shown(edge, distinct[k - 1], distinct[k]) for edge, k in zip(edges, after)]
    middle = [f"({low}, {high}]" for low, high in pairwise(shown)]
    return [f"<= {shown[0]}", *middle, f"> {shown[-1]}"]


def _shown(edge: float, below: float, above: float) -> str:
    """``edge`` with the fewest significant digits (at least 4) that read as a number in ``[below, above)`` (17
    digits read as ``edge`` itself)."""
    return next(text for digits in range(4, 18) if below <= float(text := f"{edge:.{digits}g}") < above)


# ---- statistics -------------------------------------------------------------------------------------------------


class RuleDrift(Document):
    rule: int = Field(description="the rule's id (r{id} in the model's text)")
    training_rate: float
    live_rate: float | None = Field(description="null before any row was counted")
    ratio: float | None = Field(description="live / training firing rate (null where the training rate is 0)")
    live_rows: int = Field(description="counted rows the rule fired on")
    p_value: float | None = Field(description="two-sided, two-proportion z-test of live against training counts")
    drifted: bool


class ColumnDrift(Document):
    column: str
    kind: Literal["numeric", "categorical"]
    edges: list[float] = Field(description="numeric: the edges of its bins (ColumnProfile.edges)")
    psi: float | None = Field(description="population stability index over the column's bins (null: no rows)")
    missing_share: float | None
    training_missing_share: float
    unseen_share: float | None = Field(description="rows refused for a level training never had, of all rows sent")
    bins: list[str]
    live_rows: list[int] = Field(description="counted rows per bin")
    training_shares: list[float]
    drifted: bool


class DriftFigures(Document):
    rows: int
    rules: list[RuleDrift]
    columns: list[ColumnDrift]


def two_proportion_p_value(x0: int, n0: int, x1: int, n1: int) -> float | None:
    """Two-sided p-value of the pooled two-proportion z-test (None where either sample is empty)."""
    if n0 == 0 or n1 == 0:
        return None
    pooled = (x0 + x1) / (n0 + n1)
    spread = math.sqrt(pooled * (1 - pooled) * (1 / n0 + 1 / n1))
    if spread == 0:
        return 1.0
    z = (x1 / n1 - x0 / n0) / spread
    return math.erfc(abs(z) / math.sqrt(2))


def psi(expected: np.ndarray, actual: np.ndarray) -> float:
    """Population stability index of two bin shares, each floored at PSI_FLOOR."""
    expected, actual = np.maximum(expected, PSI_FLOOR), np.maximum(actual, PSI_FLOOR)
    return float(np.sum((actual - expected) * np.log(actual / expected)))


def drift_figures(profile: TrainingProfile, counts: np.ndarray, thresholds: DriftThresholds) -> DriftFigures:
    """Each rule's and column's drift in the count vector ``counts`` (:class:`Layout`)."""
    layout = Layout(profile)
    n = int(counts[0])
    enough = n >= thresholds.min_rows
    rules = []
    for rule_id, training_rows in enumerate(profile.rule_rows):  # a rule's id is its position
        live_rows = int(counts[layout.rules_at + rule_id])
        training_rate = training_rows / profile.n_rows if profile.n_rows else 0.0
        live_rate = live_rows / n if n else None
        ratio = None if live_rate is None or training_rate == 0 else live_rate / training_rate
        p_value = two_proportion_p_value(training_rows, profile.n_rows, live_rows, n)
        far = ratio is not None and (ratio >= thresholds.firing_ratio or ratio <= 1 / thresholds.firing_ratio)
        drifted = enough and far and p_value is not None and p_value < thresholds.p_value
        rules.append(
            RuleDrift(
                rule=rule_id,
                training_rate=training_rate,
                live_rate=live_rate,
                ratio=ratio,
                live_rows=live_rows,
                p_value=p_value,
                drifted=drifted,
            )
        )
    columns = []
    for j, column in enumerate(profile.columns):
        live = counts[layout.bins_at[j] : layout.bins_at[j + 1]]
        training = np.asarray(column.rows, dtype=np.float64)
        training_shares = training / max(training.sum(), 1)
        unseen = int(counts[1 + j])
        psi_value = psi(training_shares, live / n) if n else None
        unseen_share = unseen / (n + unseen) if n + unseen else None
        drifted = (n + unseen) >= thresholds.min_rows and (
            (psi_value is not None and psi_value >= thresholds.psi)
            or (unseen_share is not None and unseen_share >= thresholds.unseen_share)
        )
        columns.append(
            ColumnDrift(
                column=column.name,
                kind=column.kind,
                edges=column.edges,
                psi=psi_value,
                missing_share=float(live[-1] / n) if n else None,
                training_missing_share=float(training_shares[-1]),
                unseen_share=unseen_share,
                bins=column.bins,
                live_rows=live.tolist(),
                training_shares=training_shares.tolist(),
                drifted=drifted,
            )
        )
    return DriftFigures(rows=n, rules=rules, columns=columns)


class DriftSummary(Document):
    """A model document's drift flags: over [since, until), the rules and columns its thresholds flag."""

    since: float
    until: float
    rows: int = Field(description="rows counted (live and batch)")
    thresholds: DriftThresholds
    drifted_rules: list[int]
    drifted_columns: list[str]
