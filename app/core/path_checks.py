"""The checks that a path job's request fits the service's limits and that its parts fit together: the dataset and
the loss, the penalty and the grid, the folds, the validation rows, the forest. Each raises an Invalid that names
the field and the fix; ``app.core.job_submission`` runs them all (``Checks``) and resolves the request."""

from collections.abc import Callable
from typing import TypeVar

from app.core.config import Settings
from app.core.datasets import OFFSET_LOSSES, DatasetInfo
from app.core.errors import FieldFault, Invalid, NotFound
from app.core.forests import TrainedForest, ValidationSplit
from app.core.job_documents import Grid
from solver.cross_validation import check_fold_rows
from solver.losses import LOSSES, get_loss
from solver.spec import ForestSpec, Loss, PathSpec, SpecError

T = TypeVar("T")  # what a check returns


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


def check_path_limits(
    settings: Settings, path: PathSpec, grid: Grid | None, forest: ForestSpec | None, checks: Checks
) -> None:
    """The service's limits on a path request: its path's steps, its grid's cells, its forest's trees and depth."""
    steps = path.n_steps
    if steps > settings.max_lambdas:
        field = "lambdas" if path.lambdas else "n_lambdas"
        checks.errors.append(
            Invalid(
                f"A path may have at most {settings.max_lambdas} steps.",
                [FieldFault(field, f"{steps} steps", f"ask for at most {settings.max_lambdas} (FIRE_MAX_LAMBDAS)")],
            )
        )
    if grid is not None:
        cells = len(grid.gamma) * len(grid.fusion_ratio)
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
    if forest is not None:
        checks.run(check_forest_limits, settings, forest, "forest.")


def check_forest_limits(settings: Settings, params: ForestSpec, prefix: str) -> None:
    """A forest's trees and depth within FIRE_MAX_TREES and FIRE_MAX_TREE_DEPTH (``prefix``: its fields' path)."""
    over = [
        (name, value, limit, setting)
        for name, limit, setting in (
            ("n_estimators", settings.max_trees, "FIRE_MAX_TREES"),
            ("max_depth", settings.max_tree_depth, "FIRE_MAX_TREE_DEPTH"),
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


def path_for_loss(dataset: DatasetInfo, path: PathSpec, loss: Loss) -> PathSpec:
    """``path`` with the loss it fits, and that loss's penalty where none was asked for (the job's settings name
    the penalty it ran with); a setting the dataset's loss does not allow, polish or selection, is an Invalid
    naming each."""
    try:
        resolved = path.replace(loss=loss)
        return resolved.replace(penalty=resolved.penalty_used())
    except SpecError as error:
        raise Invalid(
            f"These path settings do not fit the {loss} loss of this {dataset.task} dataset.",
            [FieldFault(field, detail, f"change {field}, or ask for another loss") for field, detail in error.faults],
        ) from error


def check_grid_penalty(grid: Grid | None, path: PathSpec, by_default: bool) -> None:
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


def check_cross_validated_forest(forest, path: PathSpec) -> None:
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


def path_loss(dataset: DatasetInfo, asked: Loss | None) -> Loss:
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


def check_offset(dataset: DatasetInfo, loss: Loss) -> None:
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


def check_folds(dataset: DatasetInfo, cv_folds: int) -> None:
    """As many rows as folds, the library's check (``check_fold_rows``), here rather than in every fold job."""
    try:
        check_fold_rows(dataset.n_rows, cv_folds)
    except ValueError as error:
        raise Invalid(
            f"The dataset has {dataset.n_rows} rows, fewer than the {cv_folds} folds asked for.",
            [FieldFault("cv_folds", str(error), f"ask for at most {dataset.n_rows} folds, or upload more rows")],
        ) from error


def check_validation_dataset(dataset: DatasetInfo, validation: DatasetInfo) -> None:
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


def check_holdout(dataset: DatasetInfo, split: ValidationSplit) -> None:
    try:
        split.training_rows(dataset.n_rows)
    except SpecError as error:
        raise Invalid(
            "The held-out fraction leaves too few validation or training rows.",
            [FieldFault("validation.fraction", error.detail, "choose a fraction that keeps rows on both sides")],
        ) from error


def check_training(dataset: DatasetInfo, params: ForestSpec, prefix: str) -> None:
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
