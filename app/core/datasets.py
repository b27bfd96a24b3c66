"""Datasets: an uploaded table, parsed, validated and encoded (app.core.tables), stored under its content hash."""

import hashlib
import logging
import time
from typing import Any, cast

import numpy as np
from pydantic import Field

from app.core.blobs import BlobStore, Document
from app.core.config import Settings
from app.core.errors import FieldFault, NotFound, Unreadable
from app.core.keys import Keys
from app.core.table_parsing import parse_table
from app.core.tables import Task, check_task, validate_table
from app.core.tenants import DEFAULT_TENANT
from solver.encoding import TableEncoding
from solver.losses import LOSSES, get_loss
from solver.spec import Loss, PathSpec

log = logging.getLogger(__name__)


def takes_offset(loss: str) -> bool:
    """Whether the library fits ``loss`` with an offset (``Loss.offset_target``: the log-link losses and squared;
    Cox and the classifiers raise a ValueError)."""
    try:
        get_loss(loss).offset_target(np.zeros(1), None, np.zeros(1))
    except ValueError:
        return False
    return True


# the losses that take an offset column (the service's one reading of the library's ``offset_target``)
OFFSET_LOSSES: tuple[Loss, ...] = tuple(cast(Loss, name) for name in LOSSES if takes_offset(name))

# the path loss a dataset's task calls for (a path job that names no loss gets it): the first registered loss made
# for it (amount: tweedie before gamma; solver.losses registers them in that order)
TASK_LOSSES: dict[str, Loss] = {}
for _name, _loss in LOSSES.items():
    TASK_LOSSES.setdefault(_loss.task, cast(Loss, _name))


class TargetSummary(Document):
    """Of the target as stored: for classification, y is 0/1 (1 = ``classes[1]``), so the mean is the share of
    ``classes[1]``; for multiclass, y is the class code 0..K-1 (``DatasetInfo.class_counts`` counts them)."""

    mean: float
    std: float
    min: float
    max: float


class DatasetSource(Document):
    filename: str | None
    format: str
    bytes: int


class DatasetInfo(Document):
    id: str
    tenant: str = DEFAULT_TENANT
    target: str
    task: Task = Field(
        "regression",
        description=(
            "classification (the target has two distinct values, stored as 0/1: 1 = classes[1]), multiclass (3 to "
            "FIRE_MAX_CLASSES distinct values, stored as class codes 0..K-1 in the order of classes), regression, or "
            "count (numbers >= 0: counts or rates, fitted with the Poisson loss), amount (numbers >= 0, often zero: "
            "claim amounts, costs; fitted with the Tweedie loss, or Gamma where every amount is > 0) or survival "
            "(time to an event: target is the time column, event the event column; y holds signed times, +time "
            "where the event happened, -time where censored; fitted with the Cox loss). amount and survival are "
            "declared, never detected"
        ),
    )
    event: str | None = Field(
        None, description="survival: the event column (1/true where the event happened, 0/false where censored)"
    )
    exposure: str | None = Field(
        None,
        description=(
            "the exposure column (> 0, not a feature) where one was named: paths fit the rate target / exposure "
            "with the exposure as row weights (poisson, tweedie, gamma), and models multiply the rate by it"
        ),
    )
    offset: str | None = Field(
        None,
        description=(
            "the offset column (finite numbers, not a feature) where one was named: added to every row's score, "
            "known and not fitted (the log of an exposure, a prior model's score), with the losses that take one "
            f"({', '.join(OFFSET_LOSSES)}); log-link models answer exp(score + offset), squared score + offset. With "
            "an exposure column too, the offset applies to the rate target / exposure"
        ),
    )
    classes: list[str | bool | int | float] | None = Field(
        None,
        description=(
            "classification and multiclass: the target's labels as given, in sorted order; path jobs fit the "
            "log-odds of classes[1] (two labels) or one score per class (multiclass)"
        ),
    )
    class_counts: list[int] | None = Field(
        None, description="classification and multiclass: the rows of each class, in the order of classes"
    )
    n_rows: int
    n_features: int
    columns: list[dict[str, Any]] = Field(description="the table's encoding (solver.encoding.TableEncoding.to_dict)")
    feature_names: list[str] = Field(description="the encoded columns a forest splits on")
    missing_values: dict[str, int] = Field(
        description=(
            "missing values per column of the table that has any (in a categorical column, rows with no category)"
        )
    )
    target_summary: TargetSummary
    source: DatasetSource
    created_at: float

    @property
    def encoding(self) -> TableEncoding:
        return TableEncoding.from_dict(self.columns)

    @property
    def has_missing_features(self) -> bool:
        """Whether the encoded features hold missing values: numeric columns keep them (NaN); a missing category
        sets no indicator."""
        return any(column["kind"] == "numeric" and self.missing_values.get(column["name"]) for column in self.columns)

    @property
    def loss(self) -> Loss:
        """The path loss of this dataset's task."""
        return TASK_LOSSES[self.task]

    def rule_classes(self, loss: str) -> list | None:
        """The classes of rules fitted with ``loss``: the labels for a classifier's loss, else None (a squared loss
        on a classification dataset's 0/1 target has none)."""
        return self.classes if get_loss(loss).classifier else None


