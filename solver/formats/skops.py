"""scikit-learn tree regressors saved with ``skops.io.dump``, loaded only after every type and
loader in the file is checked against an allowlist."""

import io
import zipfile
import zlib
from collections.abc import Mapping
from typing import Any

from ..forest import TreeEnsemble
from ..sklearn_adapters import SKLEARN_REGRESSORS
from .errors import ForestFormatError
from .sniff import parse_json

_ESTIMATOR_TYPES = frozenset(f"{cls.__module__}.{cls.__qualname__}" for cls in SKLEARN_REGRESSORS)
_ESTIMATOR_NAMES = ", ".join(cls.__name__ for cls in SKLEARN_REGRESSORS)
# Every type (``module.qualname`` as skops writes it) that may appear in an accepted skops file,
# found empirically by dumping the fitted estimators (all losses and init estimators of
# GradientBoostingRegressor, numpy/pandas input, oob_score, RandomState random_state) with
# skops 0.16 / sklearn 1.9, plus numpy scalar types that fitted attributes may hold. Everything
# else is refused, including the sklearn types skops trusts by default (Pipeline,
# FunctionTransformer, ...).
SKOPS_ALLOWED_TYPES = _ESTIMATOR_TYPES | frozenset(
    {
        "builtins.dict",
        "builtins.list",
        "builtins.tuple",
        "builtins.str",
        "builtins.int",
        "builtins.float",
        "builtins.bool",
        "builtins.NoneType",
        "numpy.ndarray",
        "numpy.float64",
        "numpy.float32",
        "numpy.int64",
        "numpy.int32",
        "numpy.intp",
        "numpy.bool_",
        "numpy.random.mtrand.RandomState",
        "sklearn.tree._tree.Tree",
        "sklearn.dummy.DummyRegressor",
        "sklearn._loss.loss.HalfSquaredError",
        "sklearn._loss.loss.AbsoluteError",
        "sklearn._loss.loss.HuberLoss",
        "sklearn._loss.loss.PinballLoss",
        "sklearn._loss.link.IdentityLink",
        "sklearn._loss.link.Interval",
        "sklearn._loss._loss.CyHalfSquaredError",
        "sklearn._loss._loss.CyAbsoluteError",
        "sklearn._loss._loss.CyHuberLoss",
        "sklearn._loss._loss.CyPinballLoss",
    }
)
# skops node loaders an accepted file may use (no FunctionNode, MethodNode, PartialNode,
# OperatorFuncNode, ReduceNode/ConstructorFromReduceNode, ...).
_ALLOWED_LOADERS = frozenset(
    {
        "ObjectNode",
        "DictNode",
        "ListNode",
        "TupleNode",
        "JsonNode",
        "NdArrayNode",
        "TreeNode",
        "LossNode",
        "RandomStateNode",
        "TypeNode",
        "CachedNode",
    }
)
_MAX_ENTRIES = 1_000_000


def load(data: bytes, limits: Mapping[str, int], max_bytes: int) -> TreeEnsemble:
    """The TreeEnsemble of a skops file of at most ``max_bytes`` unpacked; ``limits`` are
    TreeEnsemble's size limits."""
    import skops.io as sio  # an optional dependency (the service extra)

    schema = _schema(data, max_bytes)
    types, loaders = _types_and_loaders(schema)
    try:
        untrusted = set(sio.get_untrusted_types(data=data))
    except Exception as e:
        raise ForestFormatError("file", f"the skops file cannot be audited: {type(e).__name__}: {e}") from None
    refused = sorted((types | untrusted) - SKOPS_ALLOWED_TYPES) + [
        f"loader {name}" for name in sorted(loaders - _ALLOWED_LOADERS)
    ]
    if refused:
        raise ForestFormatError(
            "file",
            "the skops file contains types that are not allowed here: "
            + ", ".join(refused[:20])
            + (" ..." if len(refused) > 20 else "")
            + f". Only a bare fitted {_ESTIMATOR_NAMES} is "
            "accepted (no pipelines or custom code).",
        )
    top = f"{schema.get('__module__')}.{schema.get('__class__')}"
    if top not in _ESTIMATOR_TYPES:
        raise ForestFormatError("file", f"the skops file holds a {top}; expected one of {_ESTIMATOR_NAMES}.")
    try:
        estimator = sio.loads(data, trusted=sorted(untrusted))
    except Exception as e:
        raise ForestFormatError("file", f"the skops file cannot be loaded: {type(e).__name__}: {e}") from None
    try:
        return TreeEnsemble.from_sklearn(estimator, **limits)
    except (ValueError, TypeError, AttributeError, NotImplementedError, IndexError, KeyError) as e:
        raise ForestFormatError("file", f"the scikit-learn model cannot be converted: {e}") from None


def _schema(data: bytes, max_bytes: int) -> dict:
    """The archive's schema.json, after bounding its size and entries."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            entries = archive.infolist()
            if len(entries) > _MAX_ENTRIES:
                raise ForestFormatError("file", "the skops archive has too many entries.")
            unpacked = sum(entry.file_size for entry in entries)
            if unpacked > max_bytes:
                raise ForestFormatError(
                    "file", f"the skops archive unpacks to {unpacked} bytes, more than the limit of {max_bytes}."
                )
            for entry in entries:
                if entry.filename != "schema.json" and not entry.filename.endswith(".npy"):
                    raise ForestFormatError("file", f"unexpected entry '{entry.filename[:80]}' in the skops archive.")
            raw = archive.read("schema.json")
    except ForestFormatError:
        raise
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, KeyError, NotImplementedError, zlib.error) as e:
        raise ForestFormatError(
            "file", f"the skops file cannot be read: {e}. Re-export it with skops.io.dump."
        ) from None
    schema = parse_json(raw)
    if not isinstance(schema, dict):
        raise ForestFormatError("file", "the skops schema.json is not an object.")
    return schema


def _types_and_loaders(schema: Any) -> tuple[set[str], set[str]]:
    """All ``module.class`` names and loaders in a skops schema (iterative walk)."""
    types: set[str] = set()
    loaders: set[str] = set()
    stack = [schema]
    while stack:
        entry = stack.pop()
        if isinstance(entry, dict):
            if "__loader__" in entry or "__class__" in entry or "__module__" in entry:
                types.add(f"{entry.get('__module__')}.{entry.get('__class__')}")
                loaders.add(str(entry.get("__loader__")))
            stack.extend(entry.values())
        elif isinstance(entry, list):
            stack.extend(entry)
    return types, loaders
