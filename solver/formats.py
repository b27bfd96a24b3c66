"""Safe loaders for user-supplied tree ensembles.

The web service accepts forests uploaded by users and must never run code they sent, so nothing here
unpickles anything: every format is parsed as data and validated before a
:class:`solver.forest.TreeEnsemble` is built.

``load_forest(data, filename=None, declared_format=None) -> TreeEnsemble`` supports

* ``"fire-json"``: our own schema (JSON object with ``"format": "fire-forest"``, as written by
  ``TreeEnsemble.to_dict``), validated by ``TreeEnsemble.from_dict``;
* ``"xgboost-json"`` / ``"xgboost-ubjson"``: an XGBoost model as written by ``Booster.save_model``
  (``.json`` or ``.ubj``) or ``Booster.save_raw("json" | "ubj")``: gbtree or dart booster, numerical
  splits, one output, an objective whose prediction is the raw margin (``reg:squarederror``,
  ``reg:absoluteerror``, ``reg:pseudohubererror``, ``reg:quantileerror``, ``reg:squaredlogerror``);
* ``"lightgbm-json"``: the dict of LightGBM's ``Booster.dump_model()`` serialized as JSON, numerical
  splits, one output, identity-link objective (regression, regression_l1, huber, fair, quantile, mape);
* ``"skops"``: a ``skops.io`` dump of a scikit-learn ``DecisionTreeRegressor``,
  ``ExtraTreeRegressor``, ``RandomForestRegressor``, ``ExtraTreesRegressor`` or
  ``GradientBoostingRegressor``; every type in the file must be in :data:`SKOPS_ALLOWED_TYPES`.

Pickles (plain, joblib, compressed) are recognized and refused with status 415. A gzip-compressed
upload of any supported format is accepted (bounded decompression).

Exactness of the conversions (our engine: go left iff ``float32(x[f]) <= threshold``, threshold a
float64, NaN goes where ``missing_go_left`` says):

* XGBoost goes left iff ``float32(x) < float32(split_condition)``. For float32 values ``x < t`` is
  ``x <= nextafter(t, -inf)``, so the threshold stored is ``float64(nextafter(float32(t), -inf))``:
  the routing is identical for every input. Leaf values are XGBoost's float32 values; XGBoost sums
  them in float32, we sum in float64, so predictions agree to ~1e-6 relative, not bit for bit.
* XGBoost: all trees are used, as ``Booster.predict`` does by default (``XGBRegressor.predict``
  stops at ``best_iteration`` after early stopping: save ``booster[: best_iteration + 1]`` to get
  that model).
  ``base_score`` (``"[5E-1]"`` in 3.x, ``"5E-1"`` before) is the margin for the identity-link
  objectives accepted. dart: each tree's leaves are scaled by its ``weight_drop``.
  ``num_parallel_tree > 1`` (boosted random forests) is a plain sum of all trees.
* LightGBM compares the double value with a double threshold; we compare ``float32(x)``. The
  routing is identical whenever the inputs are float32-representable (e.g. the model was trained
  and is used on float32 data); for a double input that is not, a value within one float32 ulp of
  a threshold may be routed differently than by LightGBM. LightGBM's ``missing_type``: ``"None"``
  maps NaN to 0.0 (so NaN goes left iff ``0.0 <= threshold``), ``"NaN"`` sends NaN to the default
  child, ``"Zero"`` (``zero_as_missing``) sends NaN and |x| <= 1e-35 to the default child, which
  is accepted only where that agrees with the threshold comparison. Leaf values in the dump already
  include the shrinkage (and the initial score, in the first tree), so ``base_score`` is 0;
  ``average_output`` (``boosting="rf"``) gives ``tree_weight = 1/T``, matching ``Booster.predict``
  (note ``raw_score=True`` returns the unaveraged sum in that mode). ``internal_count``/``leaf_count``
  become the trees' ``n_samples``.
* Size and shape are bounded: every tree's depth <= ``max_depth`` (64), the total number of nodes
  <= ``max_nodes`` (5,000,000), the upload <= ``max_bytes``.

Errors are :class:`ForestFormatError` (a ``ValueError``) with ``status`` (415: not a format we accept,
including pickles; 422: a recognized format whose content is invalid or unsupported), ``field`` (a
JSON pointer into the upload such as ``/learner/gradient_booster/model/trees/3/left_children/5``,
``"file"`` for the upload as a whole, or ``"format"`` for the declared format) and ``detail``
(what is wrong and how to fix it).
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import math
import struct
import zipfile
import zlib
from typing import Any

import numpy as np

__all__ = [
    "FORMATS",
    "SKOPS_ALLOWED_TYPES",
    "ForestFormatError",
    "detect_format",
    "load_forest",
]

FORMATS = ("fire-json", "xgboost-json", "xgboost-ubjson", "lightgbm-json", "skops")

DEFAULT_MAX_NODES = 5_000_000
DEFAULT_MAX_DEPTH = 64
DEFAULT_MAX_BYTES = 512 * 1024 * 1024
MAX_FEATURES = 1_000_000
_MAX_NESTING = 64  # UBJSON containers

_FIX_HINT = (
    "Upload one of: a skops file (skops.io.dump), an XGBoost JSON/UBJSON model "
    "(Booster.save_model('model.json')), a LightGBM dump_model() JSON "
    "(json.dump(booster.dump_model(), f)) or a fire-forest JSON (TreeEnsemble.to_dict())."
)

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
_PICKLE_EXTENSIONS = (".pkl", ".pickle", ".joblib", ".sav", ".dill", ".pt", ".pth", ".cpkl")

# Every type (``module.qualname`` as skops writes it) that may appear in an accepted skops file,
# found empirically by dumping fitted DecisionTreeRegressor / ExtraTreeRegressor /
# RandomForestRegressor / ExtraTreesRegressor / GradientBoostingRegressor (all losses and init
# estimators, numpy/pandas input, oob_score, RandomState random_state) with skops 0.16 / sklearn 1.9,
# plus numpy scalar types that fitted attributes may hold. Everything else is refused, including the
# sklearn types skops trusts by default (Pipeline, FunctionTransformer, ...).
SKOPS_ALLOWED_TYPES = frozenset(
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
        "sklearn.tree._classes.DecisionTreeRegressor",
        "sklearn.tree._classes.ExtraTreeRegressor",
        "sklearn.ensemble._forest.RandomForestRegressor",
        "sklearn.ensemble._forest.ExtraTreesRegressor",
        "sklearn.ensemble._gb.GradientBoostingRegressor",
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
_SKOPS_ALLOWED_LOADERS = frozenset(
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
_SKOPS_ESTIMATORS = (
    "sklearn.tree._classes.DecisionTreeRegressor",
    "sklearn.tree._classes.ExtraTreeRegressor",
    "sklearn.ensemble._forest.RandomForestRegressor",
    "sklearn.ensemble._forest.ExtraTreesRegressor",
    "sklearn.ensemble._gb.GradientBoostingRegressor",
)

# XGBoost objectives whose prediction is the raw margin (identity link).
_XGB_IDENTITY_OBJECTIVES = frozenset(
    {
        "reg:squarederror",
        "reg:linear",
        "reg:absoluteerror",
        "reg:pseudohubererror",
        "reg:quantileerror",
        "reg:squaredlogerror",
    }
)
# LightGBM objectives (first token of the dumped objective string) with identity link.
_LGB_IDENTITY_OBJECTIVES = frozenset(
    {
        "regression",
        "regression_l2",
        "l2",
        "mean_squared_error",
        "mse",
        "l2_root",
        "root_mean_squared_error",
        "rmse",
        "regression_l1",
        "l1",
        "mean_absolute_error",
        "mae",
        "huber",
        "fair",
        "quantile",
        "mape",
        "mean_absolute_percentage_error",
    }
)
_LGB_ZERO_THRESHOLD = float(np.float32(1e-35))  # LightGBM's kZeroThreshold (1e-35f as double)


class ForestFormatError(ValueError):
    """An upload that cannot be turned into a forest.

    ``status``: 415 (not a format we accept, pickles included) or 422 (recognized format, invalid or
    unsupported content). ``field``: JSON pointer into the upload, ``"file"`` or ``"format"``.
    ``detail``: the message (what is wrong and how to fix it).
    """

    def __init__(self, detail: str, *, field: str = "file", status: int = 422):
        super().__init__(detail)
        self.detail = detail
        self.field = field
        self.status = int(status)

    def __str__(self) -> str:  # the field helps when the error is logged
        return f"{self.detail} (field: {self.field})"

    def to_problem(self) -> dict:
        """RFC 9457 problem details body."""
        title = "Unsupported model format" if self.status == 415 else "Invalid model file"
        return {
            "type": "about:blank",
            "title": title,
            "status": self.status,
            "detail": self.detail,
            "field": self.field,
        }


def _err(detail: str, field: str = "file", status: int = 422) -> ForestFormatError:
    return ForestFormatError(detail, field=field, status=status)


def _ptr(path: str, key: Any) -> str:
    k = str(key).replace("~", "~0").replace("/", "~1")
    return f"{path}/{k}"


# --------------------------------------------------------------------------------------------
# sniffing
# --------------------------------------------------------------------------------------------

def _as_bytes(data: Any) -> bytes:
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise _err(f"expected the file content as bytes, got {type(data).__name__}", "file", 422)


def _first_char(data: bytes) -> bytes:
    d = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    return d.lstrip(b" \t\r\n")[:1]


def _is_pickle(data: bytes) -> bool:
    if len(data) >= 2 and data[0] == 0x80 and 2 <= data[1] <= 5:
        return True
    # protocol 0/1 pickles: start with MARK/GLOBAL/EMPTY_* ... and end with STOP '.'
    if data[:1] in (b"(", b"c", b"]", b"}", b")", b"N", b"I", b"F", b"S", b"V", b"l", b"d", b"q"):
        tail = data.rstrip(b"\r\n")
        if tail.endswith(b".") and not data.lstrip().startswith((b"{", b"[")):
            return True
    return False


def _is_ubjson(data: bytes) -> bool:
    return len(data) >= 2 and data[:1] == b"{" and data[1:2] in (b"i", b"U", b"I", b"l", b"L", b"$", b"#", b"}")


def _compression(data: bytes) -> str | None:
    if data[:2] == b"\x1f\x8b":
        return "gzip"
    if data[:3] == b"BZh":
        return "bz2"
    if data[:6] == b"\xfd7zXZ\x00":
        return "xz"
    if data[:3] == b"\x5d\x00\x00":
        return "lzma"
    if data[:4] == b"\x04\x22\x4d\x18":
        return "lz4"
    if data[:4] == b"\x28\xb5\x2f\xfd":
        return "zstd"
    if data[:2] == b"ZF":  # joblib's legacy zlib container
        return "joblib-zlib"
    if len(data) >= 2 and data[0] & 0x0F == 8 and data[0] >> 4 <= 7 and (data[0] * 256 + data[1]) % 31 == 0:
        return "zlib"
    return None


def _peek_decompressed(data: bytes, kind: str, n: int = 64) -> bytes:
    try:
        if kind == "zlib":
            return zlib.decompressobj().decompress(data[:4096], n)
        if kind == "joblib-zlib":
            return zlib.decompressobj().decompress(data[5 + 19 :][:4096], n) if len(data) > 24 else b""
        if kind == "bz2":
            return bz2.BZ2Decompressor().decompress(data[:65536], n)
        if kind in ("xz", "lzma"):
            return lzma.LZMADecompressor().decompress(data[:65536], n)
    except Exception:  # noqa: BLE001 - a peek only
        return b""
    return b""


def _gunzip(data: bytes, max_bytes: int) -> bytes:
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
            out = f.read(max_bytes + 1)
    except (OSError, EOFError, zlib.error) as e:
        raise _err(f"corrupt gzip data: {e}. Re-compress the file or upload it uncompressed.") from None
    if len(out) > max_bytes:
        raise _err(f"the gzip content expands beyond the limit of {max_bytes} bytes.")
    return out


def _zip_names(data: bytes) -> list[str] | None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            return z.namelist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError):
        return None


def _pickle_error(what: str = "a pickle") -> ForestFormatError:
    return _err(
        f"the file is {what}. Pickle and joblib files are never loaded here, because unpickling "
        f"runs arbitrary code. {_FIX_HINT}",
        "file",
        415,
    )


def _parse_json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except json.JSONDecodeError as e:
        raise _err(
            f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}. The file may be truncated "
            "or not be JSON; re-export the model.",
        ) from None
    except UnicodeDecodeError as e:
        raise _err(f"the JSON file is not valid UTF-8/16/32 text: {e.reason}.") from None
    except RecursionError:
        raise _err("the JSON document is nested too deeply.") from None
    except ValueError as e:  # e.g. integer literal too long
        raise _err(f"invalid JSON: {e}.") from None


def _json_kind(doc: Any) -> str | None:
    if not isinstance(doc, dict):
        return None
    if doc.get("format") == "fire-forest":
        return "fire-json"
    if isinstance(doc.get("learner"), dict):
        return "xgboost-json"
    if "tree_info" in doc and ("tree" == doc.get("name") or "max_feature_idx" in doc):
        return "lightgbm-json"
    return None


def _ext(filename: str | None) -> str:
    if not filename:
        return ""
    name = filename.lower().rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
    for suf in (".gz", ".gzip"):
        if name.endswith(suf):
            name = name[: -len(suf)]
    return "." + name.rsplit(".", 1)[-1] if "." in name else ""


def _sniff(data: bytes, filename: str | None, max_bytes: int, _depth: int = 0):
    """-> (format or None, payload). payload: parsed JSON doc, UBJSON bytes, skops bytes, or an
    exception describing why the content is not acceptable."""
    if not data:
        return None, _err("the file is empty.", "file", 422)
    if _is_pickle(data):
        return "pickle", _pickle_error()
    comp = _compression(data)
    if comp == "gzip" and _depth == 0:
        inner = _gunzip(data, max_bytes)
        fmt, payload = _sniff(inner, filename, max_bytes, _depth + 1)
        return fmt, payload
    if comp is not None and comp != "gzip":
        head = _peek_decompressed(data, comp)
        if head and _is_pickle(head) or comp in ("joblib-zlib",):
            return "pickle", _pickle_error(f"a {comp}-compressed pickle (joblib)")
        if _ext(filename) in _PICKLE_EXTENSIONS:
            return "pickle", _pickle_error(f"a {comp}-compressed file named like a pickle")
        return None, _err(
            f"{comp}-compressed uploads are not supported; upload the file uncompressed or gzip-"
            f"compressed. {_FIX_HINT}",
            "file",
            415,
        )
    if data[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        names = _zip_names(data)
        if names is None:
            return None, _err("the file looks like a zip archive but cannot be read; it may be truncated.")
        if "schema.json" in names:
            return "skops", data
        if any(n.endswith((".pkl", ".pickle", "data.pkl")) for n in names):
            return "pickle", _pickle_error("a zip archive holding a pickle (e.g. torch.save)")
        return None, _err(f"a zip archive that is not a skops file (no schema.json). {_FIX_HINT}", "file", 415)
    if _is_ubjson(data):
        return "xgboost-ubjson", data
    c = _first_char(data)
    if c in (b"{", b"["):
        try:
            doc = _parse_json(data)
        except ForestFormatError as e:
            return None, e
        kind = _json_kind(doc)
        if kind is None:
            return None, _err(
                f"a JSON document that is not a model format we know (expected an object with "
                f"'format': 'fire-forest', an XGBoost model with 'learner', or a LightGBM dump_model() "
                f"with 'tree_info'). {_FIX_HINT}",
                "file",
                415,
            )
        return kind, doc
    if _ext(filename) in _PICKLE_EXTENSIONS:
        return "pickle", _pickle_error("named like a pickle and is not a supported format")
    if data[:1] == b"t" and data.startswith(b"tree\n"):
        return None, _err(
            "this is LightGBM's text model format, which is not accepted (its native loader is not "
            "safe on untrusted input). Upload json.dumps(booster.dump_model()) instead.",
            "file",
            415,
        )
    return None, _err(f"unrecognized file format. {_FIX_HINT}", "file", 415)


def detect_format(data: bytes, filename: str | None = None) -> str | None:
    """Name of the upload's format: one of :data:`FORMATS`, ``"pickle"``, or ``None`` when it is not
    recognized (or is unreadable JSON). Never loads anything; JSON is parsed."""
    data = _as_bytes(data)
    try:
        fmt, _ = _sniff(data, filename, DEFAULT_MAX_BYTES)
    except ForestFormatError:
        return None
    return fmt


# --------------------------------------------------------------------------------------------
# shared validation helpers
# --------------------------------------------------------------------------------------------

def _get(obj: Any, key: str, path: str, types=None, *, required: bool = True, default: Any = None):
    if not isinstance(obj, dict):
        raise _err(f"expected an object at {path or '/'}, got {_tname(obj)}.", path or "file")
    if key not in obj:
        if required:
            raise _err(f"missing required key '{key}'.", _ptr(path, key))
        return default
    v = obj[key]
    if types is not None and not isinstance(v, types):
        names = types if isinstance(types, tuple) else (types,)
        raise _err(
            f"expected {' or '.join(_TYPE_WORDS.get(t, t.__name__) for t in names)}, got {_tname(v)}.",
            _ptr(path, key),
        )
    return v


_TYPE_WORDS = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "an integer",
               float: "a number"}


def _tname(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, (list, np.ndarray)):
        return "an array"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, (int, float)):
        return "a number"
    return type(v).__name__


def _int_value(v: Any, path: str, lo: int | None = None, hi: int | None = None) -> int:
    """An integer, possibly written as a string (XGBoost writes parameters as strings)."""
    if isinstance(v, (bool, np.bool_)):
        raise _err(f"expected an integer, got {_tname(v)}.", path)
    try:
        if isinstance(v, str):
            iv = int(v.strip())
        elif isinstance(v, (int, np.integer)):
            iv = int(v)
        elif isinstance(v, (float, np.floating)) and float(v).is_integer():
            iv = int(v)
        else:
            raise ValueError
    except (ValueError, OverflowError):
        raise _err(f"expected an integer, got {v!r:.40}.", path) from None
    if (lo is not None and iv < lo) or (hi is not None and iv > hi):
        raise _err(f"integer {iv} out of range [{lo}, {hi}].", path)
    return iv


def _array(v: Any, path: str, kind: str, n: int | None = None) -> np.ndarray:
    """1-d numeric array from a JSON list (or a numpy array from UBJSON). kind: 'int', 'float',
    'bool' (0/1 integers or booleans)."""
    if not isinstance(v, (list, np.ndarray)):
        raise _err(f"expected an array, got {_tname(v)}.", path)
    try:
        a = np.asarray(v)
    except (ValueError, OverflowError, TypeError):
        raise _err("expected a flat array of numbers.", path) from None
    if a.ndim != 1 and not (a.size == 0):
        raise _err("expected a flat array of numbers.", path)
    a = a.reshape(-1)
    if n is not None and a.shape[0] != n:
        raise _err(f"expected {n} entries, got {a.shape[0]}.", path)
    k = a.dtype.kind
    if a.size == 0:
        return a.astype({"int": np.int64, "float": np.float64, "bool": bool}[kind])
    if kind == "float":
        if k not in "iuf":
            raise _err("expected an array of numbers.", path)
        return a.astype(np.float64)
    if kind == "int":
        if k in "iu":
            return a.astype(np.int64)
        raise _err("expected an array of integers.", path)
    if kind == "bool":
        if k == "b":
            return a
        if k in "iu":
            bad = np.flatnonzero((a != 0) & (a != 1))
            if bad.size:
                raise _err(f"expected 0 or 1, got {a[bad[0]]}.", _ptr(path, int(bad[0])))
            return a.astype(bool)
        raise _err("expected an array of booleans (or 0/1).", path)
    raise AssertionError(kind)


def _check_structure(left: np.ndarray, right: np.ndarray, path: str, lname: str, rname: str,
                     max_depth: int) -> tuple[np.ndarray, int]:
    """Validate a flat binary tree (children ids, -1 at leaves, root 0): ids in range, a node is a
    leaf in both arrays or in neither, every node at most one parent, the root none (so no cycles
    reachable from the root), depth <= max_depth. Returns (reachable mask, depth)."""
    n = left.shape[0]
    if n == 0:
        raise _err("a tree must have at least one node.", _ptr(path, lname))
    for arr, name in ((left, lname), (right, rname)):
        bad = np.flatnonzero((arr < -1) | (arr >= n))
        if bad.size:
            i = int(bad[0])
            raise _err(f"child index {int(arr[i])} out of range [-1, {n - 1}] (tree has {n} nodes).",
                       _ptr(_ptr(path, name), i))
    bad = np.flatnonzero((left == -1) != (right == -1))
    if bad.size:
        i = int(bad[0])
        raise _err(f"node {i} has exactly one child; a node needs two children or none.",
                   _ptr(_ptr(path, lname), i))
    kids = np.concatenate([left[left >= 0], right[right >= 0]])
    if kids.size and (kids == 0).any():
        where = np.flatnonzero(left == 0)
        name, i = (lname, int(where[0])) if where.size else (rname, int(np.flatnonzero(right == 0)[0]))
        raise _err("the root (node 0) is used as a child: the tree has a cycle.", _ptr(_ptr(path, name), i))
    counts = np.bincount(kids, minlength=n) if kids.size else np.zeros(n, np.int64)
    multi = np.flatnonzero(counts > 1)
    if multi.size:
        j = int(multi[0])
        refs = np.flatnonzero(right == j)
        name, i = (rname, int(refs[-1])) if refs.size else (lname, int(np.flatnonzero(left == j)[-1]))
        raise _err(f"node {j} has more than one parent (the structure is not a tree).", _ptr(_ptr(path, name), i))
    reach = np.zeros(n, dtype=bool)
    reach[0] = True
    frontier = np.array([0], dtype=np.int64)
    depth = 0
    while True:
        internal = frontier[left[frontier] >= 0]
        if internal.size == 0:
            break
        depth += 1
        if depth > max_depth:
            raise _err(f"tree deeper than the limit of {max_depth}.", path)
        frontier = np.concatenate([left[internal], right[internal]])
        reach[frontier] = True
    return reach, depth


def _compact(reach: np.ndarray, left: np.ndarray, right: np.ndarray, *arrays: np.ndarray):
    """Drop unreachable nodes (XGBoost keeps deleted nodes in its arrays), renumbering children."""
    if reach.all():
        return (left, right) + arrays
    new_id = np.cumsum(reach) - 1
    keep = np.flatnonzero(reach)
    l2 = left[keep].copy()
    r2 = right[keep].copy()
    m = l2 >= 0
    l2[m] = new_id[l2[m]]
    r2[m] = new_id[r2[m]]
    return (l2, r2) + tuple(a[keep] for a in arrays)


def _check_finite(a: np.ndarray, mask: np.ndarray, path: str, what: str) -> None:
    bad = np.flatnonzero(mask & ~np.isfinite(a))
    if bad.size:
        i = int(bad[0])
        raise _err(f"{what} must be finite, got {a[i]}.", _ptr(path, i))


def _feature_names(v: Any, path: str, n_features: int) -> list[str] | None:
    if v is None:
        return None
    if not isinstance(v, list):
        raise _err(f"expected an array of strings, got {_tname(v)}.", path)
    if len(v) == 0:
        return None
    if len(v) != n_features:
        raise _err(f"{len(v)} feature names for {n_features} features.", path)
    for i, s in enumerate(v):
        if not isinstance(s, str):
            raise _err(f"feature names must be strings, got {_tname(s)}.", _ptr(path, i))
        if len(s) > 1000:
            raise _err("feature name longer than 1000 characters.", _ptr(path, i))
    if len(set(v)) != len(v):
        raise _err("feature names must be unique.", path)
    return list(v)


def _make_tree(left, right, feature, threshold, value, missing_go_left, n_samples=None):
    from solver.forest import Tree

    return Tree(
        children_left=np.ascontiguousarray(left, dtype=np.int32),
        children_right=np.ascontiguousarray(right, dtype=np.int32),
        feature=np.ascontiguousarray(feature, dtype=np.int32),
        threshold=np.ascontiguousarray(threshold, dtype=np.float64),
        value=np.ascontiguousarray(value, dtype=np.float64),
        missing_go_left=np.ascontiguousarray(missing_go_left, dtype=bool),
        n_samples=None if n_samples is None else np.ascontiguousarray(n_samples, dtype=np.int64),
    )


def _make_ensemble(trees, n_features, feature_names, base_score, tree_weight, kind, max_nodes, max_depth):
    from solver.forest import TreeEnsemble

    try:
        return TreeEnsemble(
            trees,
            n_features=n_features,
            feature_names=feature_names,
            base_score=float(base_score),
            tree_weight=float(tree_weight),
            kind=kind,
            max_nodes=max_nodes,
            max_depth=max_depth,
            max_features=MAX_FEATURES,
        )
    except ForestFormatError:
        raise
    except (ValueError, TypeError, IndexError, KeyError, StopIteration, ArithmeticError) as e:
        # the parsers validate first, so this is a corner the checks above missed
        raise _err(f"the model is not a valid forest: {e}") from None


# --------------------------------------------------------------------------------------------
# UBJSON (XGBoost's binary JSON)
# --------------------------------------------------------------------------------------------

_UBJ_NUM = {
    b"i": (">i1", 1),
    b"U": (">u1", 1),
    b"I": (">i2", 2),
    b"l": (">i4", 4),
    b"L": (">i8", 8),
    b"d": (">f4", 4),
    b"D": (">f8", 8),
}


class _UBJReader:
    def __init__(self, data: bytes):
        self.b = data
        self.i = 0
        self.n = len(data)

    def fail(self, msg: str):
        raise _err(f"invalid UBJSON at byte {self.i}: {msg}. The file may be truncated; re-export the model.")

    def take(self, k: int) -> bytes:
        if k < 0 or self.i + k > self.n:
            self.fail("unexpected end of data")
        s = self.b[self.i : self.i + k]
        self.i += k
        return s

    def marker(self) -> bytes:
        while True:
            m = self.take(1)
            if m != b"N":  # no-op
                return m

    def number(self, m: bytes):
        dt, size = _UBJ_NUM[m]
        v = np.frombuffer(self.take(size), dtype=dt)[0]
        return float(v) if dt[1] == "f" else int(v)

    def length(self) -> int:
        m = self.marker()
        if m not in (b"i", b"U", b"I", b"l", b"L"):
            self.fail(f"expected an integer length, got marker {m!r}")
        k = self.number(m)
        if k < 0:
            self.fail("negative length")
        return k

    def string(self) -> str:
        k = self.length()
        try:
            return self.take(k).decode("utf-8")
        except UnicodeDecodeError:
            self.fail("string is not UTF-8")

    def value(self, m: bytes, depth: int):
        if m in _UBJ_NUM:
            return self.number(m)
        if m == b"S":
            return self.string()
        if m == b"H":
            s = self.string()
            try:
                return float(s) if any(c in s for c in ".eE") else int(s)
            except ValueError:
                self.fail("bad high-precision number")
        if m == b"C":
            return self.take(1).decode("latin-1")
        if m == b"T":
            return True
        if m == b"F":
            return False
        if m == b"Z":
            return None
        if m == b"[":
            return self.array(depth + 1)
        if m == b"{":
            return self.object(depth + 1)
        self.fail(f"unknown marker {m!r}")

    def _container_header(self):
        typ = None
        count = None
        if self.i < self.n and self.b[self.i : self.i + 1] == b"$":
            self.i += 1
            typ = self.take(1)
            if self.take(1) != b"#":
                self.fail("typed container without a count")
            count = self.length()
        elif self.i < self.n and self.b[self.i : self.i + 1] == b"#":
            self.i += 1
            count = self.length()
        if count is not None and count > self.n - self.i and typ not in (b"T", b"F", b"Z"):
            self.fail(f"container count {count} exceeds the data left")
        return typ, count

    def array(self, depth: int):
        if depth > _MAX_NESTING:
            self.fail("nested too deeply")
        typ, count = self._container_header()
        if typ is not None:
            if typ in _UBJ_NUM:
                dt, size = _UBJ_NUM[typ]
                raw = self.take(count * size)
                return np.frombuffer(raw, dtype=dt).astype(np.float64 if dt[1] == "f" else np.int64)
            if count > 10_000_000:
                self.fail("container too large")
            return [self.value(typ, depth) for _ in range(count)]
        out = []
        if count is not None:
            for _ in range(count):
                out.append(self.value(self.marker(), depth))
            return out
        while True:
            m = self.marker()
            if m == b"]":
                return out
            out.append(self.value(m, depth))

    def object(self, depth: int):
        if depth > _MAX_NESTING:
            self.fail("nested too deeply")
        typ, count = self._container_header()
        out = {}
        if count is not None:
            for _ in range(count):
                k = self.string()
                out[k] = self.value(typ if typ is not None else self.marker(), depth)
            return out
        while True:
            if self.i < self.n and self.b[self.i : self.i + 1] == b"}":
                self.i += 1
                return out
            if self.i < self.n and self.b[self.i : self.i + 1] == b"N":
                self.i += 1
                continue
            k = self.string()
            out[k] = self.value(self.marker(), depth)


def _parse_ubjson(data: bytes) -> Any:
    r = _UBJReader(data)
    doc = r.value(r.marker(), 0)
    return doc


# --------------------------------------------------------------------------------------------
# XGBoost
# --------------------------------------------------------------------------------------------

def _parse_base_score(v: Any, path: str) -> float:
    if isinstance(v, (list, np.ndarray)):
        vals = list(np.asarray(v).reshape(-1))
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        vals = [v]
    elif isinstance(v, str):
        s = v.strip()
        if s.startswith("[") and s.endswith("]"):
            s = s[1:-1]
        vals = [p for p in s.split(",") if p.strip()]
    else:
        raise _err(f"expected a number or a string, got {_tname(v)}.", path)
    if len(vals) != 1:
        raise _err(f"expected one base score, got {len(vals)} (multi-output models are not supported).", path)
    try:
        x = float(vals[0])
    except (TypeError, ValueError):
        raise _err(f"base_score {v!r:.40} is not a number.", path) from None
    if not math.isfinite(x):
        raise _err("base_score must be finite.", path)
    return float(np.float32(x))


def _parse_xgboost(doc: Any, max_nodes: int, max_depth: int):
    if not isinstance(doc, dict):
        raise _err(f"an XGBoost model is a JSON object, got {_tname(doc)}.")
    learner = _get(doc, "learner", "", dict)
    lp = "/learner"
    gb = _get(learner, "gradient_booster", lp, dict)
    gp = lp + "/gradient_booster"
    name = _get(gb, "name", gp, str)
    weight_drop = None
    if name == "gbtree":
        tp = gp
        gbtree = gb
    elif name == "dart":
        tp = gp + "/gbtree"
        gbtree = _get(gb, "gbtree", gp, dict)
        weight_drop = _array(_get(gb, "weight_drop", gp), gp + "/weight_drop", "float")
        _check_finite(weight_drop, np.ones(weight_drop.shape, bool), gp + "/weight_drop", "weights")
    elif name == "gblinear":
        raise _err("this is a linear booster (gblinear): it has no trees. Train with booster='gbtree'.",
                   gp + "/name")
    else:
        raise _err(f"unsupported booster '{name:.40}'; only gbtree and dart are supported.", gp + "/name")

    obj = _get(learner, "objective", lp, dict)
    oname = _get(obj, "name", lp + "/objective", str)
    if oname not in _XGB_IDENTITY_OBJECTIVES:
        kind = ("classification" if oname.startswith(("binary:", "multi:", "reg:logistic")) else
                "ranking" if oname.startswith("rank:") else
                "survival" if oname.startswith("survival:") else
                "log-link regression" if oname in ("reg:gamma", "reg:tweedie", "count:poisson") else
                "unsupported")
        raise _err(
            f"objective '{oname:.60}' is {kind}: only regression objectives whose prediction is the raw "
            f"margin are supported ({', '.join(sorted(_XGB_IDENTITY_OBJECTIVES - {'reg:linear'}))}).",
            lp + "/objective/name",
        )
    mp = lp + "/learner_model_param"
    lmp = _get(learner, "learner_model_param", lp, dict)
    num_class = _int_value(lmp.get("num_class", "0"), mp + "/num_class")
    if num_class > 1:
        raise _err(f"the model has {num_class} classes; only single-output regression is supported.",
                   mp + "/num_class")
    num_target = _int_value(lmp.get("num_target", "1"), mp + "/num_target")
    if num_target != 1:
        raise _err(f"the model has {num_target} targets; only single-output regression is supported.",
                   mp + "/num_target")
    n_features = _int_value(_get(lmp, "num_feature", mp), mp + "/num_feature", 1, MAX_FEATURES)
    base_score = _parse_base_score(_get(lmp, "base_score", mp), mp + "/base_score")
    feature_names = _feature_names(learner.get("feature_names"), lp + "/feature_names", n_features)
    ftypes = learner.get("feature_types")
    categorical = None  # per feature: declared categorical ("c")
    if isinstance(ftypes, list) and any(t == "c" for t in ftypes):
        categorical = np.zeros(n_features, dtype=bool)
        categorical[: min(len(ftypes), n_features)] = [t == "c" for t in ftypes[:n_features]]

    model = _get(gbtree, "model", tp, dict)
    mp2 = tp + "/model"
    trees = _get(model, "trees", mp2, list)
    T = len(trees)
    if T == 0:
        raise _err("the model has no trees.", mp2 + "/trees")
    tree_info = model.get("tree_info")
    if tree_info is not None:
        ti = _array(tree_info, mp2 + "/tree_info", "int", T)
        bad = np.flatnonzero(ti != 0)
        if bad.size:
            raise _err("trees for more than one output group: only single-output regression is supported.",
                       _ptr(mp2 + "/tree_info", int(bad[0])))
    if weight_drop is not None and weight_drop.shape[0] != T:
        raise _err(f"weight_drop has {weight_drop.shape[0]} entries for {T} trees.", gp + "/weight_drop")
    sizes = []
    for t, tr in enumerate(trees):
        if not isinstance(tr, dict):
            raise _err(f"expected an object, got {_tname(tr)}.", _ptr(mp2 + "/trees", t))
        lc = tr.get("left_children")
        sizes.append(len(lc) if isinstance(lc, (list, np.ndarray)) else 0)
    if sum(sizes) > max_nodes:
        raise _err(f"the model has {sum(sizes)} nodes, more than the limit of {max_nodes}.", mp2 + "/trees")

    out = []
    for t, tr in enumerate(trees):
        path = _ptr(mp2 + "/trees", t)
        tparam = tr.get("tree_param")
        if isinstance(tparam, dict) and "size_leaf_vector" in tparam:
            slv = _int_value(tparam["size_leaf_vector"], path + "/tree_param/size_leaf_vector")
            if slv > 1:
                raise _err("vector-leaf (multi-target) trees are not supported.",
                           path + "/tree_param/size_leaf_vector")
        left = _array(_get(tr, "left_children", path), path + "/left_children", "int")
        n = left.shape[0]
        right = _array(_get(tr, "right_children", path), path + "/right_children", "int", n)
        split_idx = _array(_get(tr, "split_indices", path), path + "/split_indices", "int", n)
        cond = _array(_get(tr, "split_conditions", path), path + "/split_conditions", "float", n)
        dleft = _array(_get(tr, "default_left", path), path + "/default_left", "bool", n)
        if isinstance(tparam, dict) and "num_nodes" in tparam:
            nn = _int_value(tparam["num_nodes"], path + "/tree_param/num_nodes")
            if nn != n:
                raise _err(f"num_nodes is {nn} but the arrays have {n} entries.", path + "/tree_param/num_nodes")
        reach, _ = _check_structure(left, right, path, "left_children", "right_children", max_depth)
        internal = left >= 0
        if "split_type" in tr:
            st = _array(tr["split_type"], path + "/split_type", "int", n)
            bad = np.flatnonzero(internal & reach & (st != 0))
            if bad.size:
                raise _err(
                    "categorical split: only numerical splits are supported. Retrain without "
                    "enable_categorical (one-hot or ordinal-encode the categorical features).",
                    _ptr(path + "/split_type", int(bad[0])),
                )
        cn = tr.get("categories_nodes")
        if isinstance(cn, (list, np.ndarray)) and len(cn) > 0:
            raise _err("categorical splits are not supported. Retrain without enable_categorical.",
                       path + "/categories_nodes")
        use = internal & reach
        bad = np.flatnonzero(use & ((split_idx < 0) | (split_idx >= n_features)))
        if bad.size:
            i = int(bad[0])
            raise _err(f"feature index {int(split_idx[i])} out of range [0, {n_features - 1}].",
                       _ptr(path + "/split_indices", i))
        with np.errstate(over="ignore", invalid="ignore"):
            c32 = cond.astype(np.float32)
        _check_finite(c32, reach, path + "/split_conditions", "split conditions and leaf values (as float32)")
        if categorical is not None:
            bad = np.flatnonzero(use & categorical[np.clip(split_idx, 0, n_features - 1)])
            if bad.size:
                raise _err("split on a categorical feature: only numerical splits are supported. "
                           "Retrain without enable_categorical.", _ptr(path + "/split_indices", int(bad[0])))
        thr = np.where(internal, np.nextafter(c32, np.float32(-np.inf)).astype(np.float64), 0.0)
        # x < -FLT_MAX holds for no finite float32: a finite stand-in for -inf routes identically
        thr[np.isneginf(thr)] = -np.finfo(np.float64).max
        val = np.where(internal, 0.0, c32.astype(np.float64))
        if weight_drop is not None:
            val = val * float(np.float32(weight_drop[t]))
        feat = np.where(internal, split_idx, -2)
        left, right, feat, thr, val, dl = _compact(reach, left, right, feat, thr, val, dleft)
        out.append(_make_tree(left, right, feat, thr, val, dl))
    return out, n_features, feature_names, base_score, 1.0, "xgboost"


# --------------------------------------------------------------------------------------------
# LightGBM dump_model()
# --------------------------------------------------------------------------------------------

def _lgb_number(node: dict, key: str, path: str) -> float:
    v = _get(node, key, path)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _err(f"expected a number, got {_tname(v)}.", _ptr(path, key))
    x = float(v)
    if not math.isfinite(x):
        raise _err(f"{key} must be finite.", _ptr(path, key))
    return x


def _parse_lightgbm_tree(root: Any, path: str, n_features: int, max_depth: int, budget: int):
    left: list[int] = []
    right: list[int] = []
    feat: list[int] = []
    thr: list[float] = []
    val: list[float] = []
    mgl: list[bool] = []
    counts: list[Any] = []
    # iterative preorder: (node, path, depth, parent id, is_left)
    stack = [(root, path, 0, -1, False)]
    while stack:
        node, p, depth, parent, is_left = stack.pop()
        if not isinstance(node, dict):
            raise _err(f"expected a tree node object, got {_tname(node)}.", p)
        nid = len(left)
        if nid >= budget:
            raise _err(f"the model has more nodes than the limit; the tree at {path} exceeds it.", p)
        if parent >= 0:
            (left if is_left else right)[parent] = nid
        if "leaf_value" in node and "split_feature" not in node:
            for k in ("leaf_coeff", "leaf_const", "leaf_features"):
                if k in node:
                    raise _err("linear trees (linear_tree=True) are not supported.", _ptr(p, k))
            left.append(-1)
            right.append(-1)
            feat.append(-2)
            thr.append(0.0)
            val.append(_lgb_number(node, "leaf_value", p))
            mgl.append(False)
            counts.append(node.get("leaf_count"))
            continue
        if depth + 1 > max_depth:
            raise _err(f"tree deeper than the limit of {max_depth}.", p)
        dt = _get(node, "decision_type", p, str)
        if dt != "<=":
            if dt == "==":
                raise _err("categorical split: only numerical splits are supported. Retrain with the "
                           "categorical features encoded as numbers (categorical_feature=[]).",
                           _ptr(p, "decision_type"))
            raise _err(f"unsupported decision_type '{dt:.20}'.", _ptr(p, "decision_type"))
        f = _int_value(_get(node, "split_feature", p), _ptr(p, "split_feature"), 0, n_features - 1)
        t = _lgb_number(node, "threshold", p)
        dl = _get(node, "default_left", p, bool)
        mt = _get(node, "missing_type", p, str)
        if mt == "None":
            go_left = 0.0 <= t
        elif mt == "NaN":
            go_left = dl
        elif mt == "Zero":
            if dl and t >= _LGB_ZERO_THRESHOLD:
                go_left = True
            elif not dl and t < -_LGB_ZERO_THRESHOLD:
                go_left = False
            else:
                raise _err(
                    "missing_type 'Zero' (zero_as_missing=True) with a split whose threshold separates "
                    "zero from its default direction cannot be expressed as one threshold. Retrain with "
                    "zero_as_missing=False.",
                    _ptr(p, "missing_type"),
                )
        else:
            raise _err(f"unknown missing_type '{mt:.20}' (expected None, NaN or Zero).", _ptr(p, "missing_type"))
        left.append(-1)
        right.append(-1)
        feat.append(f)
        thr.append(t)
        val.append(0.0)
        mgl.append(bool(go_left))
        counts.append(node.get("internal_count"))
        lc = _get(node, "left_child", p)
        rc = _get(node, "right_child", p)
        stack.append((rc, p + "/right_child", depth + 1, nid, False))
        stack.append((lc, p + "/left_child", depth + 1, nid, True))
    n_samples = None  # training counts (optional in the dump): leaf support
    if all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c < 2**62 for c in counts):
        n_samples = np.array(counts, dtype=np.int64)
    return _make_tree(np.array(left), np.array(right), np.array(feat), np.array(thr), np.array(val),
                      np.array(mgl, dtype=bool), n_samples)


def _parse_lightgbm(doc: Any, max_nodes: int, max_depth: int):
    if not isinstance(doc, dict):
        raise _err(f"a LightGBM dump is a JSON object, got {_tname(doc)}.")
    num_class = _int_value(doc.get("num_class", 1), "/num_class")
    if num_class != 1:
        raise _err(f"the model has {num_class} classes; only single-output regression is supported.",
                   "/num_class")
    ntpi = _int_value(doc.get("num_tree_per_iteration", 1), "/num_tree_per_iteration")
    if ntpi != 1:
        raise _err(f"{ntpi} trees per iteration; only single-output regression is supported.",
                   "/num_tree_per_iteration")
    objective = doc.get("objective")
    if not isinstance(objective, str) or not objective.strip():
        raise _err("the dump has no objective (custom objective?): only the regression objectives "
                   f"{sorted(_LGB_IDENTITY_OBJECTIVES)[:6]}... are supported.", "/objective")
    tokens = objective.split()
    if tokens[0] not in _LGB_IDENTITY_OBJECTIVES:
        kind = ("classification" if tokens[0] in ("binary", "multiclass", "multiclassova", "cross_entropy",
                                                   "xentropy", "cross_entropy_lambda", "xentlambda") else
                "ranking" if tokens[0] in ("lambdarank", "rank_xendcg", "xendcg") else
                "log-link regression" if tokens[0] in ("poisson", "gamma", "tweedie") else "unsupported")
        raise _err(
            f"objective '{objective:.60}' is {kind}: only regression objectives whose prediction is the "
            "raw score are supported (regression, regression_l1, huber, fair, quantile, mape).",
            "/objective",
        )
    if "sqrt" in tokens[1:]:
        raise _err("objective with reg_sqrt=True: predictions are squared raw scores, which is not a sum "
                   "of trees. Retrain with reg_sqrt=False.", "/objective")
    n_features = _int_value(_get(doc, "max_feature_idx", ""), "/max_feature_idx", 0, MAX_FEATURES - 1) + 1
    feature_names = _feature_names(doc.get("feature_names"), "/feature_names", n_features)
    average = _get(doc, "average_output", "", bool, required=False, default=False)
    info = _get(doc, "tree_info", "", list)
    T = len(info)
    if T == 0:
        raise _err("the model has no trees.", "/tree_info")
    total = 0
    for t, ti in enumerate(info):
        p = _ptr("/tree_info", t)
        if not isinstance(ti, dict):
            raise _err(f"expected an object, got {_tname(ti)}.", p)
        if "num_leaves" in ti:
            nl = _int_value(ti["num_leaves"], p + "/num_leaves", 1)
            total += 2 * nl - 1
        if _int_value(ti.get("num_cat", 0), p + "/num_cat", 0) > 0:
            raise _err("the tree has categorical splits: only numerical splits are supported.", p + "/num_cat")
    if total > max_nodes:
        raise _err(f"the model has {total} nodes, more than the limit of {max_nodes}.", "/tree_info")
    trees = []
    used = 0
    for t, ti in enumerate(info):
        p = _ptr("/tree_info", t)
        tree = _parse_lightgbm_tree(_get(ti, "tree_structure", p), p + "/tree_structure", n_features,
                                    max_depth, max_nodes - used)
        used += tree.children_left.shape[0]
        trees.append(tree)
    weight = 1.0 / T if average else 1.0
    return trees, n_features, feature_names, 0.0, weight, "lightgbm"


# --------------------------------------------------------------------------------------------
# skops
# --------------------------------------------------------------------------------------------

def _skops_types(schema: Any) -> tuple[set[str], set[str]]:
    """All ``module.class`` names and loaders in a skops schema (iterative walk)."""
    types: set[str] = set()
    loaders: set[str] = set()
    stack = [schema]
    seen = 0
    while stack:
        o = stack.pop()
        seen += 1
        if isinstance(o, dict):
            if "__loader__" in o or "__class__" in o or "__module__" in o:
                types.add(f"{o.get('__module__')}.{o.get('__class__')}")
                loaders.add(str(o.get("__loader__")))
            stack.extend(o.values())
        elif isinstance(o, list):
            stack.extend(o)
    return types, loaders


def _load_skops(data: bytes, max_nodes: int, max_depth: int, max_bytes: int):
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            infos = z.infolist()
            if len(infos) > 1_000_000:
                raise _err("the skops archive has too many entries.")
            unpacked = sum(i.file_size for i in infos)
            if unpacked > max_bytes:
                raise _err(f"the skops archive unpacks to {unpacked} bytes, more than the limit of {max_bytes}.")
            for i in infos:
                if i.filename != "schema.json" and not i.filename.endswith(".npy"):
                    raise _err(f"unexpected entry '{i.filename[:80]}' in the skops archive.")
            raw = z.read("schema.json")
    except ForestFormatError:
        raise
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, KeyError, NotImplementedError, zlib.error) as e:
        raise _err(f"the skops file cannot be read: {e}. Re-export it with skops.io.dump.") from None
    schema = _parse_json(raw)
    if not isinstance(schema, dict):
        raise _err("the skops schema.json is not an object.")
    types, loaders = _skops_types(schema)
    bad_loaders = sorted(loaders - _SKOPS_ALLOWED_LOADERS)
    bad = set(types - SKOPS_ALLOWED_TYPES)
    import skops.io as sio

    try:
        untrusted = sio.get_untrusted_types(data=data)
    except Exception as e:  # noqa: BLE001 - corrupt file, unknown protocol, ...
        raise _err(f"the skops file cannot be audited: {type(e).__name__}: {e}") from None
    bad |= set(untrusted) - SKOPS_ALLOWED_TYPES
    if bad or bad_loaders:
        what = sorted(bad) + [f"loader {x}" for x in bad_loaders]
        raise _err(
            "the skops file contains types that are not allowed here: " + ", ".join(what[:20])
            + (" ..." if len(what) > 20 else "")
            + ". Only a bare fitted DecisionTreeRegressor, ExtraTreeRegressor, RandomForestRegressor, "
            "ExtraTreesRegressor or GradientBoostingRegressor is accepted (no pipelines or custom code).",
        )
    top = f"{schema.get('__module__')}.{schema.get('__class__')}"
    if top not in _SKOPS_ESTIMATORS:
        raise _err(f"the skops file holds a {top}; expected one of "
                   + ", ".join(s.rsplit('.', 1)[1] for s in _SKOPS_ESTIMATORS) + ".")
    trusted = sorted(set(untrusted) & SKOPS_ALLOWED_TYPES)
    try:
        est = sio.loads(data, trusted=trusted)
    except Exception as e:  # noqa: BLE001
        raise _err(f"the skops file cannot be loaded: {type(e).__name__}: {e}") from None
    if f"{type(est).__module__}.{type(est).__qualname__}" not in _SKOPS_ESTIMATORS:
        raise _err(f"the skops file holds a {type(est).__name__}, not a supported tree model.")
    # size bounds before conversion
    if hasattr(est, "tree_"):
        tree_objs = [est.tree_]
    elif hasattr(est, "estimators_"):
        ests = np.asarray(est.estimators_, dtype=object).reshape(-1)
        tree_objs = [getattr(e, "tree_", None) for e in ests]
    else:
        raise _err("the estimator is not fitted (no trees). Fit it before saving.")
    if any(t is None for t in tree_objs) or not tree_objs:
        raise _err("the estimator is not fitted (no trees). Fit it before saving.")
    n_nodes = sum(int(t.node_count) for t in tree_objs)
    if n_nodes > max_nodes:
        raise _err(f"the model has {n_nodes} nodes, more than the limit of {max_nodes}.")
    deepest = max(int(t.max_depth) for t in tree_objs)
    if deepest > max_depth:
        raise _err(f"a tree has depth {deepest}, more than the limit of {max_depth}.")
    if any(int(getattr(t, "n_outputs", 1)) != 1 for t in tree_objs):
        raise _err("multi-output trees are not supported.")
    from solver.forest import TreeEnsemble

    try:
        return TreeEnsemble.from_sklearn(est)
    except ForestFormatError:
        raise
    except (ValueError, TypeError, AttributeError, NotImplementedError, IndexError, KeyError) as e:
        raise _err(f"the scikit-learn model cannot be converted: {e}") from None


# --------------------------------------------------------------------------------------------
# fire-forest JSON
# --------------------------------------------------------------------------------------------

def _load_fire(doc: Any, max_nodes: int, max_depth: int):
    from solver.forest import TreeEnsemble

    if not isinstance(doc, dict) or doc.get("format") != "fire-forest":
        raise _err("not a fire-forest document (expected 'format': 'fire-forest').", "/format")
    try:
        return TreeEnsemble.from_dict(doc, max_nodes=max_nodes, max_depth=max_depth, max_features=MAX_FEATURES)
    except ForestFormatError:
        raise
    # StopIteration/ArithmeticError: defensive, an upload must never surface as a server error
    except (ValueError, TypeError, KeyError, IndexError, StopIteration, ArithmeticError) as e:
        field = getattr(e, "field", None)
        field = "/" + field if isinstance(field, str) and field else "file"
        detail = getattr(e, "detail", None) or str(e) or type(e).__name__
        where = f"{field[1:]} " if field != "file" else ""
        raise _err(f"invalid fire-forest document: {where}{detail}", field) from None


# --------------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------------

def load_forest(
    data: bytes,
    filename: str | None = None,
    declared_format: str | None = None,
    *,
    max_nodes: int = DEFAULT_MAX_NODES,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_bytes: int = DEFAULT_MAX_BYTES,
):
    """Parse an uploaded forest into a :class:`solver.forest.TreeEnsemble` without running any code
    from it. ``declared_format`` (optional; one of :data:`FORMATS` or an alias such as "xgboost",
    "lightgbm", "sklearn") must match the content. Raises :class:`ForestFormatError`."""
    data = _as_bytes(data)
    if len(data) > max_bytes:
        raise _err(f"the file has {len(data)} bytes, more than the limit of {max_bytes}.")
    declared = None
    if declared_format is not None and str(declared_format).strip():
        key = str(declared_format).strip().lower()
        if key in _PICKLE_NAMES:
            raise _pickle_error("declared as a pickle")
        if key not in _ALIASES:
            raise _err(f"unknown format '{str(declared_format)[:40]}'; supported: {', '.join(FORMATS)}.",
                       "format", 415)
        declared = _ALIASES[key]
    fmt, payload = _sniff(data, filename, max_bytes)
    if fmt == "pickle":
        raise payload
    if isinstance(payload, ForestFormatError):
        raise payload
    if declared is not None and fmt != declared and not (
        {fmt, declared} <= {"xgboost-json", "xgboost-ubjson"}
    ):
        raise _err(f"the file was declared as {declared} but its content is {fmt}.", "format", 422)
    try:
        if fmt == "xgboost-ubjson":
            payload = _parse_ubjson(payload if isinstance(payload, bytes) else data)
            if not isinstance(payload, dict) or not isinstance(payload.get("learner"), dict):
                raise _err("a UBJSON document that is not an XGBoost model (no 'learner').", "file", 415)
            fmt = "xgboost-json"
        if fmt == "fire-json":
            return _load_fire(payload, max_nodes, max_depth)
        if fmt == "skops":
            return _load_skops(payload, max_nodes, max_depth, max_bytes)
        if fmt == "xgboost-json":
            parsed = _parse_xgboost(payload, max_nodes, max_depth)
        elif fmt == "lightgbm-json":
            parsed = _parse_lightgbm(payload, max_nodes, max_depth)
        else:  # pragma: no cover - _sniff returns an error for everything else
            raise _err(f"unrecognized file format. {_FIX_HINT}", "file", 415)
    except ForestFormatError:
        raise
    except RecursionError:
        raise _err("the document is nested too deeply.") from None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError, struct.error) as e:
        raise _err(f"invalid {fmt} model: {type(e).__name__}: {e}") from None
    trees, n_features, names, base, weight, kind = parsed
    return _make_ensemble(trees, n_features, names, base, weight, kind, max_nodes, max_depth)
