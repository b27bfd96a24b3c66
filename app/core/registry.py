"""Model names: each promotion is a numbered version of a tenant's name; aliases (``champion``, ``staging``) point
at versions and are moved through the API; every change is recorded in the name's history.

A name resolves to its latest version, a numbered one, or an alias's (MLflow's ``models:/name``,
``models:/name/3``, ``models:/name@champion``). Version numbers are never reused (``model-version:{name}``
counts them). Setting an alias and deleting a version are Redis transactions watching the name's versions and
aliases, so an alias never points at a deleted version: deleting a version an alias points at is a Conflict
naming the alias (move or remove it first).
"""

import re
import time
from dataclasses import dataclass

from pydantic import Field
from redis import Redis
from redis.client import Pipeline

from app.core.blobs import Document
from app.core.errors import Conflict, FieldFault, Invalid, NotFound
from app.core.keys import Keys
from app.core.replies import members

ALIAS_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"
# "latest" and version-like words would read as a version in a model URI (MLflow refuses them too)
RESERVED_ALIAS = re.compile(r"^(latest|v?\d+)$", re.IGNORECASE)
HISTORY_LENGTH = 1000  # the newest events kept per name


@dataclass(frozen=True)
class ModelRef:
    """A name with at most one of a version and an alias; neither: the latest version."""

    name: str
    version: int | None = None
    alias: str | None = None

    def __str__(self) -> str:  # MLflow's model URI without the scheme
        if self.alias is not None:
            return f"{self.name}@{self.alias}"
        return self.name if self.version is None else f"{self.name}/{self.version}"


class VersionEntry(Document):
    version: int
    model_id: str


class NameEvent(Document):
    at: float = Field(description="unix time")
    event: str = Field(
        description="version_added, version_deleted, alias_set (new alias or moved: previous_version says which), "
        "alias_removed"
    )
    version: int | None = None
    alias: str | None = None
    previous_version: int | None = None
    model_id: str | None = None


class RegisteredModel(Document):
    name: str
    latest_version: int | None = Field(description="the highest version not deleted; null once all are")
    versions: list[VersionEntry] = Field(description="newest first")
    aliases: dict[str, int] = Field(description="alias -> version")
    history: list[NameEvent] = Field(description=f"what happened to the name, oldest first (the last {HISTORY_LENGTH})")


