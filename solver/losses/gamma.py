"""The Gamma loss with a log link (``loss="gamma"``): positive, right-skewed amounts (claim severities, costs). The
rules multiply the mean.

Per row, with score ``eta`` (the log of the mean ``mu``), the negative log-likelihood up to terms in y alone is
``l(eta) = y exp(-eta) + eta``: residual ``r = -dl/deta = y / mu - 1``, curvature ``h = y / mu > 0``. No bound on h
holds for all weights, so the path's steps are proximal Newton steps certified by GBCD's measures
(``solver.losses.newton``). The step's loss is the mean unit deviance ``2 (y / mu - log(y / mu) - 1)``,
scikit-learn's ``mean_gamma_deviance``. Exposure: ``y = amount / exposure`` with ``sample_weight = exposure``.
"""

import numpy as np

from .base import LOG_LINK_FIELDS, LogLinkMean
from .newton import NewtonLoss

CODE = 5  # no kernel dispatches it: its steps are Newton steps (solver.losses.newton)


class Gamma(LogLinkMean, NewtonLoss):
    variance_power = 2.0

    def check_targets(self, y, name, sample_weight=None):
        """Positive amounts, every one."""
        if not np.all(y > 0):
            bad = np.flatnonzero(~(y > 0))
            raise ValueError(
                f"the Gamma loss needs positive {name} (amounts > 0): {len(bad)} rows are not, the first at row "
                f"{bad[0]} ({y[bad[0]]:g}); use loss='tweedie' for amounts with zeros"
            )

    def newton_terms(self, y, score, sample_weight):
        ratio = y * np.exp(-score)  # y / mu
        return ratio - 1.0, ratio

    def loss_total(self, y, score, sample_weight):
        return float(np.dot(sample_weight, y * np.exp(-score) + score))

    def mean_loss(self, y, score, sample_weight=None):
        """The mean unit deviance (module docstring)."""
        y, score = np.asarray(y, dtype=np.float64), np.asarray(score, dtype=np.float64)
        ratio = y * np.exp(-score)
        return float(np.average(2.0 * (ratio - np.log(ratio) - 1.0), weights=sample_weight))

    def warmup_target(self, y):
        return np.exp(y - y.max()) + 1e-3


LOSS = Gamma(
    name="gamma",
    code=CODE,
    task="amount",
    other_tasks=("regression",),  # where the target is positive
    **LOG_LINK_FIELDS,
)
