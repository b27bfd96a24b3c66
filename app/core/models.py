"""The model store: promotes a path step to a named, versioned model (app.core.model_documents), finds, lists,
exports and deletes models, and gives the scoring model of a model id or name reference (cached in
app.core.model_cache; scoring itself: app.core.model_scoring)."""

import logging
import time
import uuid

from app.core.blobs import BlobStore, DocumentUnreadable, brief, jsonable
from app.core.config import Settings
from app.core.datasets import DatasetInfo, DatasetStore
from app.core.drift import PROFILE_VERSION, TrainingProfile, training_profile
from app.core.drift_store import DriftStore
from app.core.errors import Expired, FieldFault, NotFound, Unreadable
from app.core.idempotency import IdempotencyKeys
from app.core.job_results import JobResults
from app.core.keys import Keys
from app.core.model_cache import ScoringCache
from app.core.model_documents import ModelInfo, ModelMetrics, ModelProvenance, longest_rule
from app.core.model_export import ModelExport, export_model
from app.core.model_scoring import ScoringModel
from app.core.registry import ModelRef, ModelRegistry, RegisteredModel
from solver import RuleEnsemble
from solver.encoding import TableEncoding
from solver.rule_types import as_json

log = logging.getLogger(__name__)


class ModelStore:
    def __init__(
        self,
        settings: Settings,
        blobs: BlobStore,
        datasets: DatasetStore,
        job_results: JobResults,
        idempotency: IdempotencyKeys,
        registry: ModelRegistry,
        drift: DriftStore,
    ):
        self.settings = settings
        self.drift = drift
        self.blobs = blobs
        self.datasets = datasets
        self.job_results = job_results
        self.idempotency = idempotency
        self.registry = registry
        self.keys = Keys.from_settings(settings)
        self.scoring_cache = ScoringCache(
            settings.model_cache_size,
            lambda model_id: self.blobs.exists(self.keys.model(model_id)),
            lambda tenant, ref: self.registry.resolve(ref, tenant=tenant)[0],
        )
        self._registered_tenants: set[str] = set()  # tenants whose earlier models are known to be registered

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
        dataset = self.datasets.find(result.dataset_id)  # its target and columns name the model's
        if dataset is None:
            raise Expired(
                f"The dataset of job {job_id} was deleted: the job's rules can no longer be promoted.",
                [FieldFault("job_id", f"dataset {result.dataset_id} deleted", "run the job again")],
            )
        model = ModelInfo(
            id=model_id,
            tenant=tenant,
            name=name,
            version=self.blobs.increment(self.keys.model_version(tenant, name)),
            description=description,
            created_at=time.time(),
            target=dataset.target,
            exposure=dataset.exposure,
            offset=dataset.offset,
            event=dataset.event,
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
                rule_step=result.rule_step,
            ),
        )
        self.drift.put_profile(model.id, self._training_profile(ensemble, dataset))
        self.blobs.put_document(self.keys.model(model.id), model)
        self.blobs.index(self.keys.models(tenant), model.id, model.created_at)
        self.registry.add_version(tenant, name, model.version, model.id)
        return model

    def _training_profile(self, ensemble: RuleEnsemble, dataset: DatasetInfo) -> TrainingProfile:
        """What the model's drift is measured against: its rules and columns on the rows of its training table."""
        X, _ = self.datasets.load_arrays(dataset.id)
        return training_profile(ensemble, dataset.encoding, X)

    def profile(self, model_id: str) -> TrainingProfile | None:
        """The model's training profile; one promoted before profiles were kept, kept with edges of an earlier
        PROFILE_VERSION, or whose stored profile cannot be read, gets it now where its dataset is still stored (else:
        the stored one, or None)."""
        try:
            profile = self.drift.profile(model_id)
        except DocumentUnreadable as error:  # taken again as one never stored is
            log.warning("the training profile of model %s is taken again: %s", model_id, error)
            profile = None
        if profile is not None and profile.version == PROFILE_VERSION:
            return profile
        model = self.find(model_id)
        dataset = None if model is None else self.datasets.find(model.provenance.dataset_id)
        if model is None or dataset is None:
            return profile
        profile = self._training_profile(RuleEnsemble.from_dict(model.ensemble), dataset)
        self.drift.put_profile(model_id, profile)
        return profile

    def find(self, model_id: str) -> ModelInfo | None:
        """The model of any tenant (None where there is none): for the service's own figures, not for a tenant;
        Unreadable where its stored document cannot be read (its owner unknown: see ``_find``)."""
        try:
            return self.blobs.get_document(self.keys.model(model_id), ModelInfo)
        except DocumentUnreadable as error:
            raise Unreadable(
                f"The stored model {model_id} cannot be read ({brief(error.cause)}).",
                [
                    FieldFault(
                        "model_id",
                        f"model {model_id}'s stored document is unreadable",
                        f"delete it (DELETE /v1/models/{model_id}) and promote its job step again; the operator's "
                        "log names the fault",
                    )
                ],
            ) from error

    def _find(self, model_id: str, tenant: str) -> ModelInfo | None:
        """The tenant's model (None for another tenant's: as though it did not exist, also where its document is
        unreadable: the tenant's index of models says whose it is)."""
        try:
            model = self.find(model_id)
        except Unreadable as error:
            if not self.blobs.indexed(self.keys.models(tenant), model_id):
                return None
            error.tenant = tenant
            raise
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
        self.scoring_cache.forget_resolution(tenant, ModelRef(name, alias=alias))
        return registered

    def remove_alias(self, name: str, alias: str, *, tenant: str) -> None:
        self.registry.remove_alias(tenant, name, alias)
        self.scoring_cache.forget_resolution(tenant, ModelRef(name, alias=alias))

    def _register_earlier_models(self, tenant: str) -> None:
        """Register the versions of models promoted before names were registered (once per tenant)."""
        if tenant in self._registered_tenants:
            return
        if self.registry.claim_earlier_models(tenant):
            for model in sorted(self.list(tenant=tenant, limit=1_000_000), key=lambda m: m.created_at):
                self.registry.add_version(tenant, model.name, model.version, model.id, model.created_at)
        self._registered_tenants.add(tenant)

    def export(self, model_id: str, format: str, *, tenant: str) -> ModelExport:
        """The model's rules as code a user deploys without us (app.core.model_export)."""
        return export_model(self.get(model_id, tenant=tenant), format)

    def list(self, *, tenant: str, limit: int = 100) -> list[ModelInfo]:
        return self.blobs.newest_documents(self.keys.models(tenant), self.keys.model, ModelInfo, limit)

    def delete(self, model_id: str, *, tenant: str) -> None:
        """Remove the model; its name's version numbers are never reused. One whose stored document cannot be read
        is removed too, its name and version found in the tenant's registry."""
        name: str | None
        version: int | None
        try:
            model = self.get(model_id, tenant=tenant)
            name, version = model.name, model.version
        except Unreadable:
            name, version = self._registered_as(model_id, tenant)
        if name is not None and version is not None:
            self.registry.remove_version(tenant, name, version, model_id)  # Conflict where an alias points
        self.blobs.delete(self.keys.model(model_id))
        self.blobs.unindex(self.keys.models(tenant), model_id)
        self.drift.delete(model_id)
        self.scoring_cache.forget_model(model_id)

    def _registered_as(self, model_id: str, tenant: str) -> tuple[str | None, int | None]:
        """(name, version) of the tenant's registry entry for ``model_id``; (None, None) where it has none."""
        for registered in self.registry.names(tenant, limit=1_000_000):
            for entry in registered.versions:
                if entry.model_id == model_id:
                    return registered.name, entry.version
        return None, None

    def recently_checked(self, target: "str | ModelRef", tenant: str) -> ScoringModel | None:
        """The cached scoring model of a model id or name reference, if seen in Redis within MODEL_RECHECK_SECONDS
        (ScoringCache.recently_checked)."""
        return self.scoring_cache.recently_checked(target, tenant)

    def scoring_model(self, target: "str | ModelRef", tenant: str) -> ScoringModel:
        """The scoring model of a model id, or of the model a name reference names now (looked up in Redis)."""
        if isinstance(target, ModelRef):
            self._register_earlier_models(tenant)
            model_id, _ = self.registry.resolve(target, tenant=tenant)
            self.scoring_cache.resolved(tenant, target, model_id)
        else:
            model_id = target
        cached = self.scoring_cache.get(model_id)
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
            model.exposure,
            model.offset,
        )
        self.scoring_cache.put(model_id, scoring)
        return scoring
