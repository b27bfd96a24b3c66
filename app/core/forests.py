"""Forests: uploaded in a safe format or trained by a worker; stored as the fire JSON schema, with the rows
a trained forest learned from."""

import time
from collections.abc import Sequence
from typing import Annotated, Literal

import numpy as np
from pydantic import ConfigDict, Field

from app.core.blobs import BlobStore, Document, canonical_hash, jsonable
from app.core.config import Settings
from app.core.datasets import DatasetInfo
from app.core.errors import FieldFault, Invalid, NotFound, TooLarge, Unreadable, Unsupported
from app.core.keys import Keys
from app.core.table_parsing import inflated_too_large
from app.core.tenants import DEFAULT_TENANT
from solver import TreeEnsemble
from solver.fitting import holdout_split
from solver.formats import ForestFormatError, load_forest
from solver.spec import DEFAULT_LOSS, ForestSpec, Loss, PathSpec

_EXPORT_FIX = "export the forest with TreeEnsemble.to_dict(), XGBoost save_model(.json), LightGBM dump_model() or skops"


# The validation split: one concept, one name in the code, ``validation_fraction`` and ``random_state`` as in the
# library's PathSpec. Two other spellings stay for compatibility, each mapped in one place: an API body's
# ``validation.fraction`` and ``validation.seed`` (VALIDATION_FIELDS in app/api/schemas.py), and ``seed`` as stored
# and served here (the alias below: the ids of stored forests hash their recipe's JSON with that name).
class ValidationSplit(Document):
    """A validation split of a dataset's rows (``solver.fitting.holdout_split``): a forest learns from its training
    side; a fraction 0 keeps every row on the training side."""

    model_config = ConfigDict(extra="forbid", validate_by_name=True, validate_by_alias=True, serialize_by_alias=True)

    validation_fraction: float
    random_state: int = Field(alias="seed")

    @classmethod
    def holdout(cls, validation_fraction: float, random_state: int) -> "ValidationSplit":
        return cls(validation_fraction=validation_fraction, random_state=random_state if validation_fraction else 0)

    @classmethod
    def for_path(cls, path: PathSpec, validation_dataset_id: str | None) -> "ValidationSplit":
        """A path's split: every row on the training side where validation rows come from another dataset, or
        from folds of this one (``path.cv_folds``: each fold's forest is trained inside the job)."""
        if validation_dataset_id is not None or path.cv_folds is not None:
            return cls.holdout(0, 0)
        return cls.holdout(path.validation_fraction, path.random_state)

    def training_rows(self, n_rows: int) -> np.ndarray:
        """The training side: the rows a forest on this split learns from."""
        return holdout_split(n_rows, self.validation_fraction, self.random_state)[0]


class ForestRecipe(Document):
    """How the service trains a forest. Training is deterministic for a fixed random_state, so the recipe
    identifies the forest."""

    dataset_id: str
    params: ForestSpec
    rows: ValidationSplit  # the forest learns from the training side
    loss: Loss = Field(
        DEFAULT_LOSS,
        description=(
            "the path loss the forest is for: regression trees for 'squared' and 'poisson', classifiers for "
            "'logistic' and 'multinomial' (solver.fitting.train_forest)"
        ),
    )
    power: float | None = Field(
        None,
        description=(
            "a dataset with an offset column: the Tweedie power of the path the forest is for (its rows' offset "
            "weights read it: DatasetStore.load_fit_arrays); None otherwise"
        ),
    )

    def fit_path(self) -> PathSpec:
        """The path settings the forest's target and row weights are derived with (its loss, and power)."""
        return PathSpec(loss=self.loss) if self.power is None else PathSpec(loss=self.loss, power=self.power)

    @property
    def forest_id(self) -> str:
        recipe = self.model_dump(mode="json", include=set(ForestRecipe.model_fields))
        if recipe["power"] is None:
            del recipe["power"]  # ids kept from before offsets
        if recipe["loss"] == DEFAULT_LOSS:
            del recipe["loss"]  # ids kept from before classification
        if recipe["params"].get("threshold_bins") is None:
            del recipe["params"]["threshold_bins"]  # ids kept from before quantile-binned forests
        return "fo_" + canonical_hash(recipe)


class UploadedForest(Document):
    type: Literal["upload"] = "upload"
    filename: str | None
    format: str | None


class TrainedForest(ForestRecipe):
    type: Literal["training"] = "training"


class ForestInfo(Document):
    id: str
    tenant: str = DEFAULT_TENANT
    kind: str
    n_trees: int
    n_leaves: int
    n_features: int
    n_outputs: int = Field(1, description="outputs of the forest: K for a K-class classifier's trees, else 1")
    feature_names: list[str]
    source: Annotated[UploadedForest | TrainedForest, Field(discriminator="type")]
    created_at: float