class ModelRegistry:
    def __init__(self, redis: Redis, keys: Keys):
        self.redis = redis
        self.keys = keys

    def add_version(self, tenant: str, name: str, version: int, model_id: str, at: float | None = None) -> None:
        event = NameEvent(at=at or time.time(), event="version_added", version=version, model_id=model_id)
        with self.redis.pipeline(transaction=True) as pipe:  # the version and its event at once
            pipe.hset(self.keys.name_versions(tenant, name), str(version), model_id)
            self._record(tenant, name, event, pipe)
            pipe.execute()

    def claim_earlier_models(self, tenant: str) -> bool:
        """True for the one caller ever that is to register the tenant's models promoted before names were
        registered (``add_version`` each): a marker set once."""
        return bool(self.redis.set(self.keys.names_registered(tenant), 1, nx=True))

    def resolve(self, ref: ModelRef, *, tenant: str) -> tuple[str, int]:
        """(model id, version) that ``ref`` names now: NotFound naming the version, alias or name."""
        versions_key = self.keys.name_versions(tenant, ref.name)
        if ref.alias is not None:
            aliased = self.redis.hget(self.keys.name_aliases(tenant, ref.name), ref.alias)
            if aliased is None:
                raise NotFound(
                    "alias",
                    str(ref),
                    "alias",
                    f"list the aliases of '{ref.name}' (GET /v1/registered-models/{ref.name})",
                )
            ref = ModelRef(ref.name, version=int(aliased))  # an alias's version is never deleted (remove_version)
        if ref.version is not None:
            model_id = self.redis.hget(versions_key, str(ref.version))
            if model_id is None:
                raise NotFound(
                    "version",
                    str(ref),
                    "version",
                    f"list the versions of '{ref.name}' (GET /v1/registered-models/{ref.name})",
                )
            return _text(model_id), ref.version
        stored = _versions(self.redis.hgetall(versions_key))
        if not stored:
            raise _unknown_name(ref.name)
        latest = max(stored)
        return stored[latest], latest

    def set_alias(self, tenant: str, name: str, alias: str, version: int) -> RegisteredModel:
        """Point ``alias`` at ``version`` (an existing one); setting it where it already points changes nothing."""
        if not re.match(ALIAS_PATTERN, alias) or RESERVED_ALIAS.match(alias):
            raise Invalid(
                "This alias is not allowed.",
                [
                    FieldFault(
                        "alias",
                        f"'{alias}'",
                        "use a letter then letters, digits, '_' or '-' (at most 64), not 'latest' nor a version "
                        "like 'v3'",
                    )
                ],
            )
        versions_key, aliases_key = self.keys.name_versions(tenant, name), self.keys.name_aliases(tenant, name)

        def point(pipe: Pipeline) -> None:
            model_id = pipe.hget(versions_key, str(version))
            if model_id is None:
                raise NotFound("version", f"{name}/{version}", "version", f"set the alias to a version of '{name}'")
            previous = pipe.hget(aliases_key, alias)
            if previous is not None and int(previous) == version:
                return
            event = NameEvent(
                at=time.time(),
                event="alias_set",
                alias=alias,
                version=version,
                previous_version=None if previous is None else int(previous),
                model_id=_text(model_id),
            )
            pipe.multi()
            pipe.hset(aliases_key, alias, str(version))
            self._record(tenant, name, event, pipe)

        self.redis.transaction(point, versions_key, aliases_key)
        return self.get(tenant, name)

    def remove_alias(self, tenant: str, name: str, alias: str) -> None:
        """Remove ``alias`` (nothing happens where it is not set: removing twice is one removal)."""
        aliases_key = self.keys.name_aliases(tenant, name)

        def remove(pipe: Pipeline) -> None:
            version = pipe.hget(aliases_key, alias)
            if version is None and not pipe.exists(self.keys.name_history(tenant, name)):
                raise _unknown_name(name)
            if version is None:
                return
            pipe.multi()
            pipe.hdel(aliases_key, alias)
            event = NameEvent(at=time.time(), event="alias_removed", alias=alias, version=int(version))
            self._record(tenant, name, event, pipe)

        self.redis.transaction(remove, aliases_key)

    def remove_version(self, tenant: str, name: str, version: int, model_id: str) -> None:
        """Unregister a version about to be deleted: a Conflict naming the aliases that point at it."""
        versions_key, aliases_key = self.keys.name_versions(tenant, name), self.keys.name_aliases(tenant, name)

        def remove(pipe: Pipeline) -> None:
            pointing = _aliases_at(pipe.hgetall(aliases_key), version)
            if pointing:
                raise Conflict(
                    f"Version {version} of '{name}' is what {', '.join(pointing)} point(s) at.",
                    [
                        FieldFault(
                            f"aliases.{alias}",
                            f"points at version {version}",
                            f"move it (PUT /v1/registered-models/{name}/aliases/{alias}) or remove it first",
                        )
                        for alias in pointing
                    ],
                )
            pipe.multi()
            pipe.hdel(versions_key, str(version))
            event = NameEvent(at=time.time(), event="version_deleted", version=version, model_id=model_id)
            self._record(tenant, name, event, pipe)

        self.redis.transaction(remove, versions_key, aliases_key)

    def get(self, tenant: str, name: str) -> RegisteredModel:
        with self.redis.pipeline(transaction=True) as pipe:
            pipe.hgetall(self.keys.name_versions(tenant, name))
            pipe.hgetall(self.keys.name_aliases(tenant, name))
            pipe.lrange(self.keys.name_history(tenant, name), 0, -1)
            stored, aliases, history = pipe.execute()
        if not history:
            raise _unknown_name(name)
        versions = _versions(stored)
        return RegisteredModel(
            name=name,
            latest_version=max(versions, default=None),
            versions=[VersionEntry(version=v, model_id=versions[v]) for v in sorted(versions, reverse=True)],
            aliases={alias: int(version) for alias, version in sorted(_pairs(aliases))},
            history=[NameEvent.model_validate_json(event) for event in history],
        )

    def names(self, tenant: str, limit: int = 100) -> list[RegisteredModel]:
        """The tenant's names, the most recently changed first."""
        names = members(self.redis.zrevrange(self.keys.model_names(tenant), 0, limit - 1))
        return [self.get(tenant, name) for name in names]

    def aliases_of(self, tenant: str, name: str, version: int) -> list[str]:
        return _aliases_at(self.redis.hgetall(self.keys.name_aliases(tenant, name)), version)

    def _record(self, tenant: str, name: str, event: NameEvent, pipe: Pipeline) -> None:
        """Queue ``event`` in the name's history (the newest HISTORY_LENGTH kept) on ``pipe``'s transaction."""
        history_key = self.keys.name_history(tenant, name)
        pipe.rpush(history_key, event.model_dump_json(exclude_none=True))
        pipe.ltrim(history_key, -HISTORY_LENGTH, -1)
        pipe.zadd(self.keys.model_names(tenant), {name: event.at})


def _unknown_name(name: str) -> NotFound:
    return NotFound("model name", name, "name", "promote a job step under this name, or list the names")


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _pairs(mapping: dict) -> list[tuple[str, str]]:
    return [(_text(k), _text(v)) for k, v in mapping.items()]


def _aliases_at(aliases: dict, version: int) -> list[str]:
    """The aliases of an alias -> version hash that point at ``version``, sorted."""
    return sorted(alias for alias, pointed in _pairs(aliases) if int(pointed) == version)


def _versions(mapping: dict) -> dict[int, str]:
    return {int(version): model_id for version, model_id in _pairs(mapping)}
