"""The stability-fit job: one half-sample fit of a path's stability measurement."""

from app.core.job_documents import PathJobSpec
from solver.stability import half_sample
from worker.fit_data import PathData
from worker.paths import fit_and_store
from worker.runs import JobRun


def run_stability_fit(job_id: str, attempt: int) -> None:
    """One half-sample fit of a stability measurement (``spec.resample``), a cell of the path that measures it: the
    library's fit of that half alone (solver.stability.half_sample's rows, as solver.fitting.fit_half fits them: the
    path's settings, its row weights, its own forest where the path trains one), stored as a path job stores its fit
    (its steps, and every step's rules: the parent reads the selected step's)."""
    with JobRun(job_id, attempt, PathJobSpec) as run:
        if not run.claimed:
            return
        spec = run.spec
        assert spec.resample is not None
        run.phase("loading")
        with run.timed("load_data"):
            X, y, weight = run.core.datasets.load_fit_arrays(spec.dataset_id, spec.path)
            dataset = run.core.datasets.read(spec.dataset_id)
            # the forest of a half: trained there from the recipe, or the uploaded forest itself
            forest = spec.recipe.params if spec.recipe is not None else run.core.forests.load(spec.forest_id)
        rows = half_sample(len(y), spec.resample, spec.path.random_state)
        half = PathData(  # the half alone: no validation rows of another dataset, no cached leaves of its forest
            X=X[rows],
            y=y[rows],
            dataset=dataset,
            X_val=None,
            y_val=None,
            leaves=None,
            val_leaves=None,
            cache_hit=False,
            sample_weight=None if weight is None else weight[rows],
        )
        fit_and_store(run, half, forest)
