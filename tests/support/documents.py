"""Untrusted-document helpers for the schema tests: a valid document with one value replaced."""

import copy


def with_value_at(document, path: str, value):
    """A deep copy of ``document`` with ``value`` at the JSON path ``path`` ("rules/0/conditions/0/operator")."""
    changed = copy.deepcopy(document)
    *parents, last = path.split("/")
    target = changed
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    target[int(last) if isinstance(target, list) else last] = value
    return changed
