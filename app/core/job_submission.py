"""Submitting jobs: a request checked (``app.core.path_checks``: the service's limits, a dataset, a forest and
validation rows that fit together) and resolved into the spec a worker runs, once per idempotency key, admitted against
the tenant's limit of active jobs. Recording and queueing: app/core/job_lifecycle.py.

Every check of a submission is made, though another failed (``Checks``): one Invalid names every fault at once, but
for the checks that read what a failed one would have given (a missing dataset's columns, an unknown loss's
targets)."""

from collections.abc import Mapping

import numpy as np
from pydantic import Field

from app.core.blobs import Document
from app.core.config import Settings
from app.core.datasets import OFFSET_LOSSES, DatasetInfo, DatasetStore
from app.core.errors import FieldFault, Invalid, TooLarge, TooMany
from app.core.forests import (
    ForestRecipe,
    ForestStore,
    ValidationSplit,
    check_forest_features,
    check_forest_rows,
)
from app.core.idempotency import IdempotencyKeys
from app.core.job_documents import Grid, GridJobSpec, JobRecord, PathJobSpec, TrainJobSpec
from app.core.job_lifecycle import JobLifecycle, new_job_id
from app.core.path_checks import (
    Checks,
    check_cross_validated_forest,
    check_folds,
    check_forest_limits,
    check_grid_penalty,
    check_holdout,
    check_offset,
    check_path_limits,
    check_training,
    check_validation_dataset,
    path_for_loss,
    path_loss,
)
from app.core.records import JobRecords
from app.core.tables import max_offset
from solver.losses import LOSSES, get_loss
from solver.spec import ForestSpec, Loss, PathSpec

BUSY_RETRY_AFTER_SECONDS = 5


class PathJobRequest(Document):
    """A path job as asked for, before it is resolved (``JobSubmission.submit_path``) into the ``PathJobSpec`` a
    worker runs: the forest by id or by training parameters (resolved: by id, with the recipe to train it where
    it is not stored yet), validation rows from another dataset or held out of this one (``path.validation_fraction``,
    ``path.random_state``), the loss as asked for (resolved: ``path.loss``). The API's body of the same name is its
    HTTP form (app/api/schemas.py)."""

    dataset_id: str
    forest_id: str | None = None
    forest: ForestSpec | None = None
    validation_dataset_id: str | None = None
    path: PathSpec = Field(description="path.loss is replaced by ``loss`` or the dataset's task's loss")
    loss: Loss | None = Field(
        None,
        description=(
            "the path's loss as asked for; None: the dataset's task's (logistic for classification, multinomial for "
            "multiclass, poisson for count, squared for regression, tweedie for amount, cox for survival)"
        ),
    )
    grid: Grid | None = Field(None, description="one path per gamma x fusion_ratio cell; the best cell is kept")
    stability_resamples: int | None = Field(None, description="half-sample fits of the stability measurement")


def _ids(records) -> list[str] | None:
    """The ids of jobs (None for none)."""
    return [record.id for record in records] or None


def _waits(fits) -> dict[str, int]:
    """What a path waits for: its stability fits (jobs or their ids), where it has any."""
    return {"stability_fit": len(fits)} if fits else {}


def work_units(spec: TrainJobSpec | PathJobSpec, grid: Grid | None = None, *, trains: bool = False) -> int:
    """A submission's work units, each a piece of it a worker runs: a forest to train (``trains``: a grid or a
    cross-validation trains one first), each path fitted (a grid's cells; a cross-validation's folds and its refit
    on every row) and each stability fit of each path that measures it. (A batch's are its chunks.)"""
    if isinstance(spec, TrainJobSpec):
        return 1
    path = 1 + (spec.stability_resamples or 0)
    if grid is not None:
        paths = len(grid.gamma) * len(grid.fusion_ratio) * path
    elif spec.path.cv_folds is not None:
        paths = spec.path.cv_folds + path
    else:
        paths = path
    return paths + int(trains)


