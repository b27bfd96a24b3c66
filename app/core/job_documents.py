"""The typed documents of a job: what it was asked to do (spec) and where it stands (record); what it produced
(result) is ``app.core.result_documents``'. One definition each: the API writes specs and reads records and results
through these models, the workers read specs and write records and results through them, and the API's responses are
these models.

Path and forest settings are the library's own ``PathSpec`` and ``ForestSpec`` (pydantic validates them as
the dataclasses they are, so their checks run on every read).
"""

import math
from dataclasses import fields
from typing import Any, Literal, get_args

from pydantic import ConfigDict, Field, model_serializer, model_validator

from app.core.blobs import Document
from app.core.forests import ForestRecipe, ValidationSplit
from app.core.tenants import DEFAULT_TENANT
from solver.losses import get_loss
from solver.path import PathStep, upgraded_step_record
from solver.spec import Loss, PathSpec

JobKind = Literal["train", "path", "grid", "cv", "batch", "batch_chunk", "stability_fit"]
Status = Literal["queued", "running", "succeeded", "failed", "canceled"]
QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELED = get_args(Status)
ACTIVE = (QUEUED, RUNNING)
TERMINAL = (SUCCEEDED, FAILED, CANCELED)


class MetricView(Document):
    name: str = Field(description="a path step's metric: its train_<name> and val_<name> fields")
    label: str = Field(description="the metric in words")


class LossView(Document):
    """A path's loss as clients read it, from the library's registry (``solver.losses``): what it fits, and the
    metrics its steps record, most telling first, with their labels (the dashboard names metrics by these)."""

    name: Loss
    task: str = Field(description="the dataset task the loss is made for")
    link: str = Field(description="how a score becomes the prediction: identity, logit, softmax or log")
    classifier: bool = Field(description="its targets are classes; its models return labels and probabilities")
    per_class: bool = Field(description="each rule adds one amount per class")
    metrics: list[MetricView] = Field(description="the readable metrics of a step, most telling first, loss included")
    chart_metric: str = Field(description="the metric a chart of the path opens on")
    other_tasks: list[str] = Field(description="the other dataset tasks where a path may ask for it")
    selections: list[str] = Field(description="the step selections (PathSpec.selection) it allows")

    @classmethod
    def of(cls, name: str) -> "LossView":
        return cls.model_validate(get_loss(name).to_document())


# ---- specs --------------------------------------------------------------------------------------------------


class TrainJobSpec(Document):
    forest_id: str
    recipe: ForestRecipe


# a path job as a worker runs it: resolved from its PathJobRequest (app/core/job_submission.py)
class PathJobSpec(Document):
    dataset_id: str
    forest_id: str
    recipe: ForestRecipe | None = Field(None, description="how to train the forest when it is not stored yet")
    validation_dataset_id: str | None = Field(
        None,
        description="validation rows from this dataset; otherwise a holdout of the training dataset "
        "(path.validation_fraction, path.random_state)",
    )
    path: PathSpec
    rows: ValidationSplit | None = Field(
        None,
        description="the split of the dataset whose training side the path learns from (and a forest trained for "
        "the job): derived once, at submission; None in jobs submitted before it was recorded",
    )
    fold: int | None = Field(
        None,
        description="the fold of a cross-validated path (path.cv_folds) this job fits, a cell of the parent that "
        "refits on every row; None: the whole path",
    )
    resample: int | None = Field(
        None,
        description="the half-sample fit of a stability measurement this job (kind stability_fit) runs, a cell of the "
        "job that measures it: half resample % 2 of pair resample // 2 (solver.stability.half_sample); None: not one",
    )
    stability_resamples: int | None = Field(
        None,
        description="half-sample fits that measure how the rules repeat (solver.stability): each step's rules get "
        "their selection frequency, the job the Dice index of the halves' rule sets; None: not measured",
    )


class Grid(Document):
    # a path job's body holds it: as strict as the body ("1.1" is no number)
    model_config = ConfigDict(strict=True)

    gamma: list[float] = Field(min_length=1)
    fusion_ratio: list[float] = Field(min_length=1)


class GridJobSpec(PathJobSpec):
    grid: Grid


# a batch scoring job (app/core/batch/): the parent that collects its chunks, and one chunk
class BatchJobSpec(Document):
    model_id: str
    model_name: str
    model_version: int
    source: str = Field(description="the file's name (an upload) or 'dataset:{id}' (a stored dataset)")
    output_format: Literal["parquet", "csv"]
    explain: bool
    times: list[float] | None = None
    id_column: str | None = Field(None, description="an input column copied into the result beside `row`")
    chunk_rows: int
    n_rows: int
    n_chunks: int


class BatchChunkSpec(Document):
    batch_id: str = Field(description="the batch job this chunk belongs to")
    model_id: str
    chunk: int
    first_row: int
    n_rows: int
    explain: bool
    times: list[float] | None = None
    id_column: str | None = None


JobSpec = TrainJobSpec | GridJobSpec | PathJobSpec | BatchJobSpec | BatchChunkSpec


