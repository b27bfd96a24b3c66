"""The Redis key layout: every key the service writes (besides RQ's own), in one place.

All keys start with ``FIRE_KEY_PREFIX`` (``fire:`` by default). Objects are keyed by id; a tenant's indexes
and names sit under its scope (``{prefix}tenant:{tenant}:``), except the default tenant's, which keep the keys
written before tenants existed (``{prefix}``). Blobs (``BlobStore``) add ``:{chunk}`` to their key.
Every store builds its ``Keys`` from the settings (``Keys.from_settings``) and names no key itself.

====================================  ==========================================================================
key                                   holds
====================================  ==========================================================================
``dataset:{id}``                      a dataset's info (blob); ``dataset:{id}:arrays`` its X and y (blob)
``forest:{id}``                       a forest's info (blob); ``forest:{id}:trees`` its trees (blob)
``model:{id}``                        a promoted model (blob); ``:profile`` its training profile (blob,
                                      ``app.core.drift``); ``:monitoring`` its drift thresholds (blob)
``drift:{model}:{src}:{s}:{t}``       rows counted for drift (source ``src``: live or batch) in the window of
                                      ``s`` seconds from ``t`` (hash of counts, ``app.core.monitoring``; expires)
``drift-models``                      models by when their drift counts were last added (sorted set)
``job:{id}``                          a job record (hash of JSON fields, ``JobRecords``)
``job:{id}:heartbeat``                the attempt a live worker runs (expires after FIRE_HEARTBEAT_TTL_SECONDS)
``job:{id}:cancel``                   set when a cancel was asked for (the path callback reads it)
``job:{id}:waiting``                  what a job that waits for others (a parent, its cells; the cells of a
                                      training job) still waits for: ``left:{kind}`` jobs of that kind not
                                      ended, ``total:{kind}`` as recorded (hash of counters, ``JobRecords``)
``job:{id}:result``                   a finished job's result (blob); ``job:{id}:rules`` its path's rules, a
                                      part per step (blob of parts; ``:coefs``: weights of paths run before)
``job:{id}:batch-in:{i}``             a batch scoring job's chunk i of input rows (blob, Arrow IPC);
                                      ``:batch-out:{i}`` its scored rows; ``:batch-failed`` the chunks whose
                                      rows could not be scored (sorted set by chunk index); ``:batch-counts:{i}``
                                      the drift counts of chunk i's rows (hash, ``app.core.monitoring``), added
                                      to the model's windows once the batch succeeded; ``:batch-counted`` set then
                                      (they are added once)
``jobs``                              every job by creation time (sorted set): the metrics' view
``unfinished-jobs``                   every queued or running job (sorted set): the watchdog's view
``queues``                            every RQ queue a job was put on: the pools' tenant queues (set,
                                      ``app.core.queues``)
``queue-turn:{pool}``                 the pool's queue a worker took a job from last (string)
``taken-jobs``                        runs workers took from a queue: RQ id -> the worker's name, until the
                                      run ends (hash; the watchdog's view of a worker lost before the claim)
``leafcache:{forest}:{dataset}``      cached leaf indices of a dataset's rows in a forest (blob, cache Redis)
``stats``                             counters (hash): leaf-cache hits, misses and failures
``workers``, ``worker-states``        worker heartbeats (sorted set) and their last states (hash)
scope ``datasets``/``forests``/       the tenant's datasets, forests, models, jobs by time (sorted sets)
``models``/``jobs``
scope ``active-jobs``                 the tenant's admitted, unfinished submissions (sorted set)
scope ``active-units``                their work units: submission -> chunks, folds, cells and stability fits
                                      (hash)
scope ``model-version:{name}``        the last version number given to a model name (counter)
scope ``model-names``                 the tenant's model names by last change (sorted set, ``ModelRegistry``)
scope ``model-name:{name}:versions``  version -> model id (hash); ``:aliases`` alias -> version (hash);
                                      ``:history`` the name's events, oldest first (list of JSON)
scope ``model-names-registered``      set once the models promoted before names were registered are (marker)
scope ``idempotency:{kind}:{hash}``   the id an idempotency key was given (string)
====================================  ==========================================================================
"""

from dataclasses import dataclass

from app.core.config import Settings
from app.core.tenants import DEFAULT_TENANT