class JobSubmission:
    def __init__(
        self,
        settings: Settings,
        datasets: DatasetStore,
        forests: ForestStore,
        records: JobRecords,
        lifecycle: JobLifecycle,
        idempotency: IdempotencyKeys,
    ):
        self.settings = settings
        self.datasets = datasets
        self.forests = forests
        self.records = records
        self.lifecycle = lifecycle
        self.idempotency = idempotency

    def submit_training(
        self, dataset_id: str, params: ForestSpec, split: ValidationSplit, idempotency_key: str | None, *, tenant: str
    ) -> JobRecord:
        """Train ``params`` on the training side of the dataset's ``split`` (the split later paths use)."""
        checks = Checks()
        checks.run(check_forest_limits, self.settings, params, "")
        dataset = checks.run(self.datasets.get, dataset_id, tenant=tenant)
        if dataset is not None:
            checks.run(check_training, dataset, params, "")
            checks.run(check_offset, dataset, dataset.loss)
            checks.run(self._check_offset_range, dataset, dataset.loss)
            checks.run(check_holdout, dataset, split)
        checks.done()
        assert dataset is not None
        recipe = ForestRecipe(
            dataset_id=dataset.id,
            params=params,
            rows=split,
            loss=dataset.loss,
            power=None if dataset.offset is None else PathSpec().power,
        )
        spec = TrainJobSpec(forest_id=recipe.forest_id, recipe=recipe)
        return self._submit_once(
            tenant,
            idempotency_key,
            spec.model_dump(mode="json"),
            lambda job_id: self._admitted("train", spec, tenant, job_id),
        )

    def submit_path(self, request: PathJobRequest, idempotency_key: str | None, *, tenant: str) -> JobRecord:
        spec = self._resolve_path(request, tenant)
        return self._submit_once(
            tenant,
            idempotency_key,
            request.model_dump(mode="json"),
            lambda job_id: self._submit_resolved(spec, request.grid, tenant, job_id),
        )

    def _submit_once(self, tenant: str, key: str | None, request: dict, submit) -> JobRecord:
        return self.idempotency.once(
            tenant=tenant,
            kind="job",
            key=key,
            request=request,
            new_id=new_job_id(),
            create=submit,
            find=lambda job_id: self.lifecycle.find(job_id, tenant),
        )

    def _submit_resolved(self, spec: PathJobSpec, grid: Grid | None, tenant: str, job_id: str) -> JobRecord:
        """Record and queue the jobs of a path submission: a path job; or a cross-validation (a parent that refits on
        every row, its folds as cells) or a grid (a parent that keeps the best cell, a path job per cell), whose
        cells wait for the training of their forest where it is not stored yet. A path that measures stability (a
        path job, a grid's cell, a cross-validation) waits for its half-sample fits, a job each (kind
        stability_fit) on the worker pool: a cross-validation's run beside its folds."""
        if grid is None and spec.path.cv_folds is None:
            self._admit(tenant, job_id, work_units(spec))
            path_fits = self._stability_fits(spec, tenant, job_id)
            path = self.lifecycle.new("path", spec, tenant, job_id=job_id, stability_fits=_ids(path_fits))
            self.lifecycle.create_all([*((fit, {}) for fit in path_fits), (path, _waits(path_fits))])
            return path
        trains = spec.recipe is not None and self.forests.find(spec.forest_id) is None
        self._admit(tenant, job_id, work_units(spec, grid, trains=trains))
        new = self.lifecycle.new
        fits: list[JobRecord] = []  # every stability fit, of the parent or of its cells
        cells: list[tuple[JobRecord, dict[str, int]]] = []
        if grid is None:  # one cell per fold; the parent refits on every row and measures stability
            for k in range(spec.path.cv_folds or 0):
                fold = spec.model_copy(update={"fold": k, "stability_resamples": None})
                cells.append((new("path", fold, tenant, parent_id=job_id), {}))
            parent_fits = self._stability_fits(spec, tenant, job_id)
            fits += parent_fits
            parent = new(
                "cv", spec, tenant, job_id=job_id, cells=_ids(c for c, _ in cells), stability_fits=_ids(parent_fits)
            )
        else:
            for gamma in grid.gamma:
                for ratio in grid.fusion_ratio:
                    cell_spec = spec.model_copy(
                        update={"path": spec.path.replace(gamma=gamma, fusion_ratio=ratio, lambda_f=None)}
                    )
                    cell_id = new_job_id()
                    cell_fits = self._stability_fits(cell_spec, tenant, cell_id)
                    fits += cell_fits
                    cell = new(
                        "path", cell_spec, tenant, job_id=cell_id, parent_id=job_id, stability_fits=_ids(cell_fits)
                    )
                    cells.append((cell, _waits(cell_fits)))
            parent = new(
                "grid", GridJobSpec(**dict(spec), grid=grid), tenant, job_id=job_id, cells=_ids(c for c, _ in cells)
            )
        jobs: list[tuple[JobRecord, Mapping[str, int]]] = []
        if trains:  # the cells wait for their forest (the stability fits train a forest of their own)
            train = TrainJobSpec(forest_id=spec.forest_id, recipe=spec.recipe)
            jobs.append((new("train", train, tenant, dependents=_ids(c for c, _ in cells)), {}))
            cells = [(cell, {**waits, "train": 1}) for cell, waits in cells]
        jobs += [
            *((fit, {}) for fit in fits),
            *cells,
            (parent, {"path": len(cells), **_waits(parent.stability_fits or [])}),
        ]
        self.lifecycle.create_all(jobs)
        return parent

    def _stability_fits(self, spec: PathJobSpec, tenant: str, parent_id: str) -> list[JobRecord]:
        """The half-sample fits of a path that measures stability (``stability_resamples``; none otherwise), each a
        job of its own whose parent is that path's job."""
        return [
            self.lifecycle.new(
                "stability_fit",
                spec.model_copy(update={"resample": k, "stability_resamples": None}),
                tenant,
                parent_id=parent_id,
            )
            for k in range(spec.stability_resamples or 0)
        ]

    def _admitted(self, kind, spec, tenant: str, job_id: str) -> JobRecord:
        """A submission of its own: counted against the tenant's limits, then recorded and queued."""
        self._admit(tenant, job_id, work_units(spec))
        return self.lifecycle.create(kind, spec, tenant, job_id=job_id)

    def _admit(self, tenant: str, job_id: str, units: int = 1) -> None:
        """Count a submission of ``units`` work units (``work_units``) against the tenant's limits: at most
        FIRE_MAX_ACTIVE_JOBS submissions and FIRE_MAX_ACTIVE_UNITS units queued or running at once (a 429 to retry
        later past either; a submission larger than the units' limit on its own is refused, 413)."""
        max_jobs, max_units = self.settings.max_active_jobs, self.settings.max_active_units
        if units > max_units:
            raise self._too_large(units)
        admission = self.records.admit(tenant, job_id, units, max_jobs=max_jobs, max_units=max_units)
        if admission.admitted:
            return
        if admission.jobs >= max_jobs:
            fix = "wait for one to finish (or cancel one), or raise FIRE_MAX_ACTIVE_JOBS"
            raise TooMany(
                f"You have {max_jobs} jobs queued or running, the most allowed at once.",
                [FieldFault("tenant", f"{max_jobs} active jobs", fix)],
                retry_after=BUSY_RETRY_AFTER_SECONDS,
            )
        raise self._too_many_units(admission.units, units)

    def _admit_more(self, tenant: str, job_id: str, units: int) -> None:
        """Count ``units`` more work units of an admitted submission (a batch's chunks, as its file is read) against
        FIRE_MAX_ACTIVE_UNITS, as ``_admit`` does."""
        max_units = self.settings.max_active_units
        added, held, own = self.records.admit_more(tenant, job_id, units, max_units=max_units)
        if added:
            return
        if own + units > max_units:
            raise self._too_large(own + units)
        raise self._too_many_units(held, units)

    def _too_large(self, units: int) -> TooLarge:
        return TooLarge(
            f"This submission is {units} work units; a tenant may have at most "
            f"{self.settings.max_active_units} queued or running.",
            [
                FieldFault(
                    "tenant",
                    f"{units} work units (chunks, folds, grid cells, stability fits)",
                    "split the work over smaller submissions (larger chunks, fewer folds or resamples), or raise "
                    "FIRE_MAX_ACTIVE_UNITS",
                )
            ],
        )

    def _too_many_units(self, held: int, units: int) -> TooMany:
        max_units = self.settings.max_active_units
        return TooMany(
            f"You have {held} work units queued or running; {units} more would pass the {max_units} allowed at once.",
            [
                FieldFault(
                    "tenant",
                    f"{held} active work units, {units} more asked",
                    "wait for some to finish (or cancel a job), or raise FIRE_MAX_ACTIVE_UNITS",
                )
            ],
            retry_after=BUSY_RETRY_AFTER_SECONDS,
        )

    # ---- the service's limits -----------------------------------------------------------------------------------

    def _resolve_path(self, request: PathJobRequest, tenant: str) -> PathJobSpec:
        checks = Checks()
        check_path_limits(self.settings, request.path, request.grid, request.forest, checks)
        dataset = checks.run(self.datasets.get, request.dataset_id, tenant=tenant)
        if dataset is None:
            checks.done()  # nothing more can be checked without the dataset
        assert dataset is not None
        path = request.path
        loss = checks.run(path_loss, dataset, request.loss)
        if loss is not None:
            checks.run(check_offset, dataset, loss)
            checks.run(self._check_offset_range, dataset, loss)
            checks.run(self._check_targets, dataset, loss)
            path = checks.run(path_for_loss, dataset, path, loss) or path
            checks.run(check_grid_penalty, request.grid, path, request.path.penalty is None)
        if path.cv_folds is not None:
            checks.run(check_folds, dataset, path.cv_folds)
        validation_id = request.validation_dataset_id
        rows = ValidationSplit.for_path(path, validation_id)  # the one derivation of the job's training rows
        if validation_id is not None:
            validation = checks.run(self.datasets.get, validation_id, tenant=tenant, field="validation.dataset_id")
            if validation is not None:
                checks.run(check_validation_dataset, dataset, validation)
        else:
            checks.run(check_holdout, dataset, rows)
        forest_id = None
        if request.forest_id is not None:
            forest = checks.run(self.forests.get, request.forest_id, tenant=tenant)
            if forest is not None:
                checks.run(check_cross_validated_forest, forest, path)
                checks.run(check_forest_features, forest, dataset)
                checks.run(check_forest_rows, forest, dataset.id, validation_id, rows)
                forest_id = forest.id
        elif request.forest is not None:
            checks.run(check_training, dataset, request.forest, "forest.")
        else:
            checks.errors.append(
                Invalid(
                    "A path job needs a forest.",
                    [
                        FieldFault(
                            "forest_id",
                            "missing",
                            "give forest_id (an existing forest) or forest (training parameters)",
                        )
                    ],
                )
            )
        checks.done()
        recipe = None
        if request.forest is not None:
            recipe = ForestRecipe(
                dataset_id=dataset.id,
                params=request.forest,
                rows=rows,
                loss=path.loss,
                power=None if dataset.offset is None else path.power,
            )
            forest_id = recipe.forest_id
        assert forest_id is not None
        return PathJobSpec(
            dataset_id=dataset.id,
            forest_id=forest_id,
            recipe=recipe,
            validation_dataset_id=validation_id,
            path=path,
            rows=rows,
            stability_resamples=request.stability_resamples,
        )

    def _check_targets(self, dataset: DatasetInfo, loss: Loss) -> None:
        """The library's check of the loss's targets (``Loss.check_targets``: Gamma's y > 0, Cox's events) on the
        rows a path fits, where the target summary cannot rule a fault out; an exposure column only for a rate's
        loss (y >= 0: poisson, tweedie, gamma)."""
        descriptor = get_loss(loss)
        if dataset.exposure is not None and not descriptor.nonnegative_target:
            raise Invalid(
                f"The {loss} loss fits no rate: the exposure column {dataset.exposure!r} is for rates.",
                [
                    FieldFault(
                        "loss",
                        f"dataset {dataset.id} has the exposure column {dataset.exposure!r}",
                        "use loss poisson, tweedie or gamma, or upload the table without exposure",
                    )
                ],
            )
        if dataset.target_summary.min > 0:
            return
        _, y = self.datasets.load_arrays(dataset.id)
        try:
            descriptor.check_targets(y, repr(dataset.target))
        except ValueError as error:
            allowed = [name for name in LOSSES if name != loss and dataset.task in (get_loss(name).task,)]
            raise Invalid(
                f"The {loss} loss cannot fit the target {dataset.target!r}: {error}",
                [
                    FieldFault(
                        "loss",
                        str(error),
                        f"use loss {' or '.join(allowed)}" if allowed else "fix the target's rows named",
                    )
                ],
            ) from error

    def _check_offset_range(self, dataset: DatasetInfo, loss: Loss) -> None:
        """A log-link loss fits exp(offset) as a factor of the rate: its offsets within ±MAX_LOG_FACTOR
        (``app.core.tables.max_offset``; an upload holds them within ±MAX_ABS_VALUE, for squared)."""
        link = get_loss(loss).link
        if dataset.offset is None or loss not in OFFSET_LOSSES or link != "log":
            return
        offsets = self.datasets.load_offsets(dataset.id)
        if offsets is None:
            return
        limit = max_offset(link)
        beyond = np.flatnonzero(~(np.abs(offsets) <= limit))
        if len(beyond):
            row = int(beyond[0])
            raise Invalid(
                f"The {loss} loss fits exp(offset) as a factor of the rate: its offsets are within ±{limit:.4g}.",
                [
                    FieldFault(
                        "offset",
                        f"the offset column {dataset.offset!r} of dataset {dataset.id} has {offsets[row]:g} on row "
                        f"{row} ({len(beyond)} rows beyond ±{limit:.4g})",
                        "upload the table with offsets on the log scale (the log of an exposure, a log-link model's "
                        "score), or use loss squared",
                    )
                ],
            )
