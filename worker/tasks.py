"""The RQ job functions, under the names queued jobs carry (``app.core.queues.TASKS``), each in the module of its
kind. Each takes (job id, attempt) only and loads everything else from storage.

A job reports through its record (status, progress, timings) and stores its result under its own keys
(``worker.fit_results``); the RQ return value stays empty. The fitting itself is the library's (``solver.fitting``):
the path job only loads the dataset, the forest and the cached leaf indices (``worker.fit_data``), and stores what
``fit_rules`` returns. The machinery every job shares (claim, heartbeat, progress, cancel, deadline) is
``worker.runs.JobRun``.
"""

from worker.cross_validation import collect_folds
from worker.grids import collect_grid
from worker.paths import run_path
from worker.stability_fits import run_stability_fit
from worker.training import train_forest

__all__ = ["collect_folds", "collect_grid", "run_path", "run_stability_fit", "train_forest"]
