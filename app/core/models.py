"""Models: a promoted path step as a named, versioned rule ensemble, and fast scoring with it."""

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import Field
from redis.exceptions import RedisError

from app.core.blobs import BlobStore, Document, jsonable
from app.core.config import Settings
from app.core.datasets import MAX_ABS_VALUE, DatasetStore, table_invalid
from app.core.errors import FieldFault, Invalid, NotFound, TooLarge
from app.core.idempotency import IdempotencyKeys
from app.core.job_documents import PathJobSpec, ReadableMetrics
from app.core.job_results import JobResults
from app.core.keys import Keys
from app.core.mlflow_export import mlflow_model_zip
from app.core.registry import ModelRef, ModelRegistry, RegisteredModel
from app.core.tenants import DEFAULT_TENANT
from solver import RuleEnsemble, probability
from solver.encoding import TableEncoding, TableError
from solver.export import EXPORT_FORMATS, export_rules
from solver.rule_types import as_json
from solver.rules import INVERSE_LINKS
from solver.spec import DEFAULT_LOSS, Loss


class ModelMetrics(ReadableMetrics):
    train_loss: float
    val_loss: float | None
    n_rules: int
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


class ModelSummary(Document):
    id: str
    tenant: str = DEFAULT_TENANT
    name: str
    version: int
    created_at: float
    n_rules: int
    metrics: ModelMetrics
    provenance: ModelProvenance


class ModelInfo(ModelSummary):
    description: str | None
    target: str
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
            "rules, metrics.n_rules both (the terms the rule budget counts)"
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


# column names in the model's order -> (column -> values, n_rows, the field holding the rows)
MODEL_RECHECK_SECONDS = 1.0
TableReader = Callable[[list[str]], tuple[Mapping[str, Sequence], int, str]]


@dataclass
class ScoringModel:
    id: str
    name: str
    version: int
    tenant: str
    ensemble: RuleEnsemble
    encoding: TableEncoding
    checked_at: float = 0.0  # when the stored model was last seen to exist (time.monotonic)
    classes: list | None = None  # a classifier's labels (binary: its rules add log-odds of classes[1])


@dataclass
class Resolution:
    """Which model id a name reference named, when it was looked up (time.monotonic)."""

    model_id: str
    resolved_at: float


@dataclass
class Scores:
    # numbers (regression), rates (counts), or labels (a binary classifier: classes[1] where its log-odds are > 0;
    # K classes: the class of the largest score, the first on ties)
    predictions: list
    explanations: list[list[int]] | None  # indices of the rules that fired, per row, where asked for
    # what each of those rules adds: to the score (log-odds for a binary classifier, log rate for counts), or a
    # list of K amounts, one per class
    contributions: list[list] | None = None
    # a binary classifier's: of classes[1] (solver.probability of the log-odds); K classes: a row of K per row
    probabilities: list[float] | list[list[float]] | None = None
    classes: list | None = None
    # a model with linear terms, where explanations were asked for: what each linear term adds, per row, in the
    # order of the model's linear terms (with the rules' contributions, the score minus the intercept)
    linear_contributions: list[list] | None = None


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


