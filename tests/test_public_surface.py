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
