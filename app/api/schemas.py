"""Request and response bodies at the edge of the API (pydantic), with OpenAPI examples.

The path and forest settings take their defaults, descriptions and checks from the library's ``PathSpec``
and ``ForestSpec``: a body is valid exactly when the spec it becomes is (each fault of a ``SpecError`` is reported at
the field it names). A body of settings (``SettingsBody``) is checked whole: one 422 names the faults of its fields'
types and the faults of the settings of every field whose type is right. The service's own limits (sizes a worker
should not be asked for) are settings, checked by the core. Bodies are strict: ``true`` is no number and ``"3"`` is
no integer.
"""

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError
from pydantic_core.core_schema import ErrorType

from app.core import job_submission
from app.core.forests import ValidationSplit
from app.core.job_documents import Grid, JobState, LossView
from solver.losses import LOSSES
from solver.path import PathStep
from solver.spec import (
    BlockSelection,
    CandidateKind,
    ForestKind,
    ForestSpec,
    Loss,
    MaxFeaturesName,
    McpScaling,
    PathSpec,
    Penalty,
    Scaling,
    Selection,
    SpecError,
)
from solver.stability import check_resamples

PATH_DEFAULTS, PATH_DOCS = PathSpec.defaults(), PathSpec.descriptions()
FOREST_DEFAULTS, FOREST_DOCS = ForestSpec.defaults(), ForestSpec.descriptions()
# The one place where the validation split's wire names meet its code names: a body's `validation.fraction` and
# `validation.seed` are PathSpec's (and ValidationSplit's) `validation_fraction` and `random_state`.
VALIDATION_FIELDS = {"validation_fraction": ("validation", "fraction"), "random_state": ("validation", "seed")}
EXAMPLE_DATASET_ID, EXAMPLE_FOREST_ID = "ds_0123456789abcdef0123456789abcdef", "fo_0123456789abcdef0123456789abcdef"


def path_setting(name: str, **limits):
    return Field(PATH_DEFAULTS[name], description=PATH_DOCS[name], **limits)


def forest_setting(name: str, **limits):
    return Field(FOREST_DEFAULTS[name], description=FOREST_DOCS[name], **limits)


# a fault of a body's settings: (where in the body, what is wrong)
Fault = tuple[tuple[str, ...], str]
PYDANTIC_ERRORS = frozenset(get_args(ErrorType))


def _init_details(error: ErrorDetails) -> InitErrorDetails:
    """pydantic's report of one error, as it is raised again (a custom error keeps its type and message)."""
    if error["type"] in PYDANTIC_ERRORS:
        details = InitErrorDetails(type=error["type"], loc=error["loc"], input=error["input"])  # type: ignore[typeddict-item]
        if "ctx" in error:
            details["ctx"] = error["ctx"]
        return details
    kind = PydanticCustomError(error["type"], "{message}", {"message": error["msg"]})
    return InitErrorDetails(type=kind, loc=error["loc"], input=error["input"])


def body_error(
    model: type[BaseModel], body: BaseModel | None, faults: Sequence[Fault], errors: Sequence[ErrorDetails] = ()
) -> ValidationError:
    """One validation error of ``model``: pydantic's ``errors`` and each (loc, message) fault of ``body``'s settings
    (reported like any field error, as an ``invalid_setting``)."""
    details = [_init_details(error) for error in errors]
    for loc, message in faults:
        value: Any = body
        for part in loc:
            value = getattr(value, part, None)
        kind = PydanticCustomError("invalid_setting", "{message}", {"message": message})
        details.append(InitErrorDetails(type=kind, loc=loc, input=value))
    return ValidationError.from_exception_data(model.__name__, details)


def spec_faults(error: SpecError, wire: Mapping[str, tuple[str, ...]] | None = None) -> list[Fault]:
    """The faults of a SpecError at the body's fields (``wire``: a setting's place where it is not its name)."""
    return [((wire or {}).get(field, (field,)), detail) for field, detail in error.faults]


