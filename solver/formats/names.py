"""Matching an uploaded forest's feature names to the columns of the table it is used on.

Forests name their features as the library that trained them saw them, not always as the table does:

* LightGBM's ``dump_model()`` writes every space of a name as ``_`` (``cut=Very Good`` -> ``cut=Very_Good``);
* a forest trained on an unnamed matrix names features by position: ``x0, x1, ...`` (our loaders, XGBoost
  without feature names) or ``Column_0, Column_1, ...`` (LightGBM).

:func:`match_feature_names` is the one place that decides whether such names are the table's features, in
order, and renames them; the renames it returns belong in the forest's provenance.
"""

from collections.abc import Sequence

from ..forest import TreeEnsemble

_POSITIONAL_PATTERNS = ("x{}", "Column_{}")


def lightgbm_name(name: str) -> str:
    """The name LightGBM writes for a feature called ``name``."""
    return name.replace(" ", "_")


def match_feature_names(forest: TreeEnsemble, names: Sequence[str]) -> tuple[TreeEnsemble, dict[str, str]]:
    """(the forest named with ``names``, {forest's name: table's name} for every name that changed).

    The forest is renamed where its names are ``names`` position by position, up to LightGBM's rewriting, or
    are all positional; otherwise it is returned as it is, with no renames (the caller reports the mismatch).
    """
    names = [str(name) for name in names]
    current = list(forest.feature_names)
    if current == names or len(current) != len(names):
        return forest, {}
    positional = any(current == [pattern.format(j) for j in range(len(names))] for pattern in _POSITIONAL_PATTERNS)
    if not positional and any(ours != theirs and ours != lightgbm_name(theirs) for ours, theirs in zip(current, names)):
        return forest, {}
    renames = {ours: theirs for ours, theirs in zip(current, names) if ours != theirs}
    return forest.with_feature_names(names), renames
