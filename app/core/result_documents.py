"""The typed documents of what a job produced (its result): a training's forest, a path's steps and the step it
chose, with what it measured beside them (cross-validation, fold and half-sample stability, survival curves), a
grid's cells. Its spec and record: ``app.core.job_documents``."""

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from app.core.blobs import Document
from app.core.forests import ForestInfo
from app.core.job_documents import (
    PathJobSpec,
    PathSummary,
    Status,
    legacy_linear_terms,
    step_values,
    upgraded_counts,
)
from solver.path import PathStep


class TrainResult(Document):
    kind: Literal["train"] = "train"
    job_id: str
    forest_id: str
    forest: ForestInfo


class FoldStability(Document):
    """How each step's rules repeat over the folds of a cross-validated path, measured on the paths the folds fitted
    anyway (solver.stability.fold_stability): the refit's step k against each fold's path at step k, on the same
    lambda, a rule counting as the same where its conditions fall at the same decile cuts of every row."""

    dice: list[float] = Field(
        description="per step: the mean Dice–Sørensen index of the folds' rule sets at that step, over every pair of "
        "folds (1: every fold selected the same rules, 0: no two folds share one)"
    )
    frequencies: list[list[float]] = Field(
        description="per step, per rule then per linear term of that step's stored rules (steps/{k}/rules): the share "
        "of the folds whose path at that step selected it"
    )


class FoldRuleKeys(Document):
    """A fold's rules at every step of its path, as its parent matches them (solver.stability.PathRuleKeys)."""

    keys: list[list[list[int | str | bool | None]]] = Field(
        description="the distinct rules of the path, each its conditions as [column, operator, missing flag (null: "
        "the column has no missing values), decile cut of every row nearest the threshold], a linear term as "
        "['linear', column]"
    )
    steps: list[list[int]] = Field(description="per step, the positions in keys of its rules then linear terms")


class FrontierStep(Document):
    """A step on a cross-validated path's accuracy–stability–size frontier (solver.path.stability_frontier): no
    step within the rule budget has at most its terms, at most its mean validation loss and at least its folds' Dice
    index, and is better on one of them."""

    step: int = Field(description="the step's index in steps (its rules: steps/{step}/rules)")
    n_terms: int = Field(description="its terms, rules and linear terms: what the rule budget counts")
    n_rules: int | None = Field(description="its rules with a condition")
    n_linear: int | None = Field(description="its linear terms")
    val_loss: float = Field(description="its mean validation loss over the folds")
    val_loss_se: float | None = Field(description="the standard error of that mean (the folds' sd / sqrt(K))")
    dice: float = Field(description="the folds' mean pairwise Dice index of their rule sets at the step (stability)")


class CrossValidation(Document):
    """How a cross-validated path (``path.cv_folds``) chose its step: the steps' val_* values are the folds' means
    and val_loss_se the standard error of the loss (solver.cross_validation)."""

    folds: int
    selection: str = Field(description="the rule that chose the selected step: 'loss', 'auc' or '1se'")
    best_min: int = Field(description="the step of the lowest mean validation loss within the rule budget")
    best_1se: int = Field(description="the sparsest step within one standard error of best_min's loss")
    fold_steps: list[list[PathStep]] = Field(description="each fold's path, its rows of that fold held out")
    stability: FoldStability | None = Field(
        None, description="how each step's rules repeat over the folds' paths (null in results stored before)"
    )
    frontier: list[FrontierStep] | None = Field(
        None,
        description="the steps within the rule budget that no other step beats on mean validation loss, terms and "
        "the folds' Dice index together, in step order: the choices worth weighing (null without stability, and in "
        "results stored before)",
    )


class RuleStability(Document):
    """How the rules repeat over half-sample fits (solver.stability): ``frequencies[k]`` holds, for each rule then
    each linear term of step k's stored rules, the share of the fits that selected it."""

    dice: float = Field(description="the mean Dice–Sørensen index of the rule sets of each pair's two halves")
    pair_dice: list[float]
    n_resamples: int
    frequencies: list[list[float]]


class SurvivalCurves(Document):
    """A Cox model's survival on the validation rows (computed by the worker with the library): the Kaplan–Meier
    estimate of their signed times beside the mean of the model's curves S(t | x) over them, of the selected step
    and of every step."""

    times: list[float] = Field(
        description="a grid of times from 0 to the validation rows' last time or the training rows' last follow-up "
        "(past it the curves are not estimated), whichever comes first"
    )
    kaplan_meier: list[float] = Field(description="the validation rows' Kaplan–Meier estimate at times")
    model: list[float] = Field(description="the mean over the validation rows of the model's S(t | x) at times")
    steps: list[list[float]] | None = Field(
        None,
        description="per path step (steps[k] the model of step k; steps[selected] is model): the mean over the "
        "validation rows of its S(t | x) at times (null in results stored before every step had them)",
    )