class StrictBody(BaseModel):
    # every number finite: JSON's 1e400 (and Python's Infinity and NaN) read as infinite is refused at its field
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class SettingsBody(StrictBody):
    """A body of settings, checked whole: its 422 names every fault at once, those of its fields' types and those
    of its settings (``setting_faults``) among the fields whose types are right."""

    def setting_faults(self, failed: frozenset[str]) -> list[Fault]:
        """The faults of this body's settings; ``failed``: the fields whose type was wrong (here at their defaults),
        whose checks are left to their own faults."""
        return []

    @model_validator(mode="wrap")
    @classmethod
    def check_every_setting(cls, data: Any, handler):
        try:
            body = handler(data)
        except ValidationError as error:
            errors = error.errors()
            failed = frozenset(str(e["loc"][0]) for e in errors if e["loc"])
            if not isinstance(data, dict) or any(
                name in cls.model_fields and cls.model_fields[name].is_required() for name in failed
            ):
                raise  # no body to check the other settings of: a required field or the whole body is wrong
            body = handler({name: value for name, value in data.items() if name not in failed})
            faults = [fault for fault in body.setting_faults(failed) if fault[0][0] not in failed]
            raise body_error(cls, body, faults, errors) from None
        faults = body.setting_faults(frozenset())
        if faults:
            raise body_error(cls, body, faults)
        return body


class TrainingParams(SettingsBody):
    """A forest's recipe: ForestSpec's settings."""

    kind: ForestKind = forest_setting("kind")
    n_estimators: int = forest_setting("n_estimators")
    max_depth: int = forest_setting("max_depth")
    # its forms with their ranges (ForestSpec's check): a 422 at max_features says which forms it accepts
    max_features: Annotated[float, Field(gt=0, le=1)] | Annotated[int, Field(ge=1)] | MaxFeaturesName | None = (
        forest_setting("max_features")
    )
    learning_rate: float = forest_setting("learning_rate")
    threshold_bins: int | None = forest_setting("threshold_bins")
    random_state: int = forest_setting("random_state")

    def forest_spec(self) -> ForestSpec:
        return ForestSpec.from_dict({name: getattr(self, name) for name in FOREST_DEFAULTS})

    def setting_faults(self, failed: frozenset[str]) -> list[Fault]:
        try:
            self.forest_spec()
        except SpecError as error:
            return spec_faults(error)
        return []


# the validation split (the core's ValidationSplit) on the wire; its field names are mapped in VALIDATION_FIELDS
class ValidationSpec(SettingsBody):
    """Where the rows that choose the step come from: another dataset, or a holdout of the training dataset."""

    dataset_id: str | None = Field(
        None,
        description="validation rows from this dataset (same columns); the "
        "forest may then learn from every training row",
    )
    fraction: float = path_setting("validation_fraction")
    seed: int = path_setting("random_state")

    def path_spec(self) -> PathSpec:
        """PathSpec's split settings (the library checks them)."""
        return PathSpec(**{name: getattr(self, wire[1]) for name, wire in VALIDATION_FIELDS.items()})

    def validation_split(self) -> ValidationSplit:
        return ValidationSplit.for_path(self.path_spec(), self.dataset_id)

    def setting_faults(self, failed: frozenset[str]) -> list[Fault]:
        try:
            self.path_spec()
        except SpecError as error:
            return spec_faults(error, {name: wire[1:] for name, wire in VALIDATION_FIELDS.items()})
        return []


class TrainForestRequest(TrainingParams):
    dataset_id: str
    validation: ValidationSpec = Field(
        ValidationSpec(),
        description=("the split later path jobs will use: the forest learns from its training rows only"),
    )

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "examples": [
                {
                    "dataset_id": EXAMPLE_DATASET_ID,
                    "kind": "random_forest",
                    "n_estimators": 100,
                    "max_depth": 3,
                    "max_features": "sqrt",
                    "random_state": 0,
                    "validation": {"fraction": 0.2, "seed": 0},
                }
            ]
        },
    )