class FireTree(Document):
    """One tree of a fire-forest document (docs/forest-schema.md): node arrays indexed by node id. In a forest of
    K outputs, a vector tree's value is K numbers per node; a per-output tree's ``output`` is the one it adds to."""

    output: int | None = Field(None, description="a per-output tree's output (K-output forests only)")
    children_left: list[int]
    children_right: list[int]
    feature: list[int]
    threshold: list[float]
    value: list[float] | list[list[float]]
    missing_go_left: list[bool]
    n_samples: list[int] | None = None


class FireForest(Document):
    """A fire-forest document (``TreeEnsemble.to_dict()``); loadable with ``TreeEnsemble.from_dict``."""

    format: Literal["fire-forest"]
    version: Literal[1]
    kind: str
    n_outputs: int | None = Field(None, description="K > 1 outputs (a K-class forest); absent for one")
    n_features: int
    feature_names: list[str]
    base_score: float | list[float]
    tree_weight: float
    trees: list[FireTree]


class ForestTrees(Document):
    """Some trees of a stored forest, as a fire-forest document holding those trees only."""

    forest_id: str
    n_trees: int = Field(description="trees in the whole forest")
    tree_indices: list[int] = Field(description="position in the whole forest of each tree of `forest.trees`")
    forest: FireForest


def describe_forest(
    ensemble: TreeEnsemble, forest_id: str, source: UploadedForest | TrainedForest, tenant: str
) -> ForestInfo:
    return ForestInfo(
        id=forest_id,
        tenant=tenant,
        kind=ensemble.kind,
        n_trees=ensemble.n_trees,
        n_leaves=ensemble.n_leaves,
        n_features=ensemble.n_features,
        n_outputs=ensemble.n_outputs,
        feature_names=list(ensemble.feature_names),
        source=source,
        created_at=time.time(),
    )


def _format_error(error: ForestFormatError, max_inflated_bytes: int) -> Invalid | Unsupported | TooLarge:
    field = f"file{error.field}" if error.field.startswith("/") else error.field
    if error.reason == "too_large":  # the upload is at most FIRE_MAX_UPLOAD_BYTES: what it inflated to is too large
        return inflated_too_large(max_inflated_bytes)
    faults = [FieldFault(field, error.detail, _EXPORT_FIX)]
    return Unsupported(error.detail, faults) if error.reason == "unsupported" else Invalid(error.detail, faults)


