"""The losses the solver fits, one module each, and their registry.

Each loss module (``squared``, ``logistic``, ``multinomial``, ``poisson``, ``tweedie``, ``gamma``, ``cox``) holds the
loss's numba kernels, which ``solver.losses.kernels`` dispatches by code for ``solver.gbcd`` (the multinomial loss, one
weight per class, has its own solver: ``solver.losses.multinomial_gbcd``; Tweedie, Gamma and Cox have none: their
steps are proximal Newton steps, ``solver.losses.newton``), and a descriptor (``solver.losses.base.Loss``) registered
here, which everything else reads: the path's checks, metrics, solve strategy and initial state, the forest task, the
rules' link and wording, the estimators, the service. docs/solver-api.md, "Adding a loss", says what a new one provides.
"""

from typing import Literal

from . import cox, gamma, logistic, multinomial, poisson, squared, tweedie
from .base import Loss, Metric

# the loss names as a type (for annotations: the service's schemas read it); equal to the registry's names (a test)
LossName = Literal["squared", "logistic", "multinomial", "poisson", "tweedie", "gamma", "cox"]
LOSSES: dict[str, Loss] = {
    loss.name: loss
    for loss in (squared.LOSS, logistic.LOSS, multinomial.LOSS, poisson.LOSS, tweedie.LOSS, gamma.LOSS, cox.LOSS)
}
DEFAULT_LOSS: LossName = "squared"
_BY_CODE = {loss.code: loss for loss in LOSSES.values()}

__all__ = ["DEFAULT_LOSS", "LOSSES", "Loss", "LossName", "Metric", "get_loss", "loss_of_code"]


def get_loss(name) -> Loss:
    """The registered loss of ``name``; an unknown name is a ValueError listing the names."""
    if name not in LOSSES:
        raise ValueError(f"loss must be one of {sorted(LOSSES)}, got {name!r}")
    return LOSSES[name]


def loss_of_code(code) -> Loss:
    """The registered loss whose kernels' code (``Problem.loss``) is ``code``."""
    return _BY_CODE[code]
