"""The test suite, laid out like the code it tests.

- ``tests/solver/``: the library (``solver/``) against independent references; no service imports.
- ``tests/service/``: the service core (``app/core``, ``worker``) on fakeredis (``test_core_*``,
  ``test_api_edge``) and the whole service on a real Redis with real worker processes (marked
  ``integration``; fixtures in ``tests/service/conftest.py``).
- ``tests/bench/``: smoke tests of the benchmarks in ``bench/``.
- ``tests/test_layering.py``: which layer may import which.
- ``tests/support/``: helpers shared by several modules (the shipped tables, the service stack, problem+json
  checks, exported-model runners); no test module imports another's helpers or fixtures.
- ``tests/data/``: the small tables the tests use (gzipped CSV, target last).
"""
