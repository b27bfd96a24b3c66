"""The model documents: a promoted path step as a named, versioned rule ensemble (what the store keeps and the
API serves)."""

from typing import Any

from pydantic import Field, computed_field, model_validator

from app.core.blobs import Document
from app.core.drift import DriftSummary
from app.core.job_documents import LossView, PathJobSpec, ReadableMetrics, TermCounts
from app.core.result_documents import RuleStepChoice
from app.core.tenants import DEFAULT_TENANT
from solver import RuleEnsemble
from solver.losses import get_loss
from solver.path import upgraded_step_record
from solver.spec import DEFAULT_LOSS, Loss


class ModelMetrics(ReadableMetrics, TermCounts):
    """The promoted step's figures (its path step's): counts, losses, metrics, lambdas."""

    train_loss: float
    val_loss: float | None
    n_trees: int
    n_antecedents: int | None
    lambda_s: float
    lambda_f: float


class ModelProvenance(Document):
    job_id: str
    step: int
    selected_step: int
    dataset_id: str
    forest_id: str
    parameters: PathJobSpec
    grid_cell: str | None = Field(description="the grid cell whose path this is, for a grid job")
    rule_step: RuleStepChoice | None = Field(
        None,
        description="the job's best step with a rule beside its selected step, and its cost (the job result's "
        "rule_step; null for a model promoted before it was computed)",
    )


class ModelSummary(Document):
    id: str
    tenant: str = DEFAULT_TENANT
    name: str
    version: int
    created_at: float
    n_rules: int
    metrics: ModelMetrics
    provenance: ModelProvenance

    @computed_field(description="the model's loss and the metrics its steps record, with their labels")  # type: ignore[prop-decorator]
    @property
    def loss_info(self) -> LossView:
        return LossView.of(self.provenance.parameters.path.loss)


class ModelInfo(ModelSummary):
    description: str | None
    target: str
    exposure: str | None = Field(
        None,
        description=(
            "the exposure column of a rate model fitted with one (the dataset's): its rules give the rate, and "
            "scoring multiplies it by a row's exposure where the row holds this column"
        ),
    )
    offset: str | None = Field(
        None,
        description=(
            "the offset column of a model fitted with one (the dataset's; squared, poisson, tweedie or gamma loss): "
            "scoring adds a row's offset to its score before the inverse link (exp(score + offset), or score + "
            "offset for squared) where the row holds this column, a missing value counting 0; see "
            "prediction_formula"
        ),
    )
    event: str | None = Field(None, description="survival models: the training table's event column")
    loss: Loss = Field(
        DEFAULT_LOSS,
        description=(
            "logistic: a classifier whose rules add log-odds of classes[1]; multinomial: a classifier whose rules "
            "add one amount to each class's score (softmax); scoring returns labels and probabilities. poisson: "
            "counts, whose rules add log rates; scoring returns rates. squared: the rules add to the prediction"
        ),
    )
    classes: list[str | bool | int | float] | None = Field(
        None,
        description=(
            "a classifier's labels as the dataset gave them, sorted: two (logistic; probabilities are of "
            "classes[1]) or K (multinomial; intercept, contributions and probabilities are per class, in this order)"
        ),
    )
    columns: list[dict[str, Any]] = Field(description="the training table's encoding: scoring rows use these columns")
    intercept: float | list[float] = Field(description="a number, or one per class (multinomial, in classes order)")
    n_linear: int = Field(
        0,
        description=(
            "linear terms (ensemble.linear: clipped numeric columns, a path job's linear_terms); n_rules counts the "
            "rules, metrics.n_terms both (the terms the rule budget counts)"
        ),
    )
    longest_rule: int | None = Field(
        None,
        description=(
            "the most conditions of any rule (0 without rules): at most the path's max_rule_length; null for a "
            "model promoted before it was recorded"
        ),
    )
    ensemble: dict[str, Any] = Field(
        description=(
            "the rules (solver.rules.RuleEnsemble.to_dict): each rule's stable ``id`` (the ids scoring explanations "
            "give), conditions, contribution and support, and ``importance``, each column's share of the summed "
            "|contribution| over the training rows (summing to 1)"
        )
    )
    text: str
    aliases: list[str] = Field(
        default_factory=list,
        description="the aliases of the model's name that point at this version now (GET /v1/registered-models/{name})",
    )
    drift: DriftSummary | None = Field(
        None,
        description=(
            "the rules and columns its drift thresholds flag over the last FIRE_DRIFT_SUMMARY_SECONDS (GET "
            "/v1/models/{id}/drift for the figures); null for a model without a training profile"
        ),
    )

    @model_validator(mode="before")
    @classmethod
    def _upgraded(cls, data: Any) -> Any:
        """A model promoted before steps had ``n_terms``: its metrics' count of every term split by its n_linear."""
        if isinstance(data, dict) and isinstance(data.get("metrics"), dict):
            return {**data, "metrics": upgraded_step_record(data["metrics"], data.get("n_linear", 0))}
        return data

    @computed_field(description="what the model predicts, in words")  # type: ignore[prop-decorator]
    @property
    def predicts(self) -> str:
        return get_loss(self.loss).predicts(self.target, self.classes)

    @computed_field(  # type: ignore[prop-decorator]
        description=(
            "how a row's offset and exposure columns enter its prediction, such as 'exp(score + offset) × "
            "exposure'; null for a model with neither"
        )
    )
    @property
    def prediction_formula(self) -> str | None:
        return prediction_formula(self.loss, self.offset, self.exposure)


def prediction_formula(loss: str, offset: str | None, exposure: str | None) -> str | None:
    """How the offset and exposure columns of a model of ``loss`` enter its prediction, in words (the model
    document, the exports' notes); None where it has neither. ``score``: the rules' sum (intercept, the
    contributions of the rules that fire, the linear terms)."""
    if offset is None and exposure is None:
        return None
    score = "score" if offset is None else "score + offset"
    formula = f"exp({score})" if get_loss(loss).link == "log" else score
    if exposure is not None:
        formula += " × exposure"
    columns = [
        *([f"offset is the row's column {offset!r} (0 where missing)"] if offset is not None else []),
        *([f"exposure is the row's column {exposure!r} (1 where missing)"] if exposure is not None else []),
    ]
    return f"{formula}, where score is the rules' sum and " + " and ".join(columns)


def longest_rule(ensemble: RuleEnsemble) -> int:
    """The most conditions of any rule of ``ensemble`` (0 without rules)."""
    return max((len(rule.conditions) for rule in ensemble.rules), default=0)
