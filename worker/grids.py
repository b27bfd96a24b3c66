"""The grid job: the parent of a grid of paths, which keeps its best cell."""

from app.core.job_documents import SUCCEEDED, GridJobSpec, GridSummary, JobRecord, PathJobSpec
from app.core.result_documents import GridCell, GridJobResult
from solver.path import best_step
from worker.runs import JobRun, ended_cells, path_result


def collect_grid(job_id: str, attempt: int) -> None:
    """Parent of a grid, queued once every cell ended: keeps the cell whose selected step is best by the path's own
    rule (solver.path.best_step)."""
    with JobRun(job_id, attempt, GridJobSpec) as run:
        if not run.claimed:
            return
        cells = ended_cells(run, run.record.cells or [])
        done = [cell for cell in cells if cell.status == SUCCEEDED]
        if not done:
            raise RuntimeError(
                "no grid cell succeeded: "
                + "; ".join(f"{c.id}: {c.status} {c.error.detail if c.error else ''}" for c in cells)
            )
        results = [path_result(run, cell.id) for cell in done]
        best = results[
            best_step([r.steps[r.selected] for r in results], run.spec.path.max_rules, run.spec.path.selection)
        ]
        table = [_grid_cell(c) for c in cells]
        result = GridJobResult(
            **{**dict(best), "kind": "grid", "job_id": job_id, "best_cell_id": best.job_id, "grid": table}
        )
        run.core.results.put(result)
        best_path = best.parameters.path
        run.succeed(
            GridSummary(
                **dict(result.summary()),
                best_cell_id=best.job_id,
                best_gamma=best_path.gamma,
                best_fusion_ratio=best_path.fusion_ratio,
            ),
            cache_hit=all(c.cache_hit for c in done),
        )


def _grid_cell(cell: JobRecord) -> GridCell:
    """A grid's cell (a path job) as its result lists it."""
    if not isinstance(cell.spec, PathJobSpec):
        raise TypeError(f"grid cell {cell.id} holds a {type(cell.spec).__name__}, not a path job's spec")
    path = cell.spec.path
    return GridCell(
        job_id=cell.id, gamma=path.gamma, fusion_ratio=path.fusion_ratio, status=cell.status, summary=cell.summary
    )
