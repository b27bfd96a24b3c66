"""RQ job functions of batch scoring (app/core/batch/): one chunk's rows scored, and the parent that
collects the chunks. Both run under the path jobs' machinery (``worker.runs.JobRun``: claim, heartbeat, cancel,
deadline, failure) and take (job id, attempt) only."""

from typing import Any

from app.core.batch.chunks import BatchRowsInvalid, score_chunk
from app.core.job_documents import SUCCEEDED, BatchChunkSpec, BatchJobSpec, BatchSummary, JobRecord
from worker.runs import JobCanceled, JobRun, ended_cells


class BatchFailed(Exception):
    """A chunk of the batch failed or was canceled: the batch has no result (its message: the chunk's error)."""


def score_batch_chunk(job_id: str, attempt: int) -> None:
    """Score one chunk of a batch and store its scored rows; a row that cannot be scored fails the chunk, naming the
    column and the file's row, and tells the later chunks to stop (the earlier ones still run)."""
    with JobRun[Any](job_id, attempt, BatchChunkSpec) as run:
        if not run.claimed:
            return
        spec: BatchChunkSpec = run.spec
        parts = run.core.batches.parts
        if parts.failed_before(spec.batch_id, spec.chunk):
            raise JobCanceled()  # an earlier chunk holds a bad row: this one's result would never be used
        run.phase("loading", step=0, n_steps=1)
        with run.timed("load_data"):
            scoring = run.core.models.scoring_model(spec.model_id, run.record.tenant)
            chunk = parts.get_input(spec.batch_id, spec.chunk)
        if chunk is None:
            raise RuntimeError(f"the rows of chunk {spec.chunk} of batch {spec.batch_id} expired or were deleted")
        run.phase("scoring", step=0, n_steps=1)
        with run.timed("score"):
            try:
                scored = score_chunk(
                    scoring,
                    chunk,
                    first_row=spec.first_row,
                    explain=spec.explain,
                    times=spec.times,
                    id_column=spec.id_column,
                )
            except BatchRowsInvalid:
                parts.mark_failed(spec.batch_id, spec.chunk)
                raise
        run.check_cancel()
        with run.timed("store"):
            # the rows' drift counts beside them: the batch adds its chunks' once it succeeded (collect_batch)
            parts.put_output(spec.batch_id, spec.chunk, scored.table, run.core.monitor.counts(scoring, scored.X))
        run.succeed(
            BatchSummary(
                n_rows=scored.table.num_rows,
                n_chunks=1,
                columns=scored.table.column_names,
                output_format="parquet",
            )
        )


def collect_batch(job_id: str, attempt: int) -> None:
    """Parent of a batch, queued once every chunk ended: succeed (the chunks' scored rows are the result, their
    rows counted in the model's drift) or fail with the first failed chunk's error, deleting every scored part and
    count (a failed batch has no result and counts nothing)."""
    with JobRun[Any](job_id, attempt, BatchJobSpec) as run:
        if not run.claimed:
            return
        cells = ended_cells(run, run.record.cells or [])
        spec: BatchJobSpec = run.spec
        parts = run.core.batches.parts
        parts.delete_inputs(job_id, spec.n_chunks)
        if any(cell.status != SUCCEEDED for cell in cells):
            parts.delete(job_id, spec.n_chunks)
            raise BatchFailed(_failure(cells))
        first = next(cell for cell in cells if isinstance(cell.spec, BatchChunkSpec) and cell.spec.chunk == 0)
        columns = first.summary.columns if isinstance(first.summary, BatchSummary) else []
        run.check_cancel()
        with run.timed("count"):  # once: a run of this batch again (its worker died) adds nothing more
            keys = run.core.batches.keys
            counts = parts.counts(job_id, spec.n_chunks)
            run.core.monitor.add_delivered(spec.model_id, counts, once=keys.batch_counted(job_id))
            parts.delete_counts(job_id, spec.n_chunks)
        run.succeed(
            BatchSummary(n_rows=spec.n_rows, n_chunks=spec.n_chunks, columns=columns, output_format=spec.output_format)
        )


def _failure(cells: list[JobRecord]) -> str:
    """The error of the first chunk (by rows) that failed, else of the first that did not succeed."""

    def chunk(cell: JobRecord) -> int:
        return cell.spec.chunk if isinstance(cell.spec, BatchChunkSpec) else 0

    failed = sorted((cell for cell in cells if cell.error is not None), key=chunk)
    if failed:
        cell = failed[0]
        assert cell.error is not None
        return f"chunk {chunk(cell)} ({cell.id}) {cell.status}: {cell.error.detail}"
    cell = min((cell for cell in cells if cell.status != SUCCEEDED), key=chunk)
    return f"chunk {chunk(cell)} ({cell.id}) {cell.status}"
