"""A model's rules as code a user deploys without us: SQL, a Python module (solver.export), or a zipped MLflow
model around the Python module (app.core.mlflow_export)."""

from dataclasses import dataclass

from app.core.mlflow_export import mlflow_model_zip
from app.core.model_documents import ModelInfo, prediction_formula
from solver import RuleEnsemble
from solver.export import EXPORT_FORMATS, export_rules, log_link_quantity
from solver.losses import get_loss

# solver.export's formats, and "mlflow": a zipped MLflow model around the Python export (app.core.mlflow_export)
EXPORT_MEDIA_TYPES = {"sql": "application/sql", "python": "text/x-python", "mlflow": "application/zip"}
EXPORT_SUFFIXES = {"sql": ".sql", "python": ".py", "mlflow": "-mlflow.zip"}
EXPORT_COMMENTS = {"sql": "--", "python": "#"}
assert set(EXPORT_MEDIA_TYPES) == {*EXPORT_FORMATS, "mlflow"}


@dataclass
class ModelExport:
    content: str | bytes  # the code, its first comment lines saying what it computes; the zip of an MLflow model
    filename: str
    media_type: str
    output: str  # what the code computes: "prediction of 'target'", or "log-odds of 'class'" for a classifier


def export_model(model: ModelInfo, format: str) -> ModelExport:
    """``model``'s rules as code a user deploys without us (solver.export): a SQL expression over the
    training table's original columns, or a dependency-free Python module defining ``predict(row)``. What the
    code computes depends on the model (its first comment lines say so, and ``output``): a binary classifier's
    gives the log-odds of classes[1] and says how to turn it into a probability; a K-class one the probability
    of each class (SQL: a column per class named by its label; Python: a dict {class: probability}); a count
    model's the rate exp(log rate), an amount model's (Tweedie, Gamma) the mean exp(log mean); a Cox model's the
    hazard ratio exp(log hazard ratio) relative to the baseline hazard (the risk score; its Python module also
    defines survival(row, times), the curves from the baseline hazard it carries, which SQL does not); a
    regression model's the prediction. ``mlflow``: a zipped MLflow model directory (app.core.mlflow_export)
    around the Python module, predicting as the service scores (a classifier's labels, or probabilities with
    predict_method predict_proba; a Cox model's hazard ratios, or survival curves with params times)."""
    ensemble = RuleEnsemble.from_dict(model.ensemble)
    language = "python" if format == "mlflow" else format
    code = export_rules(ensemble, language)
    title = f"FIRE model {model.name!r} v{model.version} ({model.id})"
    if ensemble.link == "softmax":
        output = f"probabilities of the classes of {model.target!r}"
        shape = (
            "one column per class, named by its label"
            if language == "sql"
            else "predict(row) returns {class: probability}"
        )
        notes = [
            f"{title}: gives the {output} (classes {model.classes!r})",
            f"{shape}, in the order of the classes; the predicted class is the most probable one "
            "(the first of equal ones)",
        ]
    elif ensemble.link == "log" and ensemble.baseline_hazard is not None:
        output = f"hazard ratio of {model.target!r} relative to the baseline hazard"
        curves = (
            "survival(row, times) gives [S(t | row) for t in times] = exp(-H0(t) * hazard ratio), H0 the "
            "baseline cumulative hazard (Breslow, training rows) written below"
            if language == "python"
            else "survival curves need the baseline hazard: the Python or MLflow export carries it"
        )
        notes = [
            f"{title}: gives the {output} (the risk score): exp(log hazard ratio), exp(intercept) times "
            "the factor exp(contribution) of each rule that fires",
            curves,
        ]
    elif ensemble.link == "log":
        quantity = log_link_quantity(ensemble)  # the rate of counts, the mean of amounts
        output = f"{quantity} of {model.target!r}"
        notes = [
            f"{title}: gives the {output} (per unit of exposure): exp(log {quantity}), the base {quantity} "
            f"times the factor exp(contribution) of each rule that fires"
        ]
    elif get_loss(model.loss).link == "logit" and model.classes:
        output = f"log-odds of {model.classes[1]!r}"
        notes = [
            f"{title}: gives the {output} (target {model.target!r}, classes {model.classes!r})",
            f"probability of {model.classes[1]!r} = 1/(1+exp(-score)); "
            f"predict {model.classes[1]!r} where score > 0, else {model.classes[0]!r}",
        ]
    else:
        output = f"prediction of {model.target!r}"
        notes = [f"{title}: predicts {model.target!r}"]
    formula = prediction_formula(model.loss, model.offset, model.exposure)
    if formula is not None:  # the rows' offset and exposure columns are not in the code: the user applies them
        notes.append(f"the service predicts {formula}; this code gives the rules' part, {_row_part(model)}")
    comment = EXPORT_COMMENTS[language]
    text = "".join(f"{comment} {line}\n" for line in notes) + code
    content: str | bytes = text
    if format == "mlflow":  # its predict answers as the service scores: a classifier's labels
        output = f"class of {model.target!r}" if model.classes else output
        if ensemble.baseline_hazard is not None:
            output += ", or survival probabilities S(t=...) with params times"
        content = mlflow_model_zip(model, text, output)
    safe_name = "".join(c if c.isalnum() or c in "-_." else "_" for c in model.name) or "model"
    return ModelExport(
        content, f"{safe_name}-v{model.version}{EXPORT_SUFFIXES[format]}", EXPORT_MEDIA_TYPES[format], output
    )


def _row_part(model: ModelInfo) -> str:
    """What an export's user does with a row's offset and exposure columns, which the code does not read."""
    steps = []
    if model.offset is not None:
        steps.append(
            f"multiply it by exp({model.offset}) (the offset is added to the score)"
            if get_loss(model.loss).link == "log"
            else f"add {model.offset} to it (the offset is added to the score)"
        )
    if model.exposure is not None:
        steps.append(f"multiply it by {model.exposure} (the exposure multiplies the rate)")
    return "then " + ", then ".join(steps)
