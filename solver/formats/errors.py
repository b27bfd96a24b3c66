"""The error every loader raises, and TreeEnsemble's validation errors re-pointed at the upload."""

from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from .._validation import SchemaError
from ..forest import TreeEnsemble
from ..forest_schema import ForestSchemaError, Tree


class ForestFormatError(SchemaError):
    """An upload that cannot be turned into a forest.

    ``reason``: ``"unsupported"`` (not a format we accept, pickles included), ``"invalid"`` (a
    recognized format whose content is invalid or unsupported) or ``"too_large"`` (the file, or what
    it inflates to, is larger than ``max_bytes``). ``field``: a JSON pointer into the
    upload such as ``/learner/gradient_booster/model/trees/3/left_children/5``, ``"file"`` for the
    upload as a whole, or ``"format"`` for the declared format. ``detail``: what is wrong and how
    to fix it.
    """

    def __init__(self, field: str, detail: str, reason: Literal["unsupported", "invalid", "too_large"] = "invalid"):
        super().__init__(field, detail)
        self.reason = reason

    def __str__(self) -> str:  # the field helps when the error is logged
        return f"{self.detail} (field: {self.field})"


def pointer(path: str, key) -> str:
    """The JSON pointer of ``key`` inside the entry at ``path``."""
    return f"{path}/{str(key).replace('~', '~0').replace('/', '~1')}"


def entry_error(field: str, detail: str) -> ForestFormatError:
    """The error of a check that describes the entry at ``field`` (``detail``: "is 3 but must be ...")."""
    return ForestFormatError(field, f"{field}: {detail}")


def in_upload(error: ForestSchemaError, field: str) -> ForestFormatError:
    """TreeEnsemble's ``error`` about the entry at ``field`` of the upload."""
    return entry_error(field, error.detail) if field != "file" else ForestFormatError(field, str(error))


def checked_ensemble(
    trees: Sequence[Tree],
    top_level: Mapping[str, str],
    tree_field: Callable[[list[str]], str],
    limits: Mapping[str, int],
    **ensemble,
) -> TreeEnsemble:
    """``TreeEnsemble(trees, **ensemble, **limits)``, its validation error pointed at the upload.

    TreeEnsemble names entries by paths such as ``n_features``, ``feature_names/3`` or
    ``trees/2/feature/7``: a top-level key maps through ``top_level`` (the rest of the path
    appended), ``trees/...`` through ``tree_field`` (given the parts after ``trees``), anything
    else to ``"file"``.
    """
    try:
        return TreeEnsemble(trees, **ensemble, **limits)
    except ForestSchemaError as error:
        key, *rest = error.field.split("/")
        if key == "trees":
            field = tree_field(rest)
        else:
            field = "/".join([top_level[key], *rest]) if key in top_level else "file"
        raise in_upload(error, field) from None
