"""Request and response bodies at the edge of the API (pydantic), with OpenAPI examples."""
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from solver.path import DEFAULT_FUSION_RATIO


class StrictBody(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TrainingParams(StrictBody):
    kind: Literal["random_forest", "extra_trees", "gradient_boosting"] = "random_forest"
    n_estimators: int = Field(100, ge=1, le=5000)
    max_depth: int = Field(3, ge=1, le=20)
    max_features: float | int | Literal["sqrt", "log2"] | None = Field(
        1.0, description="as scikit-learn: a fraction in (0, 1], a count, 'sqrt', 'log2'")
    learning_rate: float = Field(0.1, gt=0, le=1, description="gradient_boosting only")
    random_state: int = Field(0, ge=0, le=2**32 - 1)

    @model_validator(mode="after")
    def check_max_features(self):
        value = self.max_features
        if isinstance(value, float) and not 0 < value <= 1:
            raise ValueError("max_features as a fraction must be in (0, 1]")
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            raise ValueError("max_features as a count must be at least 1")
        return self


class TrainForestRequest(TrainingParams):
    dataset_id: str
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"dataset_id": "ds_0123456789abcdef0123456789abcdef", "kind": "random_forest",
         "n_estimators": 100, "max_depth": 3, "max_features": "sqrt", "random_state": 0}]})


class ValidationSpec(StrictBody):
    dataset_id: str | None = Field(None, description="a validation dataset with the same columns")
    fraction: float = Field(0.2, gt=0, lt=1, description="held out of the training dataset when no dataset_id")
    seed: int = Field(0, ge=0, le=2**32 - 1)


class GridSpec(StrictBody):
    gamma: list[float] = Field(min_length=1, max_length=16)
    fusion_ratio: list[float] = Field(min_length=1, max_length=16)

    @model_validator(mode="after")
    def check_values(self):
        if any(g <= 1 for g in self.gamma):
            raise ValueError("every gamma must be greater than 1 (the MCP concavity)")
        if any(r < 0 for r in self.fusion_ratio):
            raise ValueError("every fusion_ratio must be non-negative")
        if len(self.gamma) * len(self.fusion_ratio) > 64:
            raise ValueError("at most 64 grid cells")
        return self


class PathJobRequest(StrictBody):
    dataset_id: str
    forest_id: str | None = Field(None, description="an uploaded or trained forest; or give `forest`")
    forest: TrainingParams | None = Field(None, description="train a forest for this job; or give `forest_id`")
    validation: ValidationSpec = ValidationSpec()
    penalty: Literal["l1", "mcp"] = "mcp"
    gamma: float = Field(1.1, gt=1, description="MCP concavity (> 1); ignored by l1")
    lambda_f: float | None = Field(None, ge=0, description="fixed fusion strength; or fusion_ratio")
    fusion_ratio: float | None = Field(None, ge=0, description="lambda_f = fusion_ratio * lambda_s; "
                                       "0.5 when neither this nor lambda_f is given")
    n_lambdas: int = Field(50, ge=1, le=1000)
    lambda_min_ratio: float = Field(1e-3, gt=0, lt=1)
    lambdas: list[float] | None = Field(None, min_length=1, max_length=1000, description="explicit lambda_s grid")
    max_rules: int | None = Field(None, ge=1)
    tol: float = Field(1e-4, gt=0, lt=1, description="stationarity tolerance, relative to lambda_max")
    grid: GridSpec | None = Field(None, description="one job per gamma x fusion_ratio cell; best by val loss")

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"dataset_id": "ds_0123456789abcdef0123456789abcdef",
         "forest": {"kind": "random_forest", "n_estimators": 100, "max_depth": 3, "max_features": "sqrt"},
         "validation": {"fraction": 0.2, "seed": 0}, "penalty": "mcp", "gamma": 1.1, "fusion_ratio": 1.0,
         "n_lambdas": 50, "max_rules": 15},
        {"dataset_id": "ds_0123456789abcdef0123456789abcdef", "forest_id": "fo_0123456789abcdef0123456789abcdef",
         "grid": {"gamma": [1.1, 3.0], "fusion_ratio": [0.0, 0.5, 1.0]}, "max_rules": 15}]})

    @model_validator(mode="after")
    def check_choices(self):
        if (self.forest_id is None) == (self.forest is None):
            raise ValueError("give exactly one of forest_id (an existing forest) and forest (training parameters)")
        if self.lambda_f is not None and self.fusion_ratio is not None:
            raise ValueError("give lambda_f or fusion_ratio, not both")
        if self.lambdas is not None and any(not (value > 0) for value in self.lambdas):
            raise ValueError("lambdas must be positive")
        if self.grid is not None and self.lambda_f is not None:
            raise ValueError("a grid sets fusion_ratio per cell: drop lambda_f")
        if self.lambda_f is None and self.fusion_ratio is None:
            self.fusion_ratio = DEFAULT_FUSION_RATIO
        return self


class PromoteRequest(StrictBody):
    job_id: str
    step: int | None = Field(None, ge=0, description="path step to promote; default: the selected step")
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    description: str | None = Field(None, max_length=2000)

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"job_id": "job_0123456789abcdef01234567", "name": "abalone-rings"}]})


class DataframeSplit(BaseModel):
    columns: list[str]
    data: list[list[Any]]
    index: list[Any] | None = None


class PredictRequest(StrictBody):
    """MLflow scoring-server body: exactly one of the four fields, in the dataset's original columns."""

    dataframe_split: DataframeSplit | None = None
    dataframe_records: list[dict[str, Any]] | None = None
    instances: list[Any] | None = None
    inputs: list[Any] | dict[str, list[Any]] | None = None

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"dataframe_split": {"columns": ["Sex", "Length", "Diameter", "Height", "Whole_weight", "Shucked_weight",
                                         "Viscera_weight", "Shell_weight"],
                             "data": [["M", 0.455, 0.365, 0.095, 0.514, 0.2245, 0.101, 0.15]]}},
        {"dataframe_records": [{"Sex": "F", "Length": 0.53, "Diameter": 0.42, "Height": 0.135,
                                "Whole_weight": 0.677, "Shucked_weight": 0.2565, "Viscera_weight": 0.1415,
                                "Shell_weight": 0.21}]}]})

    @model_validator(mode="after")
    def check_exactly_one(self):
        given = [name for name in ("dataframe_split", "dataframe_records", "instances", "inputs")
                 if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of dataframe_split, dataframe_records, instances, inputs "
                             f"(got {given or 'none'})")
        return self


class PredictResponse(BaseModel):
    predictions: list[float]
    explanations: list[list[int]] | None = Field(None, description="indices into the model's rules, per row")


class Resource(BaseModel):
    """Responses are documented by example; their fields are listed in docs/service.md."""

    model_config = ConfigDict(extra="allow")
    id: str