# ---- records ------------------------------------------------------------------------------------------------

_STEP_FIELDS = {field.name for field in fields(PathStep)}


def step_values(step: PathStep, model: type[Document]) -> dict[str, Any]:
    """The fields of ``model`` that a path step has (rule count, losses, metrics), as ``model``'s keywords; a figure
    that is not a finite number (a validation loss that overflowed on rows far from the training ones) as None, no
    figure: a document holds no number JSON has no word for."""
    return {name: _finite(getattr(step, name)) for name in model.model_fields if name in _STEP_FIELDS}


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


class ReadableMetrics(Document):
    """The metrics of a step that a loss has (None where it has not), train and validation: what people read."""

    train_auc: float | None = Field(
        None,
        description=(
            "classifiers (logistic and multinomial loss) only, as val_auc, train_accuracy and val_accuracy: AUC (macro "
            "one-vs-rest for K classes) and accuracy; the losses are then mean log loss"
        ),
    )
    val_auc: float | None = None
    train_accuracy: float | None = None
    val_accuracy: float | None = None
    train_brier: float | None = Field(None, description="classifiers only, as val_brier: Brier score")
    val_brier: float | None = None
    train_r2: float | None = Field(
        None,
        description=(
            "regression (squared loss) only, as val_r2, train_rmse and val_rmse: R² and root mean squared error; "
            "the losses are then mean squared error"
        ),
    )
    val_r2: float | None = None
    train_rmse: float | None = None
    val_rmse: float | None = None
    train_mae: float | None = Field(
        None,
        description=(
            "regression and counts (Poisson loss), as val_mae: mean absolute error of the prediction (of the rate "
            "for counts, whose losses are then mean Poisson deviance)"
        ),
    )
    val_mae: float | None = None
    train_cindex: float | None = Field(
        None,
        description=(
            "survival (Cox loss) only, as val_cindex: Harrell's C-index of the scores; the losses are then the "
            "partial-likelihood deviance per row"
        ),
    )
    val_cindex: float | None = None


def legacy_linear_terms(spec: Any) -> int | None:
    """The linear terms of every step of a job whose records were written before steps had ``n_terms``
    (solver.path.upgraded_step_record): 0 where its path had no linear candidates, else unknown (None)."""
    path = spec.get("path") if isinstance(spec, dict) else None
    return 0 if isinstance(path, dict) and not path.get("linear_terms", False) else None


def upgraded_counts(data: Any, n_linear: int | None = None) -> Any:
    """A step's counts as this version writes them (solver.path.upgraded_step_record), from a stored record's."""
    return upgraded_step_record(data, n_linear) if isinstance(data, dict) else data


class TermCounts(Document):
    """A step's counts of selected terms: ``n_rules`` rules and ``n_linear`` linear terms, ``n_terms`` both (the
    count the rule budget ``max_rules`` bounds). A record written before ``n_terms`` existed counted every term as
    ``n_rules``: it reads as ``n_terms``, with ``n_rules`` and ``n_linear`` null where the split is unknown."""

    n_rules: int | None = Field(description="rules (linear terms not counted)")
    n_linear: int | None = Field(description="linear terms")
    n_terms: int = Field(description="rules and linear terms: the count the rule budget max_rules bounds")

    @model_validator(mode="before")
    @classmethod
    def _upgraded(cls, data: Any) -> Any:
        return upgraded_counts(data)


class BestStep(TermCounts):
    """The best step so far (solver.path.best_step: within the rule budget, which counts terms)."""

    step: int
    val_loss: float | None
    train_loss: float
    val_auc: float | None = Field(
        None, description="classifiers (logistic, multinomial loss): validation AUC (macro one-vs-rest for K classes)"
    )
    val_accuracy: float | None = Field(None, description="classifiers: validation accuracy")
    val_brier: float | None = Field(None, description="classifiers: validation Brier score")
    val_mae: float | None = Field(
        None, description="regression and counts: validation mean absolute error of the prediction (of the rate)"
    )
    val_r2: float | None = Field(None, description="regression (squared loss): validation R²")
    val_rmse: float | None = Field(None, description="regression (squared loss): validation root mean squared error")
    val_cindex: float | None = Field(None, description="survival (Cox loss): validation C-index")

    @classmethod
    def of(cls, step: PathStep) -> "BestStep":
        return cls(step=step.index, **step_values(step, cls))


