"""The training job: a forest trained from its recipe and stored."""

from app.core.job_documents import TrainJobSpec, TrainSummary
from app.core.result_documents import TrainResult
from worker.fit_data import stored_or_trained_forest
from worker.runs import JobRun


def train_forest(job_id: str, attempt: int) -> None:
    with JobRun(job_id, attempt, TrainJobSpec) as run:
        if not run.claimed:
            return
        spec = run.spec
        stored_or_trained_forest(run, spec.forest_id, spec.recipe)
        forest = run.core.forests.find(spec.forest_id)
        if forest is None:
            raise RuntimeError(f"forest {spec.forest_id} was deleted while the job ran")
        run.core.results.put(TrainResult(job_id=job_id, forest_id=forest.id, forest=forest))
        run.succeed(TrainSummary(forest_id=forest.id, n_trees=forest.n_trees, n_leaves=forest.n_leaves))
