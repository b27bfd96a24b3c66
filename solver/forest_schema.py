"""The ``fire-forest`` document: its JSON schema, the checks of untrusted trees, their canonical arrays.

:class:`ForestDocument` is a validated forest (its trees as canonical node arrays with their depth-first
layout, and its scalars) and reads and writes the JSON; ``solver.forest.TreeEnsemble`` is a ForestDocument
that also routes rows to leaves, predicts and names each leaf's conditions.

JSON schema ``fire-forest`` version 1 (what :meth:`ForestDocument.to_dict` writes and
:meth:`ForestDocument.from_dict` validates; also documented in ``docs/forest-schema.md``)::

    {
      "format": "fire-forest",            required, exactly this string
      "version": 1,                       required, exactly 1
      "kind": "random_forest",            optional string (default "custom"): random_forest,
                                          extra_trees, gradient_boosting, decision_tree or custom;
                                          only used by to_sklearn() to pick the estimator class
      "n_outputs": 1,                     optional integer >= 1 (default 1): K, the outputs of
                                          the prediction (e.g. classes), at most max_outputs
      "n_features": 8,                    required integer >= 1: columns of X
      "feature_names": ["MedInc", ...],   optional: n_features unique non-empty strings
                                          (default "x0", "x1", ...)
      "base_score": 0.0,                  required finite number added to every prediction;
                                          for n_outputs K > 1 a list of K finite numbers
      "tree_weight": 0.01,                required finite number multiplying every leaf value
                                          (random forest: 1/T; boosting: 1, learning rate is
                                          already folded into the values)
      "trees": [                          required non-empty list, one object per tree
        {
          "output": 2,                    optional integer in [0, n_outputs): the output a
                                          scalar-valued (per-output) tree adds to; required for
                                          such a tree when n_outputs > 1, and only 0 allowed
                                          when n_outputs is 1; absent for a vector tree
          "children_left":  [1, -1, -1],  required, one entry per node; node 0 is the root;
          "children_right": [2, -1, -1],  a leaf has both children -1, a split node has two
                                          valid child ids; every node but the root has exactly
                                          one parent and is reachable from the root
          "feature":   [0, -2, -2],       required integers; at split nodes in [0, n_features),
                                          ignored at leaves (write -2)
          "threshold": [2.5, -2.0, -2.0], required finite numbers; x goes left iff
                                          float32(x[feature]) <= threshold
          "value":     [0.0, 1.5, 3.0],   required finite numbers: node outputs (leaves matter);
                                          a vector tree (n_outputs K > 1, no "output") has a
                                          list of K finite numbers per node instead
          "missing_go_left": [true, false, false],
                                          optional booleans (default all false): where NaN goes
          "n_samples": [100, 60, 40]      optional integers >= 0: training samples per node
        }
      ]
    }

Limits on untrusted input (keyword arguments of ``from_dict``/``ForestDocument``): at most
``max_nodes`` nodes in total (default 5,000,000), tree depth at most ``max_depth`` (default 64),
``n_features`` at most ``max_features`` (default 1,000,000), ``n_outputs`` at most ``max_outputs``
(default 10,000). Violations raise
:class:`ForestSchemaError` whose ``field`` is a path such as ``trees/3/children_left/17``.
Python's ``json`` writes floats with ``repr``, so float64 thresholds and values round-trip
exactly through ``json.dumps``/``json.loads``. A one-output ensemble's document has neither
``n_outputs`` nor ``output`` keys: it is exactly what earlier versions wrote.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from numbers import Real
from typing import Any, Self

import numpy as np

from ._tree_kernels import depth_first_leaves
from ._validation import SchemaError, check_feature_names, check_keys, is_integer, node_array, require_finite

FOREST_FORMAT = "fire-forest"
FOREST_FORMAT_VERSION = 1
DEFAULT_MAX_NODES = 5_000_000
DEFAULT_MAX_DEPTH = 64
DEFAULT_MAX_FEATURES = 1_000_000
DEFAULT_MAX_OUTPUTS = 10_000
KINDS = ("random_forest", "extra_trees", "gradient_boosting", "decision_tree", "custom")

LEAF = -1
LEAF_FEATURE = -2
_INT32_MAX = int(np.iinfo(np.int32).max)

_TOP_LEVEL_KEYS = {
    "format",
    "version",
    "kind",
    "n_outputs",
    "n_features",
    "feature_names",
    "base_score",
    "tree_weight",
    "trees",
}
_REQUIRED_TOP_LEVEL_KEYS = ("format", "version", "n_features", "base_score", "tree_weight", "trees")
_REQUIRED_TREE_KEYS = ("children_left", "children_right", "feature", "threshold", "value")
_OPTIONAL_TREE_KEYS = ("missing_go_left", "n_samples", "output")


class ForestSchemaError(SchemaError):
    """An invalid tree ensemble; ``field`` is the JSON path of the offending entry."""


@dataclass(frozen=True, eq=False)
class Tree:
    """One binary regression tree as parallel per-node arrays (scikit-learn's layout).

    ``TreeEnsemble`` validates the arrays and stores canonical copies (int32, float64, bool).
    In an ensemble with ``n_outputs`` K > 1 a tree is either a *vector tree* (``value`` of shape
    (n_nodes, K), ``output`` None: it adds to every output) or a *per-output tree* (``value`` of
    shape (n_nodes,), ``output`` = k: it adds to output k only). In a one-output ensemble ``value``
    is (n_nodes,) and ``output`` is None (0 is accepted and stored as None).
    """

    children_left: np.ndarray  # int32 (n_nodes,), -1 at leaves
    children_right: np.ndarray  # int32 (n_nodes,), -1 at leaves
    feature: np.ndarray  # int32 (n_nodes,), -2 at leaves
    threshold: np.ndarray  # float64 (n_nodes,): go left iff float32(x[feature]) <= threshold
    value: np.ndarray  # float64 (n_nodes,) or, for a vector tree, (n_nodes, K): node output before tree_weight
    missing_go_left: np.ndarray | None = None  # bool (n_nodes,): where NaN goes (None: right)
    n_samples: np.ndarray | None = None  # int64 (n_nodes,): training samples per node
    output: int | None = None  # per-output tree of a K > 1 ensemble: the output it adds to

    @property
    def is_vector(self) -> bool:
        """Whether every node holds a vector of values (one per output), not one number."""
        return np.ndim(self.value) == 2

    @property
    def n_nodes(self) -> int:
        return len(self.children_left)


def _require_integer(value, field: str, minimum: int, maximum: int | None = None) -> int:
    if not is_integer(value):
        raise ForestSchemaError(field, f"must be an integer, got {type(value).__name__}")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise ForestSchemaError(field, f"is {value} but must be {bound}")
    return int(value)


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _check_children(prefix: str, left: np.ndarray, right: np.ndarray) -> None:
    """Leaves have both children -1, splits two in-range children, non-root nodes one parent."""
    n_nodes = left.shape[0]
    half_leaf = (left == LEAF) != (right == LEAF)
    if half_leaf.any():
        i = _first(half_leaf)
        raise ForestSchemaError(
            f"{prefix}/children_left/{i}",
            f"node {i} has children ({left[i]}, {right[i]}): a leaf has both children -1 and a "
            "split node has two valid child ids",
        )
    for name, children in (("children_left", left), ("children_right", right)):
        out_of_range = (children != LEAF) & ((children < 0) | (children >= n_nodes))
        if out_of_range.any():
            i = _first(out_of_range)
            raise ForestSchemaError(
                f"{prefix}/{name}/{i}", f"is {children[i]} but must be -1 (leaf) or a node id in [1, {n_nodes})"
            )
        points_to_root = children == 0
        if points_to_root.any():
            i = _first(points_to_root)
            raise ForestSchemaError(
                f"{prefix}/{name}/{i}",
                "is 0 but node 0 is the root and cannot be a child; renumber so the root is node 0",
            )
    split = left != LEAF
    parent_count = np.bincount(np.concatenate([left[split], right[split]]), minlength=n_nodes)
    if (parent_count > 1).any():
        node = _first(parent_count > 1)
        references = sorted(
            [(int(i), "children_left") for i in np.flatnonzero(left == node)]
            + [(int(i), "children_right") for i in np.flatnonzero(right == node)]
        )
        second, name = references[1]
        raise ForestSchemaError(
            f"{prefix}/{name}/{second}",
            f"node {node} is referenced {len(references)} times (as a child of nodes "
            f"{[i for i, _ in references]}): in a tree every node except the root has exactly "
            "one parent",
        )
    orphan = parent_count[1:] == 0
    if orphan.any():
        node = _first(orphan) + 1
        raise ForestSchemaError(
            f"{prefix}/children_left",
            f"node {node} is nobody's child, so it is unreachable from the root (node 0); remove it or link it",
        )


@dataclass(frozen=True)
class _TreeLayout:
    """Structure derived from a validated tree."""

    leaf_nodes: np.ndarray  # int32, leaves in left-to-right DFS order
    leaf_depth: np.ndarray  # int32, number of splits above each of those leaves
    parent: np.ndarray  # int32 (n_nodes,), -1 at the root


def _is_number(value) -> bool:
    """A JSON number (not a boolean) that numpy holds as float64 (integers of at most 64 bits)."""
    if is_integer(value):
        return -(2**63) <= value < 2**63
    return isinstance(value, Real) and not isinstance(value, bool)


def _vector_values(values, field: str, n_outputs: int) -> np.ndarray:
    """A vector tree's per-node values, one list of ``n_outputs`` finite numbers per node, as float64 (n_nodes, K)."""
    K = n_outputs
    shape_hint = (
        f"n_outputs is {K}: give each node a list of {K} numbers (a vector tree), or give the tree an "
        "'output' index and one number per node (a per-output tree)"
    )
    if not isinstance(values, (list, tuple, np.ndarray)):
        raise ForestSchemaError(field, f"must be a list of {K}-number lists, got {type(values).__name__}")
    try:
        array = np.asarray(values)
    except (ValueError, TypeError, OverflowError):
        array = np.asarray([], dtype=object)  # ragged: found below
    if not (array.ndim == 2 and array.shape[1] == K and (array.dtype.kind in "iuf" or array.size == 0)):
        if isinstance(values, np.ndarray):
            raise ForestSchemaError(
                field, f"has shape {values.shape} and dtype {values.dtype} but must be numbers of shape (n_nodes, {K})"
            )
        for i, row in enumerate(values):
            if not isinstance(row, (list, tuple, np.ndarray)):
                raise ForestSchemaError(f"{field}/{i}", f"is {row!r:.40} but {shape_hint}")
            if len(row) != K:
                raise ForestSchemaError(f"{field}/{i}", f"has {len(row)} numbers but {shape_hint}")
            for k, number in enumerate(row):
                if not _is_number(number):
                    raise ForestSchemaError(f"{field}/{i}/{k}", f"is {number!r:.40} but this list must hold numbers")
        raise ForestSchemaError(field, f"must be a non-empty list of {K}-number lists")
    array = np.ascontiguousarray(array, dtype=np.float64)
    nonfinite = np.argwhere(~np.isfinite(array))
    if nonfinite.size:
        i, k = (int(v) for v in nonfinite[0])
        raise ForestSchemaError(f"{field}/{i}/{k}", f"is {array[i, k]} but must be a finite number")
    return array


def _tree_output(tree: Tree, prefix: str, n_outputs: int) -> int | None:
    """The checked ``output`` of a tree (None for a vector tree and in a one-output ensemble)."""
    output = tree.output
    field = f"{prefix}/output"
    if n_outputs == 1:
        if output is not None:
            _require_integer(output, field, 0, 0)
        return None
    if output is None:
        return None  # a vector tree: its values are checked as K-vectors
    return _require_integer(output, field, 0, n_outputs - 1)


def _canonical_tree(
    index: int, tree: Tree, n_features: int, max_depth: int | None, n_outputs: int = 1
) -> tuple[Tree, _TreeLayout]:
    """Validate one tree; return a canonical copy (int32/float64/bool arrays) and its layout."""
    prefix = f"trees/{index}"
    output = _tree_output(tree, prefix, n_outputs)
    vector = n_outputs > 1 and output is None

    def checked_array(name: str, kind: str) -> np.ndarray:
        if name == "value" and vector:
            return _vector_values(tree.value, f"{prefix}/value", n_outputs)
        return node_array(getattr(tree, name), f"{prefix}/{name}", kind, ForestSchemaError)

    left = checked_array("children_left", "int")
    n_nodes = left.shape[0]
    if n_nodes == 0:
        raise ForestSchemaError(
            f"{prefix}/children_left",
            "is empty: a tree needs at least one node (a single leaf is children_left = children_right = [-1])",
        )
    if n_nodes > _INT32_MAX:
        raise ForestSchemaError(prefix, f"has {n_nodes} nodes; at most {_INT32_MAX} are supported")
    arrays = {
        "children_right": checked_array("children_right", "int"),
        "feature": checked_array("feature", "int"),
        "threshold": checked_array("threshold", "float"),
        "value": checked_array("value", "float"),
        "missing_go_left": (
            np.zeros(n_nodes, np.bool_) if tree.missing_go_left is None else checked_array("missing_go_left", "bool")
        ),
    }
    if tree.n_samples is not None:
        arrays["n_samples"] = checked_array("n_samples", "int")
    for name, array in arrays.items():
        if array.shape[0] != n_nodes:
            raise ForestSchemaError(
                f"{prefix}/{name}",
                f"has {array.shape[0]} entries but children_left has {n_nodes}: give exactly one per node",
            )
    right = arrays["children_right"]
    _check_children(prefix, left, right)
    is_split = left != LEAF
    feature = arrays["feature"]
    bad_feature = is_split & ((feature < 0) | (feature >= n_features))
    if bad_feature.any():
        i = _first(bad_feature)
        raise ForestSchemaError(
            f"{prefix}/feature/{i}",
            f"is {feature[i]} at split node {i} but must be a column index in [0, {n_features})",
        )
    if "n_samples" in arrays and (arrays["n_samples"] < 0).any():
        i = _first(arrays["n_samples"] < 0)
        raise ForestSchemaError(f"{prefix}/n_samples/{i}", "must be a sample count >= 0")

    left = left.astype(np.int32)
    right = right.astype(np.int32)
    leaf_nodes, parent, depth = depth_first_leaves(left, right)
    if (depth < 0).any():
        node = _first(depth < 0)
        raise ForestSchemaError(
            f"{prefix}/children_left",
            f"node {node} is unreachable from the root (node 0): its parent links form a cycle",
        )
    tree_depth = int(depth.max())
    if max_depth is not None and tree_depth > max_depth:
        raise ForestSchemaError(
            prefix,
            f"has depth {tree_depth}, above the limit of {max_depth}; "
            "grow shallower trees (max_depth) or raise the limit",
        )
    canonical = Tree(
        children_left=left,
        children_right=right,
        feature=np.where(is_split, feature, LEAF_FEATURE).astype(np.int32),
        threshold=arrays["threshold"],
        value=arrays["value"],
        missing_go_left=arrays["missing_go_left"],
        n_samples=arrays.get("n_samples"),
        output=output,
    )
    return canonical, _TreeLayout(leaf_nodes, depth[leaf_nodes], parent)


def _check_base_score(base_score, n_outputs: int) -> float | np.ndarray:
    """A finite number for one output; a float64 (K,) array of K finite numbers for K > 1 outputs."""
    if n_outputs == 1:
        return require_finite(base_score, "base_score", ForestSchemaError)
    if not isinstance(base_score, (list, tuple, np.ndarray)) or getattr(base_score, "ndim", 1) != 1:
        raise ForestSchemaError(
            "base_score", f"must be a list of {n_outputs} numbers (one per output) since n_outputs is {n_outputs}"
        )
    if len(base_score) != n_outputs:
        raise ForestSchemaError(
            "base_score", f"has {len(base_score)} numbers but n_outputs is {n_outputs}: give one per output"
        )
    scores = np.array(
        [require_finite(score, f"base_score/{k}", ForestSchemaError) for k, score in enumerate(base_score)],
        dtype=np.float64,
    )
    scores.flags.writeable = False
    return scores


def _check_feature_names(feature_names, n_features: int) -> list[str]:
    if feature_names is None:
        return [f"x{j}" for j in range(n_features)]
    if not isinstance(feature_names, (list, tuple, np.ndarray)):
        raise ForestSchemaError("feature_names", "must be a list of strings")
    names = list(feature_names)
    if len(names) != n_features:
        raise ForestSchemaError(
            "feature_names", f"has {len(names)} names but n_features is {n_features}; give one name per column"
        )
    check_feature_names(names, "feature_names", ForestSchemaError)
    return [str(name) for name in names]


class ForestDocument:
    """A validated ``fire-forest`` forest: its trees as canonical arrays, their layout, its scalars.

    ``n_outputs`` (K, default 1); ``base_score`` (a float for K = 1, float64 (K,) for K > 1); ``trees``
    (canonical :class:`Tree` copies); ``leaf_nodes`` (per tree, node ids of its leaves in left-to-right DFS
    order), ``leaf_depths`` (per tree, the number of splits above each of those leaves), ``max_depth``;
    ``_parents`` (per tree, int32 (n_nodes,) parent of each node, -1 at the root).

    The arrays are validated (see the module docstring); errors raise ``ForestSchemaError``.
    """

    def __init__(
        self,
        trees: Sequence[Tree],
        n_features: int,
        feature_names=None,
        base_score: float = 0.0,
        tree_weight: float = 1.0,
        kind: str = "custom",
        *,
        n_outputs: int = 1,
        max_nodes: int | None = DEFAULT_MAX_NODES,
        max_depth: int | None = DEFAULT_MAX_DEPTH,
        max_features: int | None = DEFAULT_MAX_FEATURES,
        max_outputs: int | None = DEFAULT_MAX_OUTPUTS,
    ):
        self.n_outputs = _require_integer(n_outputs, "n_outputs", 1, max_outputs)
        self.n_features = _require_integer(n_features, "n_features", 1, max_features)
        self.feature_names = _check_feature_names(feature_names, self.n_features)
        self.base_score = _check_base_score(base_score, self.n_outputs)
        self.tree_weight = require_finite(tree_weight, "tree_weight", ForestSchemaError)
        if not isinstance(kind, str) or not kind or len(kind) > 64:
            raise ForestSchemaError("kind", f"must be a short string such as {', '.join(KINDS)}")
        self.kind = kind
        if len(trees) == 0:
            raise ForestSchemaError("trees", "is empty: an ensemble needs at least one tree")
        # counted before any array is converted
        total_nodes = sum(
            len(tree.children_left) for tree in trees if isinstance(tree.children_left, (list, tuple, np.ndarray))
        )
        if max_nodes is not None and total_nodes > max_nodes:
            raise ForestSchemaError(
                "trees",
                f"have {total_nodes} nodes in total, more than the limit of {max_nodes}; use fewer or smaller trees",
            )
        checked = [_canonical_tree(t, tree, self.n_features, max_depth, self.n_outputs) for t, tree in enumerate(trees)]
        self.trees: tuple[Tree, ...] = tuple(tree for tree, _ in checked)
        self._parents = [layout.parent for _, layout in checked]
        self.leaf_nodes: list[np.ndarray] = [layout.leaf_nodes for _, layout in checked]
        self.leaf_depths = [layout.leaf_depth for _, layout in checked]
        self.max_depth = int(max(depths.max() for depths in self.leaf_depths))

    def with_feature_names(self, feature_names: Sequence[str]) -> Self:
        """The same trees with other feature names (a shallow copy; checked as the constructor does)."""
        renamed = copy.copy(self)
        renamed.feature_names = _check_feature_names(list(feature_names), self.n_features)
        return renamed

    # -- JSON --------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """The ``fire-forest`` JSON document (plain lists, ints, floats, bools)."""
        multi = self.n_outputs > 1
        trees = []
        for tree in self.trees:
            entry = {"output": tree.output} if multi and not tree.is_vector else {}
            entry |= {
                "children_left": tree.children_left.tolist(),
                "children_right": tree.children_right.tolist(),
                "feature": tree.feature.tolist(),
                "threshold": tree.threshold.tolist(),
                "value": tree.value.tolist(),
                "missing_go_left": tree.missing_go_left.tolist(),
            }
            if tree.n_samples is not None:
                entry["n_samples"] = tree.n_samples.tolist()
            trees.append(entry)
        document = {
            "format": FOREST_FORMAT,
            "version": FOREST_FORMAT_VERSION,
            "kind": self.kind,
            "n_outputs": self.n_outputs,
            "n_features": self.n_features,
            "feature_names": list(self.feature_names),
            "base_score": self.base_score.tolist() if multi else self.base_score,
            "tree_weight": self.tree_weight,
            "trees": trees,
        }
        if not multi:  # one output: the document earlier versions wrote
            del document["n_outputs"]
        return document

    @classmethod
    def from_dict(
        cls,
        document: Mapping[str, Any],
        *,
        max_nodes: int = DEFAULT_MAX_NODES,
        max_depth: int = DEFAULT_MAX_DEPTH,
        max_features: int = DEFAULT_MAX_FEATURES,
        max_outputs: int = DEFAULT_MAX_OUTPUTS,
    ) -> Self:
        """Validate an untrusted ``fire-forest`` document and build the ensemble.

        Raises ``ForestSchemaError`` (a ValueError) naming the offending field.
        """
        if not isinstance(document, Mapping):
            raise ForestSchemaError("", "a fire-forest document must be a JSON object")
        check_keys("", document, _TOP_LEVEL_KEYS, _REQUIRED_TOP_LEVEL_KEYS, ForestSchemaError)
        if document["format"] != FOREST_FORMAT:
            raise ForestSchemaError("format", f"must be {FOREST_FORMAT!r}, got {document['format']!r}")
        version = document["version"]
        if not is_integer(version) or version != FOREST_FORMAT_VERSION:
            raise ForestSchemaError("version", f"is {version!r}; only version {FOREST_FORMAT_VERSION} is supported")
        trees = document["trees"]
        if not isinstance(trees, list):
            raise ForestSchemaError("trees", "must be a list of tree objects")
        for t, tree in enumerate(trees):
            if not isinstance(tree, Mapping):
                raise ForestSchemaError(f"trees/{t}", "must be an object with the node arrays")
            check_keys(
                f"trees/{t}",
                tree,
                set(_REQUIRED_TREE_KEYS + _OPTIONAL_TREE_KEYS),
                _REQUIRED_TREE_KEYS,
                ForestSchemaError,
            )
        return cls(
            [Tree(**{key: tree.get(key) for key in _REQUIRED_TREE_KEYS + _OPTIONAL_TREE_KEYS}) for tree in trees],
            n_features=document["n_features"],
            feature_names=document.get("feature_names"),
            base_score=document["base_score"],
            tree_weight=document["tree_weight"],
            kind=document.get("kind", "custom"),
            n_outputs=document.get("n_outputs", 1),
            max_nodes=max_nodes,
            max_depth=max_depth,
            max_features=max_features,
            max_outputs=max_outputs,
        )
