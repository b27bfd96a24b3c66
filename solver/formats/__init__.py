"""Safe loaders for user-supplied tree ensembles.

The web service accepts forests uploaded by users and must never run code they sent, so nothing here
unpickles anything: every format is parsed as data, and the trees it holds are validated by
:class:`solver.TreeEnsemble` with one set of size limits (tree depth <= ``max_depth``, total nodes
<= ``max_nodes``, ``n_features`` <= ``solver.forest.DEFAULT_MAX_FEATURES``; the upload itself <=
``max_bytes``).

``load_forest(data, filename=None, declared_format=None) -> TreeEnsemble`` reads

* ``"fire-json"``: our own schema (:mod:`.fire_json`);
* ``"xgboost-json"`` / ``"xgboost-ubjson"``: an XGBoost model (:mod:`.xgboost`, :mod:`.ubjson`);
* ``"lightgbm-json"``: LightGBM's ``dump_model()`` as JSON (:mod:`.lightgbm`);
* ``"skops"``: a ``skops.io`` dump of a scikit-learn tree regressor (:mod:`.skops`).

``match_feature_names(forest, names)`` renames an uploaded forest's features to a table's columns where they
are the same up to how the training library wrote them (LightGBM: spaces as ``_``; positional names) and
returns the renames for the forest's provenance (:mod:`.names`).

Pickles (plain, joblib, compressed) are recognized and refused; a gzip-compressed upload of any
supported format is accepted, decompressed within ``max_bytes`` (:mod:`.sniff`; refused as soon as
it inflates past them). Every failure is a :class:`ForestFormatError` (a ``ValueError``) with
``reason`` (``"unsupported"``: not a format we accept, pickles included; ``"invalid"``: a recognized
format whose content is invalid or unsupported; ``"too_large"``: past ``max_bytes``), ``field`` (a
JSON pointer into the upload, ``"file"`` or ``"format"``) and ``detail``.
"""

from ..forest import TreeEnsemble
from ..forest_schema import DEFAULT_MAX_DEPTH, DEFAULT_MAX_FEATURES, DEFAULT_MAX_NODES
from . import fire_json, lightgbm, skops, xgboost
from .errors import ForestFormatError
from .names import match_feature_names
from .skops import SKOPS_ALLOWED_TYPES
from .sniff import as_bytes, pickle_refused, sniff

__all__ = ["FORMATS", "SKOPS_ALLOWED_TYPES", "ForestFormatError", "detect_format", "load_forest", "match_feature_names"]

# format -> loader(payload, limits); skops.load also takes max_bytes
_LOADERS = {
    "fire-json": fire_json.load,
    "xgboost-json": xgboost.load,
    "xgboost-ubjson": xgboost.load_ubjson,
    "lightgbm-json": lightgbm.load,
}
FORMATS = (*_LOADERS, "skops")
DEFAULT_MAX_BYTES = 512 * 1024 * 1024

_ALIASES = {
    "fire-json": "fire-json",
    "fire": "fire-json",
    "fire-forest": "fire-json",
    "json": None,  # generic: sniff which JSON
    "xgboost-json": "xgboost-json",
    "xgboost": "xgboost-json",
    "xgb": "xgboost-json",
    "xgboost-ubjson": "xgboost-ubjson",
    "xgboost-ubj": "xgboost-ubjson",
    "ubj": "xgboost-ubjson",
    "ubjson": "xgboost-ubjson",
    "lightgbm-json": "lightgbm-json",
    "lightgbm": "lightgbm-json",
    "lgb": "lightgbm-json",
    "lgbm": "lightgbm-json",
    "skops": "skops",
    "sklearn": "skops",
    "scikit-learn": "skops",
}
_PICKLE_NAMES = {"pickle", "pkl", "joblib", "cloudpickle", "dill", "sav"}
_XGBOOST_FORMATS = {"xgboost-json", "xgboost-ubjson"}


def detect_format(data: bytes, filename: str | None = None) -> str | None:
    """Name of the upload's format: one of :data:`FORMATS`, ``"pickle"``, or ``None`` when it is not
    recognized (or is unreadable JSON). Never loads anything; JSON is parsed."""
    try:
        fmt, _ = sniff(as_bytes(data), filename, DEFAULT_MAX_BYTES)
    except ForestFormatError:
        return None
    return fmt


def load_forest(
    data: bytes,
    filename: str | None = None,
    declared_format: str | None = None,
    *,
    max_nodes: int = DEFAULT_MAX_NODES,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> TreeEnsemble:
    """Parse an uploaded forest into a :class:`solver.TreeEnsemble` without running any code from
    it. ``declared_format`` (optional; one of :data:`FORMATS` or an alias such as "xgboost",
    "lightgbm", "sklearn") must match the content. Raises :class:`ForestFormatError`."""
    data = as_bytes(data)
    if len(data) > max_bytes:
        raise ForestFormatError(
            "file", f"the file has {len(data)} bytes, more than the limit of {max_bytes}.", "too_large"
        )
    declared = _declared(declared_format)
    fmt, payload = sniff(data, filename, max_bytes)
    if isinstance(payload, ForestFormatError):
        raise payload
    if declared is not None and fmt != declared and not {fmt, declared} <= _XGBOOST_FORMATS:
        raise ForestFormatError("format", f"the file was declared as {declared} but its content is {fmt}.")
    limits = {"max_nodes": max_nodes, "max_depth": max_depth, "max_features": DEFAULT_MAX_FEATURES}
    try:
        if fmt == "skops":
            return skops.load(payload, limits, max_bytes)
        return _LOADERS[fmt](payload, limits)
    except ForestFormatError:
        raise
    except RecursionError:
        raise ForestFormatError("file", "the document is nested too deeply.") from None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError) as e:
        raise ForestFormatError("file", f"invalid {fmt} model: {type(e).__name__}: {e}") from None


def _declared(declared_format: str | None) -> str | None:
    """The format a declared name stands for (None: sniff it)."""
    if declared_format is None or not str(declared_format).strip():
        return None
    key = str(declared_format).strip().lower()
    if key in _PICKLE_NAMES:
        raise pickle_refused("declared as a pickle")
    if key not in _ALIASES:
        raise ForestFormatError(
            "format", f"unknown format '{str(declared_format)[:40]}'; supported: {', '.join(FORMATS)}.", "unsupported"
        )
    return _ALIASES[key]