class ModelStore:
    def __init__(
        self,
        settings: Settings,
        blobs: BlobStore,
        datasets: DatasetStore,
        job_results: JobResults,
        idempotency: IdempotencyKeys,
        registry: ModelRegistry,
    ):
        self.settings = settings
        self.blobs = blobs
        self.datasets = datasets
        self.job_results = job_results
        self.idempotency = idempotency
        self.registry = registry
        self.keys = Keys.from_settings(settings)
        self._scoring_cache: OrderedDict[str, ScoringModel] = OrderedDict()
        self._resolutions: OrderedDict[tuple[str, ModelRef], Resolution] = OrderedDict()
        self._cache_lock = threading.Lock()
        self._rechecking: set[str | tuple[str, ModelRef]] = set()  # what a background recheck is looking up
        self._registered_tenants: set[str] = set()  # tenants whose earlier models are known to be registered
        self._recheck_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model-recheck")

    def promote(
        self,
        job_id: str,
        step: int | None,
        name: str,
        description: str | None,
        *,
        tenant: str,
        idempotency_key: str | None = None,
    ) -> ModelInfo:
        """A path step (the selected one by default) of a succeeded path or grid job as a new version of the
        tenant's model ``name``; the same idempotency key gives the same model."""
        request = {"job_id": job_id, "step": step, "name": name, "description": description}
        return self.idempotency.once(
            tenant=tenant,
            kind="model",
            key=idempotency_key,
            request=request,
            new_id="mdl_" + uuid.uuid4().hex[:24],
            create=lambda model_id: self._promote(model_id, job_id, step, name, description, tenant),
            find=lambda model_id: self._find(model_id, tenant),
        )

    def _promote(
        self, model_id: str, job_id: str, step: int | None, name: str, description: str | None, tenant: str
    ) -> ModelInfo:
        self._register_earlier_models(tenant)
        result = self.job_results.path_result(job_id, tenant=tenant)
        step = result.selected if step is None else step
        result, ensemble = self.job_results.step_rules(job_id, step, tenant=tenant)
        chosen = result.steps[step]
        dataset = self.datasets.read(result.dataset_id)  # step_rules found it
        model = ModelInfo(
            id=model_id,
            tenant=tenant,
            name=name,
            version=self.blobs.increment(self.keys.model_version(tenant, name)),
            description=description,
            created_at=time.time(),
            target=dataset.target,
            loss=result.parameters.path.loss,
            classes=dataset.rule_classes(result.parameters.path.loss),
            columns=dataset.columns,
            n_rules=len(ensemble.rules),
            n_linear=len(ensemble.linear),
            longest_rule=longest_rule(ensemble),
            intercept=as_json(ensemble.intercept),
            ensemble=jsonable(ensemble.to_dict()),
            text=ensemble.to_text(),
            metrics=ModelMetrics(**{metric: getattr(chosen, metric) for metric in ModelMetrics.model_fields}),
            provenance=ModelProvenance(
                job_id=job_id,
                step=step,
                selected_step=result.selected,
                dataset_id=result.dataset_id,
                forest_id=result.forest_id,
                parameters=result.parameters,
                grid_cell=getattr(result, "best_cell_id", None),
            ),
        )
        self.blobs.put_document(self.keys.model(model.id), model)
        self.blobs.index(self.keys.models(tenant), model.id, model.created_at)
        self.registry.add_version(tenant, name, model.version, model.id)
        return model

    def _find(self, model_id: str, tenant: str) -> ModelInfo | None:
        model = self.blobs.get_document(self.keys.model(model_id), ModelInfo)
        return model if model is not None and model.tenant == tenant else None

    def get(self, model_id: str, *, tenant: str) -> ModelInfo:
        """The model with the aliases that point at it now."""
        model = self._find(model_id, tenant)
        if model is None:
            raise NotFound("model", model_id)
        self._register_earlier_models(tenant)
        model.aliases = self.registry.aliases_of(tenant, model.name, model.version)
        return model

    def resolve(self, ref: ModelRef, *, tenant: str) -> ModelInfo:
        """The model a name, version or alias names now."""
        self._register_earlier_models(tenant)
        model_id, _ = self.registry.resolve(ref, tenant=tenant)
        return self.get(model_id, tenant=tenant)

    def registered(self, name: str, *, tenant: str) -> RegisteredModel:
        self._register_earlier_models(tenant)
        return self.registry.get(tenant, name)

    def registered_names(self, *, tenant: str) -> list[RegisteredModel]:
        self._register_earlier_models(tenant)
        return self.registry.names(tenant)

    def set_alias(self, name: str, alias: str, version: int, *, tenant: str) -> RegisteredModel:
        self._register_earlier_models(tenant)
        registered = self.registry.set_alias(tenant, name, alias, version)
        self._forget_resolution(tenant, ModelRef(name, alias=alias))
        return registered

    def remove_alias(self, name: str, alias: str, *, tenant: str) -> None:
        self.registry.remove_alias(tenant, name, alias)
        self._forget_resolution(tenant, ModelRef(name, alias=alias))

    def _register_earlier_models(self, tenant: str) -> None:
        """Register the versions of models promoted before names were registered (once per tenant)."""
        if tenant in self._registered_tenants:
            return
        if self.registry.claim_earlier_models(tenant):
            for model in sorted(self.list(tenant=tenant, limit=1_000_000), key=lambda m: m.created_at):
                self.registry.add_version(tenant, model.name, model.version, model.id, model.created_at)
        self._registered_tenants.add(tenant)

    def export(self, model_id: str, format: str, *, tenant: str) -> ModelExport:
        """The model's rules as code a user deploys without us (solver.export): a SQL expression over the
        training table's original columns, or a dependency-free Python module defining ``predict(row)``. What the
        code computes depends on the model (its first comment lines say so, and ``output``): a binary classifier's
        gives the log-odds of classes[1] and says how to turn it into a probability; a K-class one the probability
        of each class (SQL: a column per class named by its label; Python: a dict {class: probability}); a count
        model's the rate exp(log rate); a regression model's the prediction. ``mlflow``: a zipped MLflow model
        directory (app.core.mlflow_export) around the Python module, predicting as the service scores (a
        classifier's labels, or probabilities with predict_method predict_proba)."""
        model = self.get(model_id, tenant=tenant)
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
        elif ensemble.link == "log":
            output = f"rate of {model.target!r}"
            notes = [
                f"{title}: gives the {output} (per unit of exposure): exp(log rate), the base rate "
                f"times the factor exp(contribution) of each rule that fires"
            ]
        elif model.loss == "logistic" and model.classes:
            output = f"log-odds of {model.classes[1]!r}"
            notes = [
                f"{title}: gives the {output} (target {model.target!r}, classes {model.classes!r})",
                f"probability of {model.classes[1]!r} = 1/(1+exp(-score)); "
                f"predict {model.classes[1]!r} where score > 0, else {model.classes[0]!r}",
            ]
        else:
            output = f"prediction of {model.target!r}"
            notes = [f"{title}: predicts {model.target!r}"]
        comment = EXPORT_COMMENTS[language]
        text = "".join(f"{comment} {line}\n" for line in notes) + code
        content: str | bytes = text
        if format == "mlflow":  # its predict answers as the service scores: a classifier's labels
            output = f"class of {model.target!r}" if model.classes else output
            content = mlflow_model_zip(model, text, output)
        safe_name = "".join(c if c.isalnum() or c in "-_." else "_" for c in model.name) or "model"
        return ModelExport(
            content, f"{safe_name}-v{model.version}{EXPORT_SUFFIXES[format]}", EXPORT_MEDIA_TYPES[format], output
        )

    def list(self, *, tenant: str, limit: int = 100) -> list[ModelInfo]:
        return self.blobs.newest_documents(self.keys.models(tenant), self.keys.model, ModelInfo, limit)

    def delete(self, model_id: str, *, tenant: str) -> None:
        """Remove the model; its name's version numbers are never reused."""
        model = self.get(model_id, tenant=tenant)
        self.registry.remove_version(tenant, model.name, model.version, model.id)  # Conflict where an alias points
        self.blobs.delete(self.keys.model(model.id))
        self.blobs.unindex(self.keys.models(tenant), model.id)
        with self._cache_lock:
            self._scoring_cache.pop(model.id, None)
            for key in [key for key, found in self._resolutions.items() if found.model_id == model.id]:
                del self._resolutions[key]

    def recently_checked(self, target: "str | ModelRef", tenant: str) -> ScoringModel | None:
        """The cached scoring model of a model id, or of the model a name reference resolved to, if both were seen
        in Redis within MODEL_RECHECK_SECONDS: usable without a Redis call (another API process may delete a model
        or move an alias; this one notices within that time). Past half that time, one background recheck looks
        again: a model scored steadily never sends a request to Redis (under 50 clients, requests that did so
        waited for the GIL behind the event loop: a p99 of 0.5 s, not 40 ms)."""
        now = time.monotonic()
        with self._cache_lock:
            if isinstance(target, ModelRef):
                resolution = self._resolutions.get((tenant, target))
                if resolution is None or now - resolution.resolved_at >= MODEL_RECHECK_SECONDS:
                    return None
                if now - resolution.resolved_at >= MODEL_RECHECK_SECONDS / 2:
                    self._recheck_later((tenant, target), self._reresolve, tenant, target)
                target = resolution.model_id
            cached = self._scoring_cache.get(target)
            if cached is None or cached.tenant != tenant or now - cached.checked_at >= MODEL_RECHECK_SECONDS:
                return None
            self._scoring_cache.move_to_end(target)
            if now - cached.checked_at >= MODEL_RECHECK_SECONDS / 2:
                self._recheck_later(target, self._recheck, target, cached)
        return cached

    def _recheck_later(self, what: "str | tuple[str, ModelRef]", recheck: Callable, *args) -> None:
        """Submit one background recheck of ``what`` (none while one is under way); the cache lock is held."""
        if what not in self._rechecking:
            self._rechecking.add(what)
            self._recheck_thread.submit(recheck, *args)

    def _recheck(self, model_id: str, cached: ScoringModel) -> None:
        looked_at = time.monotonic()
        try:
            exists = self.blobs.exists(self.keys.model(model_id))
        except RedisError:  # left stale: the first request past the interval looks itself, and answers 503
            exists = None
        with self._cache_lock:
            self._rechecking.discard(model_id)
            if exists:
                cached.checked_at = looked_at
            elif exists is False and self._scoring_cache.get(model_id) is cached:
                del self._scoring_cache[model_id]

    def _reresolve(self, tenant: str, ref: ModelRef) -> None:
        looked_at = time.monotonic()
        key = (tenant, ref)
        try:
            model_id = self.registry.resolve(ref, tenant=tenant)[0]
        except (NotFound, RedisError) as error:
            with self._cache_lock:
                self._rechecking.discard(key)
                if isinstance(error, NotFound):  # gone: the next request looks itself and answers 404
                    self._resolutions.pop(key, None)
            return  # RedisError: left stale, as in _recheck
        with self._cache_lock:
            self._rechecking.discard(key)
            self._resolutions[key] = Resolution(model_id, looked_at)

    def _forget_resolution(self, tenant: str, ref: ModelRef) -> None:
        with self._cache_lock:
            self._resolutions.pop((tenant, ref), None)

    def scoring_model(self, target: "str | ModelRef", tenant: str) -> ScoringModel:
        """The scoring model of a model id, or of the model a name reference names now (looked up in Redis)."""
        if isinstance(target, ModelRef):
            self._register_earlier_models(tenant)
            model_id, _ = self.registry.resolve(target, tenant=tenant)
            with self._cache_lock:
                self._remember(self._resolutions, (tenant, target), Resolution(model_id, time.monotonic()))
        else:
            model_id = target
        with self._cache_lock:
            cached = self._scoring_cache.get(model_id)
        if cached is not None and cached.tenant == tenant and self.blobs.exists(self.keys.model(model_id)):
            cached.checked_at = time.monotonic()
            return cached
        model = self._find(model_id, tenant)
        if model is None:
            raise NotFound("model", model_id)
        scoring = ScoringModel(
            model.id,
            model.name,
            model.version,
            tenant,
            RuleEnsemble.from_dict(model.ensemble),
            TableEncoding.from_dict(model.columns),
            time.monotonic(),
            model.classes,
        )
        with self._cache_lock:  # a model never changes: an entry is stale only once deleted
            self._remember(self._scoring_cache, model_id, scoring)
        return scoring

    def _remember(self, cache: OrderedDict, key, value) -> None:
        """Put ``value`` in an LRU ``cache`` as its newest entry, dropping the oldest past FIRE_MODEL_CACHE_SIZE; the
        cache lock is held."""
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > self.settings.model_cache_size:
            cache.popitem(last=False)

    def score(self, scoring: ScoringModel, read_table: TableReader, explain: bool) -> Scores:
        """Predictions for rows in the training table's original columns. ``read_table(column_names)`` gives
        (column -> values, n_rows, the field holding the rows, which faults name as ``{field}.{column}``)."""
        table, n_rows, location = read_table(scoring.encoding.column_names)
        if n_rows > self.settings.max_scoring_rows:
            raise TooLarge(
                f"{n_rows} rows in one request, more than the limit of {self.settings.max_scoring_rows}.",
                [
                    FieldFault(
                        location,
                        f"{n_rows} rows",
                        "split the rows over several requests or raise FIRE_MAX_SCORING_ROWS",
                    )
                ],
            )
        check_numeric_values(scoring.encoding, table, location)
        try:
            X = scoring.encoding.encode(table, n_rows, location)
        except TableError as error:
            raise table_invalid(error) from error
        outside = np.abs(X) > MAX_ABS_VALUE
        if outside.any():
            names = sorted({scoring.encoding.feature_names[j] for j in np.flatnonzero(outside.any(axis=0))})
            raise Invalid(
                "Some values are infinite or out of range.",
                [
                    FieldFault(
                        f"{location}.{name.split('=')[0]}",
                        f"infinite or beyond ±{MAX_ABS_VALUE:.3g}",
                        "send finite numbers in range, or null for a missing value",
                    )
                    for name in names
                ],
            )
        explanations = contributions = linear_contributions = None
        if explain:
            # per row the rules that fired, then every linear term ({"linear": id}); a contribution is a list of K
            # amounts for K classes
            explained = scoring.ensemble.explain(X)
            explanations = [[entry["id"] for entry in row if "id" in entry] for row in explained]
            contributions = [[entry["contribution"] for entry in row if "id" in entry] for row in explained]
            if scoring.ensemble.linear:
                linear_contributions = [
                    [entry["contribution"] for entry in row if "linear" in entry] for row in explained
                ]
        ensemble = scoring.ensemble
        scores = ensemble.predict(X)  # (n,), or (n, K) per class
        if ensemble.link == "softmax":  # K classes: the label of the largest score, as FireClassifier.predict
            classes = list(ensemble.classes or ())  # the model's classes: those of its rules
            labels = [classes[k] for k in np.argmax(scores, axis=1).tolist()]
            probabilities = INVERSE_LINKS["softmax"](scores)  # RuleEnsemble.predict_mean of these scores
            return Scores(labels, explanations, contributions, probabilities.tolist(), classes, linear_contributions)
        if scoring.classes is None:  # the prediction, or the rate exp(score) of counts (predict_mean)
            predictions = INVERSE_LINKS[ensemble.link](scores).tolist()
            return Scores(predictions, explanations, contributions, linear_contributions=linear_contributions)
        labels = [scoring.classes[positive] for positive in (scores > 0.0).tolist()]
        return Scores(
            labels, explanations, contributions, probability(scores).tolist(), scoring.classes, linear_contributions
        )


def longest_rule(ensemble: RuleEnsemble) -> int:
    """The most conditions of any rule of ``ensemble`` (0 without rules)."""
    return max((len(rule.conditions) for rule in ensemble.rules), default=0)


def check_numeric_values(encoding: TableEncoding, table: Mapping[str, Sequence], location: str) -> None:
    """Refuse booleans in numeric columns (JSON ``true`` is no number, though Python would read it as 1)."""
    faults = [
        FieldFault(f"{location}.{column.name}", "true/false in a numeric column", "send numbers (or null)")
        for column in encoding.columns
        if column.kind == "numeric"
        and column.name in table
        and any(isinstance(value, bool) for value in table[column.name])
    ]
    if faults:
        raise Invalid("Some values are not numbers.", faults)