class RuleStepChoice(Document):
    """The best step of the path that has a rule with a condition, beside the selected step, and what choosing it
    costs: the library's ``solver.path.RuleStep`` (``best_rule_step``), computed by the worker."""

    selected: int = Field(description="the selected step")
    step: int | None = Field(
        description="the best step with a rule (one condition or more) within the rule budget, by the path's own "
        "selection: the selected step where it has one; null where no step of the path has one"
    )
    loss_rows: Literal["validation", "training"] = Field(
        description="the rows whose loss the costs compare: the validation rows (with cv_folds, the folds' mean), or "
        "the training rows of a path without validation rows"
    )
    loss_difference: float | None = Field(
        description="step's loss minus the selected step's (0 where they are the same step; null where step is null)"
    )
    loss_ratio: float | None = Field(
        description="step's loss over the selected step's (null where step is null or the selected step's loss is "
        "not positive)"
    )
    loss_se: float | None = Field(
        description="with cv_folds: the standard error of step's cross-validated loss (the folds' sd / sqrt(K))"
    )
    reason: str | None = Field(
        description="where the selected step has no rule (only linear terms, or the intercept alone), why in words, "
        "with the best step with a rule and its cost; null where the selected step has a rule"
    )


class PathResultBase(Document):
    """What a path produced: the result of a path job, and of a grid job (its best cell's)."""

    kind: Literal["path", "grid"]
    job_id: str
    source_job_id: str = Field(description="the job whose path weights these are (a grid's best cell)")
    dataset_id: str
    forest_id: str
    parameters: PathJobSpec
    lambda_max: float
    stop_reason: str
    n_train: int
    n_val: int
    cache_hit: bool
    selected: int
    steps: list[PathStep]
    classes: list[str | bool | int | float] | None = Field(
        None,
        description=(
            "a classifier's labels (logistic loss: two, its rules add log-odds of classes[1]; multinomial: K, its "
            "rules add one amount per class in this order); None for regression and counts"
        ),
    )
    cv: CrossValidation | None = Field(None, description="a cross-validated path's folds and choices")
    stability: RuleStability | None = Field(None, description="with stability_resamples: how the rules repeat")
    fold_rules: FoldRuleKeys | None = Field(
        None, description="a fold of a cross-validated path: its rules at every step, for its parent's cv.stability"
    )
    survival: SurvivalCurves | None = Field(
        None, description="Cox loss: the selected step's survival curves on the validation rows"
    )
    rule_step: RuleStepChoice | None = Field(
        None,
        description="the best step with a rule beside the selected one and its cost, with a reason in words where the "
        "selected step has no rule (null in results stored before it was computed)",
    )

    @model_validator(mode="before")
    @classmethod
    def _upgraded(cls, data: Any) -> Any:
        """A result stored before steps had ``n_terms``: its steps' (and folds', grid cells') counts split where its
        parameters say (no linear terms)."""
        if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
            return data
        linear = legacy_linear_terms(data.get("parameters"))
        upgraded = {**data, "steps": [upgraded_counts(step, linear) for step in data["steps"]]}
        cv = data.get("cv")
        if isinstance(cv, dict) and isinstance(cv.get("fold_steps"), list):
            fold_steps = [[upgraded_counts(step, linear) for step in steps] for steps in cv["fold_steps"]]
            upgraded["cv"] = {**cv, "fold_steps": fold_steps}
        if isinstance(data.get("grid"), list):
            upgraded["grid"] = [
                {**cell, "summary": upgraded_counts(cell.get("summary"), linear)} if isinstance(cell, dict) else cell
                for cell in data["grid"]
            ]
        return upgraded

    def summary(self) -> PathSummary:
        return PathSummary(
            n_steps=len(self.steps),
            selected=self.selected,
            stop_reason=self.stop_reason,
            **step_values(self.steps[self.selected], PathSummary),
        )


class PathJobResult(PathResultBase):
    kind: Literal["path"] = "path"


class GridCell(Document):
    job_id: str
    gamma: float
    fusion_ratio: float
    status: Status
    summary: PathSummary | None


class GridJobResult(PathResultBase):
    kind: Literal["grid"] = "grid"
    best_cell_id: str
    grid: list[GridCell]


JobResult = Annotated[TrainResult | PathJobResult | GridJobResult, Field(discriminator="kind")]