@dataclass(frozen=True)
class Keys:
    """The keys under one ``prefix`` (the settings' ``key_prefix``)."""

    prefix: str

    @classmethod
    def from_settings(cls, settings: Settings) -> "Keys":
        return cls(settings.key_prefix)

    def scope(self, tenant: str) -> str:
        """Prefix of a tenant's own keys; the default tenant keeps the keys written before tenants existed."""
        return self.prefix if tenant == DEFAULT_TENANT else f"{self.prefix}tenant:{tenant}:"

    # ---- datasets, forests, models --------------------------------------------------------------------------

    def dataset(self, dataset_id: str) -> str:
        return f"{self.prefix}dataset:{dataset_id}"

    def dataset_arrays(self, dataset_id: str) -> str:
        return f"{self.prefix}dataset:{dataset_id}:arrays"

    def datasets(self, tenant: str) -> str:
        return f"{self.scope(tenant)}datasets"

    def forest(self, forest_id: str) -> str:
        return f"{self.prefix}forest:{forest_id}"

    def forest_trees(self, forest_id: str) -> str:
        return f"{self.prefix}forest:{forest_id}:trees"

    def forests(self, tenant: str) -> str:
        return f"{self.scope(tenant)}forests"

    def model(self, model_id: str) -> str:
        return f"{self.prefix}model:{model_id}"

    def models(self, tenant: str) -> str:
        return f"{self.scope(tenant)}models"

    def model_version(self, tenant: str, name: str) -> str:
        return f"{self.scope(tenant)}model-version:{name}"

    def model_names(self, tenant: str) -> str:
        return f"{self.scope(tenant)}model-names"

    def name_versions(self, tenant: str, name: str) -> str:
        return f"{self.scope(tenant)}model-name:{name}:versions"

    def name_aliases(self, tenant: str, name: str) -> str:
        return f"{self.scope(tenant)}model-name:{name}:aliases"

    def name_history(self, tenant: str, name: str) -> str:
        return f"{self.scope(tenant)}model-name:{name}:history"

    def names_registered(self, tenant: str) -> str:
        return f"{self.scope(tenant)}model-names-registered"

    # ---- drift ------------------------------------------------------------------------------------------------

    def model_profile(self, model_id: str) -> str:
        return f"{self.prefix}model:{model_id}:profile"

    def model_monitoring(self, model_id: str) -> str:
        return f"{self.prefix}model:{model_id}:monitoring"

    def drift_window(self, model_id: str, source: str, seconds: int, start: int) -> str:
        return f"{self.prefix}drift:{model_id}:{source}:{seconds}:{start}"

    def drift_windows(self, model_id: str) -> str:
        """Pattern of every drift window of a model."""
        return f"{self.prefix}drift:{model_id}:*"

    @property
    def drift_models(self) -> str:
        return f"{self.prefix}drift-models"

    # ---- jobs ------------------------------------------------------------------------------------------------

    def job(self, job_id: str) -> str:
        return f"{self.prefix}job:{job_id}"

    def job_heartbeat(self, job_id: str) -> str:
        return f"{self.prefix}job:{job_id}:heartbeat"

    def job_cancel(self, job_id: str) -> str:
        return f"{self.prefix}job:{job_id}:cancel"

    def job_waiting(self, job_id: str) -> str:
        return f"{self.prefix}job:{job_id}:waiting"

    def job_result(self, job_id: str) -> str:
        return f"{self.prefix}job:{job_id}:result"

    def job_rules(self, job_id: str) -> str:
        return f"{self.prefix}job:{job_id}:rules"

    def job_weights(self, job_id: str) -> str:
        """Where paths kept their weights before their rules were stored (deleted with the job)."""
        return f"{self.prefix}job:{job_id}:coefs"

    def batch_input(self, job_id: str, chunk: int) -> str:
        return f"{self.prefix}job:{job_id}:batch-in:{chunk}"

    def batch_output(self, job_id: str, chunk: int) -> str:
        return f"{self.prefix}job:{job_id}:batch-out:{chunk}"

    def batch_failed(self, job_id: str) -> str:
        return f"{self.prefix}job:{job_id}:batch-failed"

    def batch_counts(self, job_id: str, chunk: int) -> str:
        return f"{self.prefix}job:{job_id}:batch-counts:{chunk}"

    def batch_counted(self, job_id: str) -> str:
        return f"{self.prefix}job:{job_id}:batch-counted"

    @property
    def all_jobs(self) -> str:
        return f"{self.prefix}jobs"

    @property
    def unfinished_jobs(self) -> str:
        return f"{self.prefix}unfinished-jobs"

    def jobs(self, tenant: str) -> str:
        """The tenant's jobs (the default tenant's are read from the index of every job, filtered)."""
        return f"{self.scope(tenant)}jobs"

    def active_jobs(self, tenant: str) -> str:
        return f"{self.scope(tenant)}active-jobs"

    def active_units(self, tenant: str) -> str:
        return f"{self.scope(tenant)}active-units"

    @property
    def queues(self) -> str:
        return f"{self.prefix}queues"

    def queue_turn(self, pool: str) -> str:
        return f"{self.prefix}queue-turn:{pool}"

    @property
    def taken_jobs(self) -> str:
        return f"{self.prefix}taken-jobs"

    def idempotency(self, tenant: str, kind: str, key_hash: str) -> str:
        return f"{self.scope(tenant)}idempotency:{kind}:{key_hash}"

    # ---- cache and workers -----------------------------------------------------------------------------------

    def leaf_cache(self, forest_id: str, dataset_id: str) -> str:
        return f"{self.prefix}leafcache:{forest_id}:{dataset_id}"

    def leaf_caches(self, *, forest_id: str | None = None, dataset_id: str | None = None) -> str:
        """Glob pattern of the cached matrices of a forest, of a dataset, or of both (of every one without)."""
        return self.leaf_cache(forest_id or "*", dataset_id or "*")

    @property
    def stats(self) -> str:
        return f"{self.prefix}stats"

    @property
    def worker_beats(self) -> str:
        return f"{self.prefix}workers"

    @property
    def worker_states(self) -> str:
        return f"{self.prefix}worker-states"
