"""Service settings, read from the environment (prefix FIRE_) by pydantic-settings."""
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from solver.encoding import CATEGORICAL_POLICIES, DEFAULT_MAX_CATEGORIES


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FIRE_", env_file=".env", extra="ignore")

    redis_url: str | None = Field(
        None, description="Durable Redis (artifacts, queue). None: start an embedded redis-server child."
    )
    cache_redis_url: str | None = Field(
        None, description="Separate LRU Redis for the leaf-matrix cache. None: the durable Redis."
    )
    data_dir: Path = Field(Path(".fire-data"), description="Embedded Redis data (AOF) and logs.")
    key_prefix: str = Field("fire:", description="Prefix of every key the service writes (besides RQ's own).")
    queue_name: str = "fire"
    max_upload_bytes: int = 256 * 1024 * 1024
    api_keys: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Accepted X-API-Key values (comma separated). Empty: no auth."
    )
    categorical: Literal[CATEGORICAL_POLICIES] = "onehot"
    max_categories: int = Field(DEFAULT_MAX_CATEGORIES, description="A text column with more distinct values is refused.")
    cache_ttl_seconds: int = 24 * 3600
    embedded_workers: int = 2
    job_timeout: int = Field(3600, description="Seconds a job may run before the path stops at its deadline.")
    result_ttl_seconds: int = Field(30 * 24 * 3600, description="How long job records and results are kept.")
    heartbeat_seconds: int = Field(5, ge=1, description="Workers refresh a running job's heartbeat this often.")
    heartbeat_ttl_seconds: float = Field(20.0, description="A running job without heartbeat this long is lost.")
    watchdog_seconds: float = Field(10.0, description="The API checks running jobs for lost workers this often.")
    max_job_attempts: int = Field(2, description="A job whose worker died is run again until this many tries.")
    model_cache_size: int = 64
    chunk_bytes: int = Field(16 * 1024 * 1024, description="Largest Redis value written; larger ones are chunked.")

    @field_validator("api_keys", mode="before")
    @classmethod
    def split_comma_separated(cls, value):
        if isinstance(value, str):
            return [key.strip() for key in value.split(",") if key.strip()]
        return value


@lru_cache
def get_settings() -> Settings:
    return Settings()