# the HTTP form of the core's PathJobRequest (app/core/job_submission.py), which the core resolves into the
# PathJobSpec a worker runs
class PathJobRequest(SettingsBody):
    dataset_id: str
    forest_id: str | None = Field(None, description="an uploaded or trained forest; or give `forest`")
    forest: TrainingParams | None = Field(
        None, description="train a forest (on the training rows) for this job; or give `forest_id`"
    )
    validation: ValidationSpec = ValidationSpec()
    loss: Loss = Field(
        PATH_DEFAULTS["loss"],
        description=(
            PATH_DOCS["loss"] + ". Left out, the dataset's task decides: logistic for a classification dataset, "
            "multinomial for multiclass, poisson for count, squared for regression (the default shown). A task "
            "allows its own loss and squared (classification, count) or poisson (regression, a target never "
            "negative); amount: tweedie (or gamma, every amount > 0); survival: cox; another is a 422 naming loss"
        ),
    )
    power: float = path_setting("power")
    penalty: Penalty | None = path_setting("penalty")
    gamma: float = path_setting("gamma")
    mcp_scaling: McpScaling = path_setting("mcp_scaling")
    scaling: Scaling = path_setting("scaling")
    lambda_f: float | None = path_setting("lambda_f")
    fusion_ratio: float | None = path_setting("fusion_ratio")
    lambdas: list[float] | None = path_setting("lambdas")
    n_lambdas: int = path_setting("n_lambdas")
    lambda_min_ratio: float = path_setting("lambda_min_ratio")
    max_rules: int | None = path_setting("max_rules")
    patience: int | None = path_setting("patience")
    selection: Selection = path_setting("selection")
    tol: float = path_setting("tol")
    max_iter: int = path_setting("max_iter")
    block_selection: BlockSelection = path_setting("block_selection")
    inner_iters: int = path_setting("inner_iters")
    min_support: int | float = path_setting("min_support")
    candidates: CandidateKind | None = path_setting("candidates")
    max_rule_length: int | None = path_setting("max_rule_length")
    linear_terms: bool = path_setting("linear_terms")
    linear_quantile: float = path_setting("linear_quantile")
    polish: bool | None = path_setting("polish")
    cv_folds: int | None = path_setting("cv_folds")
    stability_resamples: int | None = Field(
        None,
        description="also fit the job's settings on the two disjoint halves of stability_resamples / 2 random "
        "splits of the rows (an even number, at most 100): each step's rules get their selection frequency, the job "
        "the Dice index of the halves' rule sets (solver.stability); null: not measured",
    )
    grid: Grid | None = Field(
        None,
        description="one job per gamma x fusion_ratio cell (at most FIRE_MAX_GRID_CELLS, "
        "64 by default); the best cell's selected step is kept",
    )

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={
            "examples": [
                {
                    "dataset_id": EXAMPLE_DATASET_ID,
                    "forest": {"kind": "random_forest", "n_estimators": 100, "max_depth": 3, "max_features": "sqrt"},
                    "validation": {"fraction": 0.2, "seed": 0},
                    "penalty": "mcp",
                    "gamma": 1.1,
                    "fusion_ratio": 1.0,
                    "n_lambdas": 50,
                    "max_rules": 15,
                },
                {
                    "dataset_id": EXAMPLE_DATASET_ID,
                    "forest_id": EXAMPLE_FOREST_ID,
                    "grid": {"gamma": [1.1, 3.0], "fusion_ratio": [0.0, 0.5, 1.0]},
                    "max_rules": 15,
                },
                {
                    "dataset_id": EXAMPLE_DATASET_ID,
                    "forest_id": EXAMPLE_FOREST_ID,
                    "candidates": "nodes",
                    "max_rule_length": 2,
                    "linear_terms": True,
                    "max_rules": 15,
                },
            ]
        },
    )

    def path_spec(self) -> PathSpec:
        # a setting the library has and this body does not (yet) offer keeps the library's default
        settings = {
            name: getattr(self, name)
            for name in PATH_DEFAULTS
            if name not in VALIDATION_FIELDS and name in type(self).model_fields
        }
        if "loss" not in self.model_fields_set:  # the dataset's task decides; until then a loss the selection fits
            settings["loss"] = next(
                (name for name, loss in LOSSES.items() if self.selection in loss.selections), settings["loss"]
            )
        return self.validation.path_spec().replace(**settings)

    def to_core(self) -> job_submission.PathJobRequest:
        """This body as the core's request of the same name (its settings as the library's PathSpec)."""
        return job_submission.PathJobRequest(
            dataset_id=self.dataset_id,
            forest_id=self.forest_id,
            forest=self.forest.forest_spec() if self.forest else None,
            validation_dataset_id=self.validation.dataset_id,
            path=self.path_spec(),
            loss=self.loss if "loss" in self.model_fields_set else None,
            grid=self.grid,
            stability_resamples=self.stability_resamples,
        )

    def setting_faults(self, failed: frozenset[str]) -> list[Fault]:
        faults: list[Fault] = []
        if (self.forest_id is None) == (self.forest is None) and not {"forest_id", "forest"} & failed:
            faults.append(
                (("forest_id",), "give exactly one of forest_id (an existing forest) and forest (training parameters)")
            )
        try:
            spec = self.path_spec()
        except SpecError as error:
            faults += spec_faults(error, VALIDATION_FIELDS)
            spec = self.validation.path_spec()  # the grid's cells are checked on the split's defaults
        if self.grid is not None:
            faults += self._grid_faults(spec)
        if self.cv_folds is not None:
            if self.validation.dataset_id is not None:
                faults.append(
                    (("validation", "dataset_id"), "cv_folds validates on folds of the dataset: drop one of them")
                )
            if "fraction" in self.validation.model_fields_set:
                faults.append(
                    (
                        ("validation", "fraction"),
                        "cv_folds validates on folds of every row, holding no fraction out: drop one of them",
                    )
                )
            if self.grid is not None:
                faults.append((("grid",), "a grid of cross-validated paths is not offered: drop grid or cv_folds"))
        if self.stability_resamples is not None:
            try:
                check_resamples(self.stability_resamples)
            except SpecError as error:
                faults += spec_faults(error)
        return faults

    def _grid_faults(self, spec: PathSpec) -> list[Fault]:
        faults: list[Fault] = []
        if self.lambda_f is not None:
            faults.append((("lambda_f",), "a grid sets fusion_ratio per cell: drop lambda_f"))
        assert self.grid is not None
        for name in ("gamma", "fusion_ratio"):
            for value in getattr(self.grid, name):
                try:
                    spec.replace(**{name: value, "lambda_f": None})
                except SpecError as error:
                    faults.append((("grid", name), error.detail))
                    break
        return faults


