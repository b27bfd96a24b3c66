"""FIRE: fast interpretable rule extraction from tree ensembles (pure numpy/numba library)."""