class ForestStore:
    def __init__(self, settings: Settings, blobs: BlobStore):
        self.settings = settings
        self.blobs = blobs
        self.keys = Keys.from_settings(settings)

    def upload(
        self,
        data: bytes,
        *,
        tenant: str,
        filename: str | None,
        declared_format: str | None,
        dataset: DatasetInfo | None = None,
    ) -> tuple[ForestInfo, bool]:
        """(info, created); with a dataset, a forest whose features differ is refused before it is stored."""
        settings = self.settings
        try:
            ensemble = load_forest(
                data,
                filename=filename,
                declared_format=declared_format,
                max_nodes=settings.max_forest_nodes,
                max_depth=settings.max_tree_depth,
                max_bytes=settings.max_inflated_bytes,
            )
        except ForestFormatError as error:
            raise _format_error(error, settings.max_inflated_bytes) from error
        for count, limit, what, setting in (
            (ensemble.n_trees, settings.max_trees, "trees", "FIRE_MAX_TREES"),
            (ensemble.n_leaves, settings.max_leaves, "leaves", "FIRE_MAX_LEAVES"),
        ):
            if count > limit:
                raise Invalid(
                    f"The forest has {count} {what}, more than the limit of {limit}.",
                    [FieldFault("file", f"{count} {what}", f"send at most {limit} {what} or raise {setting}")],
                )
        document = jsonable(ensemble.to_dict())
        # the same trees in any format get the same id (per tenant; the default tenant's ids are kept from before)
        forest_id = "fo_" + canonical_hash(document if tenant == DEFAULT_TENANT else [tenant, document])
        existing = self.find(forest_id)
        info = existing or describe_forest(
            ensemble, forest_id, UploadedForest(filename=filename, format=declared_format), tenant
        )
        if dataset is not None:
            check_forest_features(info, dataset, "dataset_id")
        if existing is None:
            self._store(document, info)
        return info, existing is None

    def save(self, ensemble: TreeEnsemble, recipe: ForestRecipe, tenant: str) -> ForestInfo:
        info = describe_forest(ensemble, recipe.forest_id, TrainedForest(**dict(recipe)), tenant)
        self._store(jsonable(ensemble.to_dict()), info)
        return info

    def _store(self, document: dict, info: ForestInfo) -> None:
        self.blobs.put_json(self.keys.forest_trees(info.id), document)
        self.blobs.put_document(self.keys.forest(info.id), info)
        self.blobs.index(self.keys.forests(info.tenant), info.id, info.created_at)

    def find(self, forest_id: str) -> ForestInfo | None:
        return self.blobs.get_document(self.keys.forest(forest_id), ForestInfo)

    def get(self, forest_id: str, *, tenant: str, field: str = "forest_id") -> ForestInfo:
        """The tenant's forest; another tenant's is not found (also where its document cannot be read: the tenant's
        index says whose it is)."""
        try:
            info = self.find(forest_id)
        except Unreadable:
            if not self.blobs.indexed(self.keys.forests(tenant), forest_id):
                raise NotFound("forest", forest_id, field) from None
            raise
        if info is None or info.tenant != tenant:
            raise NotFound("forest", forest_id, field)
        return info

    def list(self, *, tenant: str, limit: int = 100) -> list[ForestInfo]:
        return self.blobs.newest_documents(self.keys.forests(tenant), self.keys.forest, ForestInfo, limit)

    def load(self, forest_id: str) -> TreeEnsemble:
        trees = self.blobs.get_json(self.keys.forest_trees(forest_id))
        if trees is None:
            raise NotFound("forest", forest_id)
        return TreeEnsemble.from_dict(trees)

    def delete(self, info: ForestInfo) -> None:
        self.blobs.delete(self.keys.forest_trees(info.id))
        self.blobs.delete(self.keys.forest(info.id))
        self.blobs.unindex(self.keys.forests(info.tenant), info.id)

    def trees(self, forest_id: str, indices: Sequence[int], *, tenant: str) -> ForestTrees:
        """The trees at ``indices`` (in that order, repeats dropped) of one of the tenant's forests."""
        self.get(forest_id, tenant=tenant)
        document = self.blobs.get_json(self.keys.forest_trees(forest_id))
        if document is None:
            raise NotFound("forest", forest_id)
        n_trees = len(document["trees"])
        indices = list(dict.fromkeys(indices))
        outside = [index for index in indices if not 0 <= index < n_trees]
        if outside:
            raise Invalid(
                f"The forest has {n_trees} trees, numbered from 0.",
                [FieldFault("tree", f"no tree {outside[:10]}", f"ask for trees 0 to {n_trees - 1}")],
            )
        return ForestTrees(
            forest_id=forest_id,
            n_trees=n_trees,
            tree_indices=indices,
            forest={**document, "trees": [document["trees"][index] for index in indices]},
        )


def check_forest_features(forest: ForestInfo, dataset: DatasetInfo, field: str = "forest_id") -> None:
    """Invalid unless the forest splits on exactly the dataset's encoded columns, in order."""
    expected, actual = dataset.feature_names, forest.feature_names
    if actual == expected:
        return
    generic = [f"x{i}" for i in range(forest.n_features)]
    if actual == generic and forest.n_features == len(expected):
        return  # a forest saved without names is taken positionally
    faults = []
    missing = [name for name in expected if name not in actual]
    extra = [name for name in actual if name not in expected]
    if missing:
        faults.append(
            FieldFault(
                field,
                f"the forest lacks dataset columns {missing[:10]}",
                "train the forest on this dataset's encoded columns",
            )
        )
    if extra:
        faults.append(
            FieldFault(
                field, f"the forest uses columns the dataset lacks {extra[:10]}", "use a forest trained on this dataset"
            )
        )
    if not faults:
        faults.append(FieldFault(field, "same columns in another order", f"order the forest's features as {expected}"))
    raise Invalid("The forest's features do not match the dataset's encoded columns.", faults)


def check_forest_rows(
    forest: ForestInfo, dataset_id: str, validation_dataset_id: str | None, rows: ValidationSplit
) -> None:
    """Invalid where the service trained this forest on rows the path would select its step on (``rows``: the
    path's split, ``ValidationSplit.for_path``).

    An uploaded forest is the uploader's responsibility: its training rows are unknown here.
    """
    source = forest.source
    if not isinstance(source, TrainedForest):
        return
    if validation_dataset_id is not None:
        leaked = source.dataset_id == validation_dataset_id
    else:
        leaked = source.dataset_id == dataset_id and rows.validation_fraction > 0 and source.rows != rows
    if leaked:
        trained_on = (
            f"the holdout split (fraction {source.rows.validation_fraction}, seed {source.rows.random_state})"
            if source.rows.validation_fraction
            else "every row"
        )
        raise Invalid(
            "The forest was trained on rows this job would validate on: its selected step would be chosen by a "
            "leaked validation loss.",
            [
                FieldFault(
                    "forest_id",
                    f"trained on {trained_on} of dataset {source.dataset_id}",
                    "train the forest with this job's validation split, or give training parameters (forest) "
                    "instead of forest_id",
                )
            ],
        )
