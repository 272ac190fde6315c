"""The foreign-build tests reuse solver-test helpers, so they register the same markers."""

from tests.solver.conftest import pytest_configure  # noqa: F401
