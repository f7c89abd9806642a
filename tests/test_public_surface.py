"""The curated public surface: __all__ is sorted, complete and documented."""

from __future__ import annotations

import importlib
import inspect

import pytest

import dpkit

MODULES = ["dpkit", "dpkit.distributions", "dpkit.divergences", "dpkit.guarantees", "dpkit.mechanisms",
           "dpkit.accounting", "dpkit.random", "dpkit.verify", "dpkit.ledger", "dpkit.query"]


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_and_resolves(name):
    mod = importlib.import_module(name)
    assert list(mod.__all__) == sorted(mod.__all__, key=str.lower) or list(mod.__all__) == sorted(mod.__all__)
    for attr in mod.__all__:
        assert hasattr(mod, attr), f"{name}.{attr} is listed in __all__ but missing"


@pytest.mark.parametrize("name", MODULES)
def test_every_public_function_has_a_docstring_with_an_example_or_source(name):
    mod = importlib.import_module(name)
    for attr in mod.__all__:
        obj = getattr(mod, attr)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            doc = inspect.getdoc(obj) or ""
            assert len(doc) > 20, f"{name}.{attr} lacks a docstring"


def test_session_is_the_query_engine_s_imported_lazily():
    assert dpkit.Session is importlib.import_module("dpkit.query").Session
    with pytest.raises(AttributeError):
        dpkit.no_such_name  # noqa: B018


def test_public_classes_in_top_level_are_reexports():
    assert dpkit.Laplace is importlib.import_module("dpkit.distributions").Laplace
    assert dpkit.kl is importlib.import_module("dpkit.divergences").kl


def test_every_top_level_name_resolves_after_a_bare_import():
    """In a fresh interpreter, ``import dpkit`` alone makes every name of ``dpkit.__all__`` reachable,
    the subpackages included (they are imported on first use, not by ``import dpkit``)."""
    import subprocess
    import sys

    code = (
        "import sys, dpkit\n"
        "heavy = [m for m in ('numpy', 'scipy', 'mpmath', 'duckdb') if m in sys.modules]\n"
        "assert not heavy, f'import dpkit imported {heavy}'\n"
        "missing = [n for n in dpkit.__all__ if getattr(dpkit, n, None) is None]\n"
        "assert not missing, missing\n"
        "assert set(dpkit.__all__) <= set(dir(dpkit))\n"
        "import types\n"
        "for n in ('accounting', 'guarantees', 'mechanisms', 'verify', 'query', 'ledger', 'random'):\n"
        "    assert isinstance(getattr(dpkit, n), types.ModuleType), n\n"
        "print('ok', len(dpkit.__all__))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok ")


def test_top_level_names_are_the_subpackages_objects():
    assert dpkit.Accountant is importlib.import_module("dpkit.accounting").Accountant
    assert dpkit.mechanisms is importlib.import_module("dpkit.mechanisms")
    assert dpkit.verify is importlib.import_module("dpkit.verify")
    assert dpkit.open_ledger is importlib.import_module("dpkit.ledger").open_ledger
    assert dpkit.secure_rng is importlib.import_module("dpkit.random").secure_rng
    assert dpkit.DataDependentFailure is importlib.import_module("dpkit.errors").DataDependentFailure
