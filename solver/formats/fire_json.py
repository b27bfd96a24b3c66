"""Our own schema: a JSON object with ``"format": "fire-forest"`` as written by
``TreeEnsemble.to_dict`` (``docs/forest-schema.md``), validated by ``TreeEnsemble.from_dict``."""

from collections.abc import Mapping

from ..forest import TreeEnsemble
from ..forest_schema import ForestSchemaError
from .errors import in_upload


def load(document: dict, limits: Mapping[str, int]) -> TreeEnsemble:
    try:
        return TreeEnsemble.from_dict(document, **limits)
    except ForestSchemaError as error:
        raise in_upload(error, f"/{error.field}" if error.field else "file") from None
