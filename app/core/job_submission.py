"""Submitting jobs: the service's limits, the checks that a dataset, a forest and validation rows fit together, the
request resolved into the spec a worker runs, once per idempotency key, admitted against the tenant's limit of
active jobs. Recording and queueing: app/core/job_lifecycle.py.

Every check of a submission is made, though another failed (``Checks``): one Invalid names every fault at once, but
for the checks that read what a failed one would have given (a missing dataset's columns, an unknown loss's
targets)."""

from collections.abc import Callable, Mapping
from typing import TypeVar

import numpy as np
from pydantic import Field

from app.core.blobs import Document
from app.core.config import Settings
from app.core.datasets import OFFSET_LOSSES, DatasetInfo, DatasetStore
from app.core.errors import FieldFault, Invalid, NotFound, TooLarge, TooMany
from app.core.forests import (
    ForestRecipe,
    ForestStore,
    TrainedForest,
    ValidationSplit,
    check_forest_features,
    check_forest_rows,
)
from app.core.idempotency import IdempotencyKeys
from app.core.job_documents import Grid, GridJobSpec, JobRecord, PathJobSpec, TrainJobSpec
from app.core.job_lifecycle import JobLifecycle, new_job_id
from app.core.records import JobRecords
from app.core.tables import max_offset
from solver.cross_validation import check_fold_rows
from solver.losses import LOSSES, get_loss
from solver.spec import ForestSpec, Loss, PathSpec, SpecError

BUSY_RETRY_AFTER_SECONDS = 5
T = TypeVar("T")