class DatasetStore:
    def __init__(self, settings: Settings, blobs: BlobStore):
        self.settings = settings
        self.blobs = blobs
        self.keys = Keys.from_settings(settings)

    def dataset_id(
        self,
        data: bytes,
        target: str,
        tenant: str,
        task: str | None = None,
        event: str | None = None,
        exposure: str | None = None,
        offset: str | None = None,
    ) -> str:
        """The content hash: the same bytes, target, task and categorical setting give the same id (per tenant)."""
        owner = b"" if tenant == DEFAULT_TENANT else tenant.encode() + b"\0"  # ids kept from before tenants
        declared = b"" if task is None else b"task=" + task.encode() + b"\0"  # ids kept where it is detected
        for name, column in (("event", event), ("exposure", exposure), ("offset", offset)):
            declared += b"" if column is None else f"{name}=".encode() + column.encode() + b"\0"
        return (
            "ds_"
            + hashlib.sha256(
                b"fire-dataset-v1\0"
                + owner
                + declared
                + target.encode()
                + b"\0"
                + self.settings.categorical.encode()
                + b"\0"
                + data
            ).hexdigest()[:32]
        )

    def create(
        self,
        data: bytes,
        *,
        tenant: str,
        target: str,
        content_type: str,
        filename: str | None,
        declared_format: str | None,
        task: str | None = None,
        event: str | None = None,
        exposure: str | None = None,
        offset: str | None = None,
    ) -> tuple[DatasetInfo, bool]:
        """(info, created). Uploading the same bytes with the same target (and task) again is a no-op.
        ``task``: one of TASKS, or None to detect it (:func:`target_task`)."""
        check_task(task)
        dataset_id = self.dataset_id(data, target, tenant, task, event, exposure, offset)
        try:
            existing = self.find(dataset_id)
        except Unreadable as error:  # the same upload replaces what cannot be read
            log.warning("dataset %s is stored again: %s", dataset_id, error)
            existing = None
        if existing is not None:
            return existing, False
        table_format, frame = parse_table(data, content_type, filename, declared_format, self.settings)
        encoding, features, y, found_task, classes, rows = validate_table(  # pops target, event, exposure, offset
            frame, target, self.settings, task, event=event, exposure=exposure, offset=offset
        )
        missing = {str(name): int(count) for name, count in frame.isna().sum().items() if count}
        del frame  # the encoded arrays are all that is kept
        info = DatasetInfo(
            id=dataset_id,
            tenant=tenant,
            target=target,
            task=found_task,
            event=event,
            exposure=exposure,
            offset=offset,
            classes=classes,
            class_counts=None if classes is None else np.bincount(y.astype(np.int64), minlength=len(classes)).tolist(),
            n_rows=features.shape[0],
            n_features=features.shape[1],
            columns=encoding.to_dict(),
            feature_names=encoding.feature_names,
            missing_values=missing,
            target_summary=TargetSummary(mean=y.mean(), std=y.std(), min=y.min(), max=y.max()),
            source=DatasetSource(filename=filename, format=table_format, bytes=len(data)),
            created_at=time.time(),
        )
        self.blobs.put_arrays(self.keys.dataset_arrays(dataset_id), None, X=features, y=y, **rows)
        self.blobs.put_document(self.keys.dataset(dataset_id), info)
        self.blobs.index(self.keys.datasets(tenant), dataset_id, info.created_at)
        return info, True

    def find(self, dataset_id: str) -> DatasetInfo | None:
        return self.blobs.get_document(self.keys.dataset(dataset_id), DatasetInfo)

    def read(self, dataset_id: str) -> DatasetInfo:
        """A stored dataset whoever owns it (for the workers, which run jobs already checked)."""
        info = self.find(dataset_id)
        if info is None:
            raise NotFound("dataset", dataset_id)
        return info

    def get(self, dataset_id: str, *, tenant: str, field: str = "dataset_id") -> DatasetInfo:
        """The tenant's dataset; another tenant's is not found (also where its document cannot be read: the
        tenant's index says whose it is)."""
        try:
            info = self.find(dataset_id)
        except Unreadable as error:
            if not self.blobs.indexed(self.keys.datasets(tenant), dataset_id):
                raise NotFound("dataset", dataset_id, field) from None
            raise Unreadable(
                f"The stored dataset {dataset_id} cannot be read.",
                [FieldFault(field, f"dataset {dataset_id}'s stored document is unreadable", "upload the table again")],
                tenant=tenant,
            ) from error
        if info is None or info.tenant != tenant:
            raise NotFound("dataset", dataset_id, field)
        return info

    def list(self, *, tenant: str, limit: int = 100) -> list[DatasetInfo]:
        return self.blobs.newest_documents(self.keys.datasets(tenant), self.keys.dataset, DatasetInfo, limit)

    def load_arrays(self, dataset_id: str) -> tuple[np.ndarray, np.ndarray]:
        arrays = self.blobs.get_arrays(self.keys.dataset_arrays(dataset_id))
        if arrays is None:
            raise NotFound("dataset", dataset_id)
        return arrays["X"], arrays["y"]

    def load_offsets(self, dataset_id: str) -> np.ndarray | None:
        """The dataset's offset column as uploaded (None: it has none)."""
        arrays = self.blobs.get_arrays(self.keys.dataset_arrays(dataset_id))
        if arrays is None:
            raise NotFound("dataset", dataset_id)
        return arrays.get("offset")

    def load_fit_arrays(
        self, dataset_id: str, path: PathSpec | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(X, y, sample_weight) as a path or a forest fits them: with an exposure column (DatasetInfo.exposure),
        the rate y / exposure weighted by the exposure; else y as stored and no weights. Then, with an offset column
        (DatasetInfo.offset), the target and weights of the fit with the offset in every score, from the library
        (``path.path_loss().offset_target``: the loss as ``path`` configures it, Tweedie's power); a dataset with
        an offset needs ``path`` (job submission allows only the losses in OFFSET_LOSSES)."""
        arrays = self.blobs.get_arrays(self.keys.dataset_arrays(dataset_id))
        if arrays is None:
            raise NotFound("dataset", dataset_id)
        X, y, weight = arrays["X"], arrays["y"], None
        exposure = arrays.get("exposure")
        if exposure is not None:
            y, weight = y / exposure, exposure
        offset = arrays.get("offset")
        if offset is not None:
            if path is None:
                raise ValueError(f"dataset {dataset_id} has an offset column: its fit needs the path's loss")
            y, weight = path.path_loss().offset_target(y, weight, offset)
        return X, y, weight

    def delete(self, info: DatasetInfo) -> None:
        self.blobs.delete(self.keys.dataset_arrays(info.id))
        self.blobs.delete(self.keys.dataset(info.id))
        self.blobs.unindex(self.keys.datasets(info.tenant), info.id)