class PromoteRequest(StrictBody):
    job_id: str
    step: int | None = Field(None, ge=0, description="path step to promote; default: the selected step")
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    description: str | None = Field(None, max_length=2000)

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={"examples": [{"job_id": "job_0123456789abcdef01234567", "name": "abalone-rings"}]},
    )


# ---- responses ----------------------------------------------------------------------------------------------


class JobLinks(BaseModel):
    self: str
    events: str
    cancel: str
    result: str


class JobView(JobState):
    """A job as clients see it, with links to what can be done with it."""

    links: JobLinks
    loss_info: LossView | None = Field(None, description="a path or grid job's loss and its metrics; null for training")

    @classmethod
    def of(cls, record: JobState) -> "JobView":
        base = f"/v1/jobs/{record.id}"
        path = getattr(record.spec, "path", None)
        return cls(
            **{name: getattr(record, name) for name in JobState.model_fields},
            links=JobLinks(self=base, events=f"{base}/events", cancel=f"{base}/cancel", result=f"{base}/result"),
            loss_info=None if path is None else LossView.of(path.loss),
        )


class StepStability(BaseModel):
    dice: float = Field(description="the job's Dice–Sørensen index of the rule sets of each pair's two halves")
    n_resamples: int
    frequencies: list[float] = Field(
        description="per rule of rules.rules, then per linear term of rules.linear: the share of the half-sample "
        "fits that selected it (a rule counts as the same where its conditions fall at the same decile cuts)"
    )


class StepFoldStability(BaseModel):
    dice: float = Field(
        description="the mean Dice–Sørensen index of the rule sets of the cross-validation's folds' paths at this "
        "step, over every pair of folds"
    )
    n_folds: int
    frequencies: list[float] = Field(
        description="per rule of rules.rules, then per linear term of rules.linear: the share of the folds whose path "
        "at this step selected it (a rule counts as the same where its conditions fall at the same decile cuts)"
    )


@pydantic_dataclass
class StepRules(PathStep):
    """One path step (its PathStep fields: n_rules its rules, n_linear its linear terms, n_terms both) with its rules
    (rules.rules says rules of the same conditions once: each selected rule is one of its members)."""

    job_id: str
    step: int
    selected: bool
    rules: Annotated[dict[str, Any], Field(description="solver.rules.RuleEnsemble.to_dict()")]
    text: str
    longest_rule: Annotated[int, Field(description="the most conditions of any of the step's rules (0: none)")] = 0
    stability: Annotated[
        StepStability | None,
        Field(description="with the job's stability_resamples: how often each of these rules was selected"),
    ] = None
    fold_stability: Annotated[
        StepFoldStability | None,
        Field(description="a cross-validated job's: how often its folds' paths selected each of these rules here"),
    ] = None


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class Readiness(BaseModel):
    status: Literal["ready", "warming"] = Field(
        description="warming: no worker has finished loading the solver yet; jobs wait in the queue meanwhile"
    )
    detail: str
    workers: int = Field(description="workers ready to run jobs (a fresh heartbeat)")
    warming: int = Field(description="workers still loading the solver from numba's cache")
    queued: int