class Progress(ReadableMetrics):
    """Where a job stands; only the fields that apply to its phase are set (and sent).

    The phases of a path job: queued, starting, training (its forest), loading, matrix, path (step of n_steps), rules
    (every step's, built once), stability (on its half-sample fits, fit of n_fits), done. A job waiting for its cells
    counts them as they end: a cross-validation (kind cv) its folds, each a path job (folds: unfinished of its cells),
    a grid its cells (cells: unfinished), a batch its chunks (chunks: unfinished), and a path that measures stability
    its half-sample fits, each a stability_fit job (stability: fit of n_fits; a cross-validation's run beside its
    folds). A cross-validation then refits on every row (refit: step of n_steps, the steps every fold reached),
    builds the rules and measures their stability."""

    phase: str
    step: int | None = Field(None, description="steps done so far")
    n_steps: int | None = Field(None, description="steps planned (the path may stop earlier at the rule budget)")
    fit: int | None = Field(
        None, description="half-sample fits ended so far (phase stability, or a job waiting for them)"
    )
    n_fits: int | None = Field(None, description="half-sample fits planned (stability_resamples)")
    n_rules: int | None = Field(None, description="the current step's rules (linear terms not counted)")
    n_linear: int | None = Field(None, description="the current step's linear terms")
    n_terms: int | None = Field(None, description="the current step's rules and linear terms (the budget's count)")
    lambda_s: float | None = None
    train_loss: float | None = None
    val_loss: float | None = None
    best: BestStep | None = None
    unfinished: int | None = Field(
        None, description="a parent job's cells (a grid's, a cross-validation's folds, a batch's chunks) not ended yet"
    )
    retry_of_attempt: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _upgraded(cls, data: Any) -> Any:
        return upgraded_counts(data)

    @model_serializer(mode="wrap")
    def _without_unset_fields(self, handler):
        return {name: value for name, value in handler(self).items() if value is not None}


class JobError(Document):
    type: str
    detail: str


class LostAttempt(Document):
    attempt: int
    lost_at: float
    reason: str


class TrainSummary(Document):
    forest_id: str
    n_trees: int
    n_leaves: int


class PathSummary(TermCounts):
    """The selected step of a path: its counts and validation metrics."""

    n_steps: int
    selected: int
    val_loss: float | None
    train_loss: float
    val_auc: float | None = Field(None, description="classifiers (logistic, multinomial loss): the selected step's")
    val_accuracy: float | None = None
    val_brier: float | None = None
    val_r2: float | None = Field(None, description="regression (squared loss): the selected step's, as val_rmse")
    val_rmse: float | None = None
    val_mae: float | None = Field(None, description="regression and counts (Poisson loss): the selected step's")
    val_cindex: float | None = Field(None, description="survival (Cox loss): the selected step's C-index")
    stop_reason: str


class GridSummary(PathSummary):
    best_cell_id: str
    best_gamma: float
    best_fusion_ratio: float


class BatchSummary(Document):
    n_rows: int
    n_chunks: int
    columns: list[str] = Field(description="the result's columns")
    output_format: Literal["parquet", "csv"]


class JobState(Document):
    """What a client sees of a job."""

    id: str
    tenant: str = DEFAULT_TENANT
    kind: JobKind
    status: Status
    attempt: int
    spec: JobSpec
    parent_id: str | None = None
    cells: list[str] | None = Field(
        None, description="a parent's cells (a grid's, a cross-validation's folds, a batch's chunks), run before it"
    )
    stability_fits: list[str] | None = Field(
        None,
        description="the half-sample fits (kind stability_fit) of a path that measures stability (stability_resamples: "
        "a path job, a grid's cell, a cross-validation), run before it (a cross-validation's beside its folds)",
    )
    created_at: float
    queued_at: float
    started_at: float | None = None
    finished_at: float | None = None
    threads: int | None = Field(
        None, description="threads of the solver's parallel kernels in the work horse that runs it (FIRE_NUM_THREADS)"
    )
    progress: Progress
    timings: dict[str, float] = Field(default_factory=dict)
    error: JobError | None = None
    cache_hit: bool | None = None
    summary: GridSummary | PathSummary | TrainSummary | BatchSummary | None = None
    history: list[LostAttempt] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _upgraded(cls, data: Any) -> Any:
        """A record written before steps had ``n_terms``: its counts split where its spec says (no linear terms)."""
        if not isinstance(data, dict):
            return data
        linear = legacy_linear_terms(data.get("spec"))
        upgraded = {**data}
        if isinstance(data.get("progress"), dict):
            upgraded["progress"] = upgraded_counts(data["progress"], linear)
            if isinstance(data["progress"].get("best"), dict):
                upgraded["progress"]["best"] = upgraded_counts(data["progress"]["best"], linear)
        if isinstance(data.get("summary"), dict):
            upgraded["summary"] = upgraded_counts(data["summary"], linear)
        return upgraded


class JobRecord(JobState):
    """The stored record: the client's view plus where its current run sits in RQ, and the jobs that wait for it."""

    queue: str
    rq_job_id: str
    dependents: list[str] | None = Field(
        None,
        description="jobs besides its parent that wait for this one to end (the cells of a training job): each "
        "counts it down (app/core/records.py)",
    )

    @model_validator(mode="before")
    @classmethod
    def _without_continuation(cls, data: Any) -> Any:
        """A record written while parents re-queued themselves behind their cells counted the re-queues."""
        if isinstance(data, dict) and "continuation" in data:
            return {name: value for name, value in data.items() if name != "continuation"}
        return data
