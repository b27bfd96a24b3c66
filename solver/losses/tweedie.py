"""The Tweedie loss with a log link (``loss="tweedie"``, variance power ``p`` in (1, 2), ``PathSpec.power``): amounts
with many zeros, a compound Poisson-gamma (claim costs per policy, spending per customer). The rules multiply the mean.

Per row, with score ``eta`` (the log of the mean ``mu``), the negative log-likelihood up to terms in y alone is::

    l(eta) = -y exp((1 - p) eta) / (1 - p) + exp((2 - p) eta) / (2 - p)

its residual ``r = -dl/deta = y mu^(1-p) - mu^(2-p)`` and curvature ``h = (p - 1) y mu^(1-p) + (2 - p) mu^(2-p) > 0``
(convex in eta for p in [1, 2]). No bound on h holds for all weights, so the path's steps are proximal Newton steps
certified by GBCD's measures (``solver.losses.newton``). The step's loss is the mean unit deviance
``2 (y^(2-p) / ((1-p)(2-p)) - y mu^(1-p) / (1-p) + mu^(2-p) / (2-p))``, scikit-learn's ``mean_tweedie_deviance``.
Exposure: ``y = amount / exposure`` with ``sample_weight = exposure`` (as glum and scikit-learn take it).
"""

from dataclasses import dataclass, replace

import numpy as np

from .base import LOG_LINK_FIELDS, LogLinkMean
from .newton import NewtonLoss

CODE = 4  # no kernel dispatches it: its steps are Newton steps (solver.losses.newton)


@dataclass(frozen=True)
class Tweedie(LogLinkMean, NewtonLoss):
    power: float = 1.5  # PathSpec.power, set by configured()

    @property
    def variance_power(self):
        return self.power

    def configured(self, spec):
        return replace(self, power=float(spec.power))

    def check_targets(self, y, name, sample_weight=None):
        """Amounts: non-negative, with a positive weighted total where ``sample_weight`` is given."""
        if np.any(y < 0):
            raise ValueError(f"the Tweedie loss needs non-negative {name} (amounts), got {y.min():g}")
        if sample_weight is not None and not np.dot(sample_weight, y) > 0:
            raise ValueError(f"the Tweedie loss needs some positive {name} with positive weight: every amount is 0")

    def newton_terms(self, y, score, sample_weight):
        p = self.power
        shrunk, grown = np.exp((1.0 - p) * score), np.exp((2.0 - p) * score)  # mu^(1-p), mu^(2-p)
        return y * shrunk - grown, (p - 1.0) * y * shrunk + (2.0 - p) * grown

    def loss_total(self, y, score, sample_weight):
        p = self.power
        per_row = -y * np.exp((1.0 - p) * score) / (1.0 - p) + np.exp((2.0 - p) * score) / (2.0 - p)
        return float(np.dot(sample_weight, per_row))

    def mean_loss(self, y, score, sample_weight=None):
        """The mean unit deviance (module docstring)."""
        p = self.power
        y, score = np.asarray(y, dtype=np.float64), np.asarray(score, dtype=np.float64)
        per_row = 2.0 * (
            np.power(y, 2.0 - p) / ((1.0 - p) * (2.0 - p))
            - y * np.exp((1.0 - p) * score) / (1.0 - p)
            + np.exp((2.0 - p) * score) / (2.0 - p)
        )
        return float(np.average(per_row, weights=sample_weight))

    def warmup_target(self, y):
        return np.where(y > np.median(y), np.exp(y - y.max()), 0.0)


LOSS = Tweedie(
    name="tweedie",
    code=CODE,
    task="amount",
    other_tasks=("count", "regression"),  # where the target is never negative
    **LOG_LINK_FIELDS,
)