class Checks:
    """The checks of one submission, each made though another failed; ``done`` raises what they found: a check's own
    error where it is the only one (a 404 of a missing dataset), else one Invalid of every fault."""

    def __init__(self) -> None:
        self.errors: list[Invalid | NotFound] = []

    def run(self, check: Callable[..., T], *args, **kwargs) -> T | None:
        """``check(*args, **kwargs)``, or None where it failed (its error kept)."""
        try:
            return check(*args, **kwargs)
        except (Invalid, NotFound) as error:
            self.errors.append(error)
            return None

    def done(self) -> None:
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            raise Invalid(
                " ".join(error.detail for error in self.errors),
                [fault for error in self.errors for fault in error.faults],
            )


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
        checks.run(self._check_forest_limits, params, "")
        dataset = checks.run(self.datasets.get, dataset_id, tenant=tenant)
        if dataset is not None:
            checks.run(self._check_training, dataset, params, "")
            checks.run(self._check_offset, dataset, dataset.loss)
            checks.run(self._check_offset_range, dataset, dataset.loss)
            checks.run(self._check_holdout, dataset, split)
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

    def _check_path_limits(self, request: PathJobRequest, checks: Checks) -> None:
        settings, path = self.settings, request.path
        steps = path.n_steps
        if steps > settings.max_lambdas:
            field = "lambdas" if path.lambdas else "n_lambdas"
            checks.errors.append(
                Invalid(
                    f"A path may have at most {settings.max_lambdas} steps.",
                    [FieldFault(field, f"{steps} steps", f"ask for at most {settings.max_lambdas} (FIRE_MAX_LAMBDAS)")],
                )
            )
        if request.grid is not None:
            cells = len(request.grid.gamma) * len(request.grid.fusion_ratio)
            if cells > settings.max_grid_cells:
                checks.errors.append(
                    Invalid(
                        f"A grid may have at most {settings.max_grid_cells} cells.",
                        [
                            FieldFault(
                                "grid",
                                f"{cells} cells",
                                f"ask for at most {settings.max_grid_cells} "
                                "gamma x fusion_ratio cells (FIRE_MAX_GRID_CELLS)",
                            )
                        ],
                    )
                )
        if request.forest is not None:
            checks.run(self._check_forest_limits, request.forest, "forest.")

    def _check_forest_limits(self, params: ForestSpec, prefix: str) -> None:
        over = [
            (name, value, limit, setting)
            for name, limit, setting in (
                ("n_estimators", self.settings.max_trees, "FIRE_MAX_TREES"),
                ("max_depth", self.settings.max_tree_depth, "FIRE_MAX_TREE_DEPTH"),
            )
            if (value := getattr(params, name)) is not None and value > limit
        ]
        if over:
            raise Invalid(
                " ".join(f"{name} may be at most {limit}." for name, _, limit, _ in over),
                [
                    FieldFault(prefix + name, f"{value} is more than {limit}", f"ask for at most {limit} ({setting})")
                    for name, value, limit, setting in over
                ],
            )

    # ---- resolving a path job and checking that its parts fit ---------------------------------------------------

    def _resolve_path(self, request: PathJobRequest, tenant: str) -> PathJobSpec:
        checks = Checks()
        self._check_path_limits(request, checks)
        dataset = checks.run(self.datasets.get, request.dataset_id, tenant=tenant)
        if dataset is None:
            checks.done()  # nothing more can be checked without the dataset
        assert dataset is not None
        path = request.path
        loss = checks.run(self._path_loss, dataset, request.loss)
        if loss is not None:
            checks.run(self._check_offset, dataset, loss)
            checks.run(self._check_offset_range, dataset, loss)
            checks.run(self._check_targets, dataset, loss)
            path = checks.run(self._path_for_loss, dataset, path, loss) or path
            checks.run(self._check_grid_penalty, request.grid, path, request.path.penalty is None)
        if path.cv_folds is not None:
            checks.run(self._check_folds, dataset, path.cv_folds)
        validation_id = request.validation_dataset_id
        rows = ValidationSplit.for_path(path, validation_id)  # the one derivation of the job's training rows
        if validation_id is not None:
            validation = checks.run(self.datasets.get, validation_id, tenant=tenant, field="validation.dataset_id")
            if validation is not None:
                checks.run(self._check_validation_dataset, dataset, validation)
        else:
            checks.run(self._check_holdout, dataset, rows)
        forest_id = None
        if request.forest_id is not None:
            forest = checks.run(self.forests.get, request.forest_id, tenant=tenant)
            if forest is not None:
                checks.run(self._check_cross_validated_forest, forest, path)
                checks.run(check_forest_features, forest, dataset)
                checks.run(check_forest_rows, forest, dataset.id, validation_id, rows)
                forest_id = forest.id
        elif request.forest is not None:
            checks.run(self._check_training, dataset, request.forest, "forest.")
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

    @staticmethod
    def _path_for_loss(dataset: DatasetInfo, path: PathSpec, loss: Loss) -> PathSpec:
        """``path`` with the loss it fits, and that loss's penalty where none was asked for (the job's settings name
        the penalty it ran with); a setting the dataset's loss does not allow, polish or selection, is an Invalid
        naming each."""
        try:
            resolved = path.replace(loss=loss)
            return resolved.replace(penalty=resolved.penalty_used())
        except SpecError as error:
            raise Invalid(
                f"These path settings do not fit the {loss} loss of this {dataset.task} dataset.",
                [
                    FieldFault(field, detail, f"change {field}, or ask for another loss")
                    for field, detail in error.faults
                ],
            ) from error

    @staticmethod
    def _check_grid_penalty(grid: Grid | None, path: PathSpec, by_default: bool) -> None:
        """A grid of several gamma values needs MCP: gamma is its concavity, so under L1 every cell is one path
        (``by_default``: the penalty is the loss's, none was asked for)."""
        penalty = path.penalty_used()
        if grid is not None and len(set(grid.gamma)) > 1 and penalty != "mcp":
            raise Invalid(
                f"A grid over gamma needs penalty mcp: gamma is MCP's concavity, and under {penalty} every gamma cell "
                "fits the same path.",
                [
                    FieldFault(
                        "grid.gamma",
                        f"{len(set(grid.gamma))} values with penalty {penalty}"
                        + (f" (the {path.loss} loss's default)" if by_default else ""),
                        "set penalty to mcp, or give one gamma value",
                    )
                ],
            )

    @staticmethod
    def _check_cross_validated_forest(forest, path: PathSpec) -> None:
        if path.cv_folds is not None and isinstance(forest.source, TrainedForest):
            raise Invalid(
                "A cross-validated path trains a forest for each fold; this forest was trained on rows of every fold.",
                [
                    FieldFault(
                        "forest_id",
                        f"forest {forest.id} was trained by the service",
                        "give forest (training parameters) instead, or an uploaded forest",
                    )
                ],
            )

    @staticmethod
    def _path_loss(dataset: DatasetInfo, asked: Loss | None) -> Loss:
        """The loss asked for, or the dataset's task's (TASK_LOSSES). Each task allows its own loss and those that
        name it among their ``other_tasks`` (``solver.losses``): a squared loss on a classification dataset's 0/1
        target or on counts, the Poisson loss on a regression target that is never negative."""
        if asked is None:
            return dataset.loss
        allowed = [
            dataset.loss,
            *(
                name
                for name, loss in LOSSES.items()
                if name != dataset.loss and dataset.task in (loss.task, *loss.other_tasks)
            ),
        ]
        if asked not in allowed:
            raise Invalid(
                f"A {asked} loss does not fit a {dataset.task} dataset.",
                [
                    FieldFault(
                        "loss",
                        f"dataset {dataset.id} is a {dataset.task} dataset (target {dataset.target!r})",
                        f"use loss {' or '.join(allowed)} (or leave loss out: {dataset.loss}), or upload the table "
                        f"with the task that loss needs (task={get_loss(asked).task})",
                    )
                ],
            )
        if get_loss(asked).nonnegative_target and dataset.target_summary.min < 0:
            others = [name for name in allowed if not get_loss(name).nonnegative_target]
            raise Invalid(
                f"The {asked} loss needs a target that is never negative.",
                [
                    FieldFault(
                        "loss",
                        f"the target {dataset.target!r} of dataset {dataset.id} goes down to "
                        f"{dataset.target_summary.min:g}",
                        f"use loss {' or '.join(others)} for a target that can be negative",
                    )
                ],
            )
        return asked

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

    @staticmethod
    def _check_offset(dataset: DatasetInfo, loss: Loss) -> None:
        """A dataset with an offset column only for a loss the library fits with one (OFFSET_LOSSES, from
        ``Loss.offset_target``)."""
        if dataset.offset is None or loss in OFFSET_LOSSES:
            return
        fitting = [name for name in OFFSET_LOSSES if dataset.task in (LOSSES[name].task, *LOSSES[name].other_tasks)]
        raise Invalid(
            f"The {loss} loss takes no offset: the dataset's offset column {dataset.offset!r} is added to the scores "
            f"of the losses {', '.join(OFFSET_LOSSES)}.",
            [
                FieldFault(
                    "offset",
                    f"dataset {dataset.id} has the offset column {dataset.offset!r}; the {loss} loss takes none",
                    (f"use loss {' or '.join(fitting)}, or " if fitting else "")
                    + f"upload the table without offset (a {dataset.task} dataset)",
                )
            ],
        )

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

    @staticmethod
    def _check_folds(dataset: DatasetInfo, cv_folds: int) -> None:
        """As many rows as folds, the library's check (``check_fold_rows``), here rather than in every fold job."""
        try:
            check_fold_rows(dataset.n_rows, cv_folds)
        except ValueError as error:
            raise Invalid(
                f"The dataset has {dataset.n_rows} rows, fewer than the {cv_folds} folds asked for.",
                [FieldFault("cv_folds", str(error), f"ask for at most {dataset.n_rows} folds, or upload more rows")],
            ) from error

    @staticmethod
    def _check_validation_dataset(dataset: DatasetInfo, validation: DatasetInfo) -> None:
        if validation.id == dataset.id:
            raise Invalid(
                "The validation dataset is the training dataset.",
                [
                    FieldFault(
                        "validation.dataset_id",
                        "same dataset as dataset_id",
                        "validate on other rows: another dataset, or a held-out fraction",
                    )
                ],
            )

        def names(info: DatasetInfo) -> list[str]:
            return [column["name"] for column in info.columns]

        def shapes(info: DatasetInfo) -> list[tuple]:  # not their missing values: any two samples differ there
            return [(column["name"], column["kind"], column.get("categories", [])) for column in info.columns]

        if shapes(validation) != shapes(dataset):
            raise Invalid(
                "The validation dataset's columns differ from the training dataset's.",
                [
                    FieldFault(
                        "validation.dataset_id",
                        f"columns {names(validation)}, not {names(dataset)}"
                        if names(validation) != names(dataset)
                        else "the same columns, some of another kind or with other text values",
                        "upload the validation rows with the training table's columns, in its order",
                    )
                ],
            )
        if (validation.task, validation.classes) != (dataset.task, dataset.classes):
            raise Invalid(
                "The validation dataset's target differs from the training dataset's.",
                [
                    FieldFault(
                        "validation.dataset_id",
                        f"{validation.task} {validation.classes or ''} against {dataset.task} {dataset.classes or ''}",
                        "upload the validation rows with the same task and target labels",
                    )
                ],
            )

    @staticmethod
    def _check_holdout(dataset: DatasetInfo, split: ValidationSplit) -> None:
        try:
            split.training_rows(dataset.n_rows)
        except SpecError as error:
            raise Invalid(
                "The held-out fraction leaves too few validation or training rows.",
                [FieldFault("validation.fraction", error.detail, "choose a fraction that keeps rows on both sides")],
            ) from error

    @staticmethod
    def _check_training(dataset: DatasetInfo, params: ForestSpec, prefix: str) -> None:
        try:
            params.check_data(dataset.n_features, dataset.has_missing_features)
        except SpecError as error:
            raise Invalid(
                "These forest settings cannot train on this dataset.",
                [
                    FieldFault(prefix + field, detail, f"change {prefix + field} to suit the dataset")
                    for field, detail in error.faults
                ],
            ) from error
