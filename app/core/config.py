"""Service settings, read from the environment (prefix FIRE_) by pydantic-settings. Every default is written
here once; docs/service.md lists them."""

from functools import lru_cache
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from solver.encoding import DEFAULT_MAX_CATEGORIES, CategoricalPolicy

MiB = 1024 * 1024
LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"  # every process `fire-rules` starts


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FIRE_", env_file=".env", extra="ignore")

    # ---- where things live ----
    redis_url: str | None = Field(
        None, description="Durable Redis (artifacts, queue). None: start an embedded redis-server child."
    )
    cache_redis_url: str | None = Field(
        None, description="Separate LRU Redis for the leaf-matrix cache. None: the durable Redis."
    )
    data_dir: Path = Field(Path(".fire-data"), description="Embedded Redis data (AOF) and logs.")
    key_prefix: str = Field("fire:", description="Prefix of every key the service writes (besides RQ's own).")
    queue_name: str = "fire"
    chunk_bytes: int = Field(16 * MiB, description="Largest Redis value written; larger ones are chunked.")

    # ---- Redis client behaviour ----
    redis_socket_timeout: float = Field(3.0, gt=0, description="Seconds one Redis call may take before it fails.")
    redis_connect_timeout: float = Field(1.0, gt=0, description="Seconds to open a Redis connection.")
    redis_outage_seconds: float = Field(
        30.0,
        gt=0,
        description="Workers keep retrying a failed Redis call this long (with backoff) before the "
        "call fails; the API answers 503 at once instead.",
    )
    cache_timeout_seconds: float = Field(1.0, gt=0, description="Timeout of a leaf-matrix cache call.")
    cache_backoff_seconds: float = Field(
        30.0, ge=0, description="After a cache failure, jobs skip the cache this long (they build the matrix)."
    )

    # ---- tenants ----
    api_keys: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated `TENANT=KEY`, `TENANT=sha256:HEX` or bare `KEY` "
        "(its own tenant). Empty with no keys file: no authentication, one "
        "tenant, and `serve` binds to loopback only.",
    )
    api_keys_file: Path | None = Field(None, description="A file of the same entries, one per line (# comments).")
    metrics_keys: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated operator keys, `NAME=KEY`, `NAME=sha256:HEX` or bare `KEY` (as FIRE_API_KEYS): "
        "each reads every tenant's /metrics series and nothing else. With any key configured (here or as a tenant's), "
        "/metrics needs one, and a tenant's key sees its own series only; with none, /metrics is open.",
    )

    # ---- limits (each a clear 4xx) ----
    max_upload_bytes: int = Field(256 * MiB, description="Upload body bytes (413).")
    max_inflated_bytes: int = Field(
        512 * MiB,
        description="Bytes a gzipped upload may inflate to, and a Parquet table take once read (413, from its "
        "metadata: pages uncompressed, or 8 bytes a cell).",
    )
    max_rows: int = Field(5_000_000, description="Rows of an uploaded table (413).")
    max_columns: int = Field(5_000, description="Columns of an uploaded table (413).")
    max_categories: int = Field(
        DEFAULT_MAX_CATEGORIES, description="A text column with more distinct values is refused."
    )
    max_classes: int = Field(
        50,
        ge=3,
        description="A multiclass target (text labels, or task=multiclass) with more distinct values is refused (422).",
    )
    max_trees: int = Field(5_000, description="Trees of a trained or uploaded forest (422).")
    max_tree_depth: int = Field(32, description="Depth of a trained or uploaded tree (422).")
    max_leaves: int = Field(1_000_000, description="Leaves (candidate rules) of a forest (422).")
    max_forest_nodes: int = Field(2_000_000, description="Nodes of an uploaded forest (422).")
    max_lambdas: int = Field(1_000, description="Steps of one path (422).")
    max_grid_cells: int = Field(64, description="Cells of one grid (422).")
    max_active_jobs: int = Field(32, description="Queued or running submissions per tenant (429 past it).")
    max_active_units: int = Field(
        20_000,
        ge=1,
        description="Queued or running work units per tenant, each a job's piece a worker runs: a batch's chunks, a "
        "cross-validation's folds and refit, a grid's cells, a path, a forest to train, each stability fit (429 past "
        "it; 413 for one submission of more). The default admits the largest batch (FIRE_MAX_BATCH_CHUNKS) and more.",
    )
    max_json_bytes: int = Field(1 * MiB, description="A JSON request body other than scoring (413).")
    max_scoring_bytes: int = Field(32 * MiB, description="A scoring request body (413).")
    max_scoring_rows: int = Field(100_000, description="Rows of one scoring request (413).")
    max_batch_bytes: int = Field(
        4096 * MiB,
        description="A batch scoring upload (POST /v1/models/{ref}/batch, 413): spooled to a temporary file and "
        "split into chunks in Redis, never held whole in memory, hence its own limit beside FIRE_MAX_UPLOAD_BYTES. "
        "A Parquet file's columns the model reads count as they take once read (from its metadata: pages "
        "uncompressed, or 8 bytes a cell).",
    )
    max_batch_rows: int = Field(
        20_000_000,
        ge=1,
        description="Rows of one batch scoring job (413): a Parquet file's from its metadata before any row is read "
        "(and at most one row per byte of the file: values that repeat compress to almost nothing, yet each row is "
        "scored), a CSV's counted as they are read.",
    )
    batch_chunk_rows: int = Field(
        100_000, ge=1, description="Rows of one chunk job of a batch scoring job, unless the request asks otherwise."
    )
    batch_min_chunk_rows: int = Field(
        30_000,
        ge=1,
        description="The fewest rows of one chunk job a batch request may ask for (422 below): below it a chunk job's "
        "own cost (a work horse forked, the model loaded, its records and parts in Redis) is more than its rows' "
        "scoring (measured: one chunk job costs as much as about 35,000 rows of a 20-column table, "
        "bench/results/batch_chunk_overhead.md).",
    )
    max_batch_chunks: int = Field(
        10_000, ge=1, description="Chunk jobs of one batch scoring job (413 past it: ask for larger chunks)."
    )

    # ---- the API process ----
    categorical: CategoricalPolicy = "onehot"
    cpu_threads: int = Field(
        2,
        ge=1,
        description="Threads of each of the API's two lanes of CPU work off the event loop (uploads and batch files; "
        "scoring bodies); more wait their turn, and with API keys a tenant holds at most all of a lane's but one.",
    )
    inline_scoring_bytes: int = Field(
        64 * 1024, description="Scoring bodies up to this size are scored on the event loop (faster than a thread hop)."
    )
    model_cache_size: int = 64
    watchdog_seconds: float = Field(10.0, description="The API checks running jobs for lost workers this often.")
    api_workers: int = Field(1, ge=1, description="API processes `serve` runs on its port.")
    embedded: bool = Field(False, description="Set by `serve` when it runs Redis and the workers itself.")

    # ---- monitoring (app.core.drift, app.core.monitoring) ----
    monitoring: bool = Field(
        True, description="Count each scored row's fired rules and column bins for drift (false: count nothing)."
    )
    drift_window_seconds: int = Field(
        60, ge=1, le=3600, description="Drift counts are kept per window of this many seconds (and per hour)."
    )
    drift_flush_seconds: float = Field(
        5.0, gt=0, description="An API process adds its drift counts to Redis this often, and at shutdown."
    )
    drift_retention_days: int = Field(
        90, ge=1, description="Hourly drift counts are kept this long (the finer windows two days)."
    )
    drift_summary_seconds: int = Field(
        24 * 3600, ge=60, description="A model document's drift flags cover this many seconds up to now."
    )
    drift_metrics_seconds: int = Field(3600, ge=60, description="/metrics' drift gauges cover this many seconds.")
    drift_metrics_models: int = Field(
        20, ge=0, description="/metrics' drift gauges cover at most this many models, the last scored first."
    )
    drift_metrics_per_model: int = Field(
        10,
        ge=0,
        description="... and of each, at most this many rules (those farthest from their training rate) and as many "
        "columns (the highest PSI).",
    )

    # ---- jobs and workers ----
    cache_ttl_seconds: int = 24 * 3600
    embedded_workers: int = 2
    job_timeout: int = Field(3600, description="Seconds a job may run; it stops within one step or phase past it.")
    result_ttl_seconds: int = Field(30 * 24 * 3600, description="How long job records and results are kept.")
    heartbeat_seconds: int = Field(
        5, ge=1, description="Workers refresh their own and their job's heartbeat this often."
    )
    heartbeat_ttl_seconds: float = Field(
        20.0, description="A worker or a running job without heartbeat this long is lost."
    )
    max_job_attempts: int = Field(2, description="A job whose worker died is run again until this many tries.")
    worker_nice: int = Field(
        10,
        ge=0,
        le=19,
        description="Workers lower their CPU priority by this much so that "
        "the API stays responsive on a shared machine.",
    )

    @field_validator("api_keys", "metrics_keys", mode="before")
    @classmethod
    def split_comma_separated(cls, value):
        if isinstance(value, str):
            return [key.strip() for key in value.split(",") if key.strip()]
        return value


@lru_cache
def get_settings() -> Settings:
    return Settings()
