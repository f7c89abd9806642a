"""One resolver of ``rng=`` for the whole library (issue 13: "four random-generator resolvers").

Every public entry point that draws randomness (mechanism releases and samples, distribution samples, the
exact samplers, the query session) resolves its ``rng`` with :func:`dpkit.random.resolve_rng`, so:

* a non-Generator ``rng`` (an int seed, a string, a legacy ``RandomState``, the function
  ``np.random.default_rng``) is refused with the same :class:`~dpkit.errors.ArgumentTypeError` and the same
  message everywhere, before anything is drawn or spent;
* ``rng=None`` draws from the process's secure generator (:func:`dpkit.random.default_rng`): its
  stream advances, and a given generator leaves it untouched.

The entry points are discovered from the public modules, so a new one without a case here fails
:func:`test_every_public_entry_point_taking_rng_has_a_case`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import randomgen

import dpkit.distributions as D
import dpkit.mechanisms as M
import dpkit.random as R
from dpkit.errors import ArgumentTypeError, DpkitError
from dpkit.guarantees import PureDP
from dpkit.query import Session
from dpkit.random import default_rng, insecure_seeded, is_insecure, resolve_rng, secure_rng

BAD_RNGS = [42, "x", np.random.RandomState(0), np.random.default_rng, np.int64(3)]
MESSAGE = "rng must be a numpy.random.Generator (e.g. dpkit.random.secure_rng()) or None; got {}."

_SESSION_METHODS = ("sql", "histogram", "bounds")


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    df = pd.DataFrame({"uid": range(60), "x": [float(i % 7) for i in range(60)]})
    s = Session(df, privacy_unit="uid", ledger=tmp_path / "ledger.db", budget=PureDP(100.0),
                max_partitions=1, max_rows=1)
    yield s
    s.close()


def _mechanism_cases() -> dict[str, Callable[[Any], object]]:
    exp = M.Exponential(sensitivity=1.0, epsilon=1.0)
    rnm = M.ReportNoisyMax(sensitivity=1.0, epsilon=1.0, noise="exponential")
    u = [1.0, 2.0, 0.5]
    return {
        "Laplace.release": lambda r: M.Laplace(sensitivity=1.0, epsilon=1.0, dimension=2).release([1.0, 2.0], rng=r),
        "Gaussian.release": lambda r: M.Gaussian(sensitivity=1.0, sigma=2.0).release([1.0], rng=r),
        "Geometric.release": lambda r: M.Geometric(sensitivity=1, epsilon=1.0).release(3, rng=r),
        "DiscreteGaussianMechanism.release": lambda r: M.DiscreteGaussianMechanism(sensitivity=1, sigma=2.0).release(
            3, rng=r),
        "RandomizedResponse.release": lambda r: M.RandomizedResponse(epsilon=1.0, categories=3).release([0, 2],
                                                                                                       rng=r),
        "Exponential.release": lambda r: exp.release(u, rng=r),
        "Exponential.sample": lambda r: exp.sample(u, 4, rng=r),
        "Exponential.release_runs": lambda r: exp.release_runs(u, [2, 1, 3], rng=r),
        "Exponential.sample_runs": lambda r: exp.sample_runs(u, [2, 1, 3], 4, rng=r),
        "ReportNoisyMax.release": lambda r: rnm.release(u, rng=r),
        "ReportNoisyMax.sample": lambda r: rnm.sample(u, 4, rng=r),
    }


def _distribution_cases() -> dict[str, Callable[[Any], object]]:
    return {
        "Laplace.sample": lambda r: D.Laplace(0.0, 1.0).sample(3, rng=r),
        "Gaussian.sample": lambda r: D.Gaussian(0.0, 1.0).sample(3, rng=r),
        "DiscreteLaplace.sample": lambda r: D.DiscreteLaplace(0, 1.0).sample(3, rng=r),
        "DiscreteGaussian.sample": lambda r: D.DiscreteGaussian(0, 1.0).sample(3, rng=r),
        "Bernoulli.sample": lambda r: D.Bernoulli(0.3).sample(3, rng=r),
        "Finite.sample": lambda r: D.Finite([0.5, 0.5], support=[0, 1]).sample(3, rng=r),
    }


def _sampler_cases() -> dict[str, Callable[[Any], object]]:
    return {
        "geometric": lambda r: R.geometric(1.5, size=3, rng=r),
        "discrete_laplace": lambda r: R.discrete_laplace(1.5, size=3, rng=r),
        "discrete_gaussian": lambda r: R.discrete_gaussian(1.5, size=3, rng=r),
        "bernoulli_exp": lambda r: R.bernoulli_exp(0.5, size=3, rng=r),
    }


def _session_cases(s: Session) -> dict[str, Callable[[Any], object]]:
    return {
        "Session.sql": lambda r: s.sql("SELECT COUNT(*) AS n FROM t", epsilon=1.0, rng=r),
        "Session.histogram": lambda r: s.histogram("x", [0.0, 3.0, 7.0], epsilon=1.0, max_partitions=1,
                                                   max_rows=1, rng=r),
        "Session.bounds": lambda r: s.bounds("x", epsilon=1.0, max_partitions=1, max_rows=1, rng=r),
    }


LIBRARY_CASES = {**{f"mechanisms.{k}": v for k, v in _mechanism_cases().items()},
                 **{f"distributions.{k}": v for k, v in _distribution_cases().items()},
                 **{f"random.{k}": v for k, v in _sampler_cases().items()}}


def _takes_rng(fn: object) -> bool:
    try:
        return "rng" in inspect.signature(fn).parameters  # type: ignore[arg-type]  # any callable
    except (TypeError, ValueError):
        return False


def test_every_public_entry_point_taking_rng_has_a_case() -> None:
    found = set()
    for prefix, module, base in (("mechanisms", M, M.Mechanism), ("distributions", D, D.Distribution)):
        for name in module.__all__:
            cls = getattr(module, name)
            if isinstance(cls, type) and issubclass(cls, base) and not inspect.isabstract(cls):
                found |= {f"{prefix}.{name}.{m}" for m, fn in inspect.getmembers(cls, inspect.isfunction)
                          if not m.startswith("_") and _takes_rng(fn)}
    found |= {f"random.{n}" for n in R.__all__ if inspect.isfunction(getattr(R, n)) and _takes_rng(getattr(R, n))
              and n not in ("is_insecure", "resolve_rng")}  # these two inspect a generator; they draw nothing
    assert found == set(LIBRARY_CASES)
    session_methods = {m for m, fn in inspect.getmembers(Session, inspect.isfunction) if _takes_rng(fn)}
    assert session_methods == set(_SESSION_METHODS)


@pytest.mark.parametrize("bad", BAD_RNGS, ids=lambda b: type(b).__name__)
def test_resolve_rng_refuses_a_non_generator(bad: object) -> None:
    with pytest.raises(ArgumentTypeError) as info:
        resolve_rng(bad)
    assert str(info.value) == MESSAGE.format(type(bad).__name__)
    assert isinstance(info.value, TypeError) and isinstance(info.value, DpkitError)


def test_resolve_rng_passes_generators_and_gives_the_secure_default_for_none() -> None:
    for g in (secure_rng(), insecure_seeded(1), np.random.default_rng(0)):
        assert resolve_rng(g) is g
    assert resolve_rng(None) is default_rng() and not is_insecure(resolve_rng(None))


@pytest.mark.parametrize("case", sorted(LIBRARY_CASES))
@pytest.mark.parametrize("bad", BAD_RNGS, ids=lambda b: type(b).__name__)
def test_every_entry_point_refuses_a_non_generator_alike(case: str, bad: object) -> None:
    with pytest.raises(ArgumentTypeError) as info:
        LIBRARY_CASES[case](bad)
    assert str(info.value) == MESSAGE.format(type(bad).__name__)


@pytest.mark.parametrize("method", _SESSION_METHODS)
@pytest.mark.parametrize("bad", BAD_RNGS[:3], ids=lambda b: type(b).__name__)
def test_the_session_refuses_a_non_generator_alike_and_spends_nothing(session: Session, method: str,
                                                                       bad: object) -> None:
    before = session.remaining()
    with pytest.raises(ArgumentTypeError) as info:
        _session_cases(session)[f"Session.{method}"](bad)
    assert str(info.value) == MESSAGE.format(type(bad).__name__)
    assert session.remaining() == before


def _default_state() -> dict[str, Any]:
    """The default generator's bit-generator state, read through randomgen's own class (dpkit's refuses)."""
    bit_generator = default_rng().bit_generator
    parent = randomgen.ChaCha if isinstance(bit_generator, randomgen.ChaCha) else randomgen.AESCounter
    return parent.state.__get__(bit_generator)  # type: ignore[no-any-return]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(np.array_equal(a, b))


def _check_none_draws_from_the_secure_default(call: Callable[[Any], object]) -> None:
    state = _default_state()
    given = insecure_seeded(5)
    out = call(given)
    assert _same(_default_state(), state), "a given generator must leave the default one untouched"
    if isinstance(out, M.Release):
        assert out.insecure
    out = call(None)
    assert not _same(_default_state(), state), "rng=None must draw from dpkit.random.default_rng()"
    assert not is_insecure(default_rng())
    if isinstance(out, M.Release):
        assert not out.insecure


@pytest.mark.parametrize("case", sorted(LIBRARY_CASES))
def test_none_draws_from_the_secure_default(case: str) -> None:
    _check_none_draws_from_the_secure_default(LIBRARY_CASES[case])


@pytest.mark.parametrize("method", _SESSION_METHODS)
def test_the_session_with_none_draws_from_the_secure_default(session: Session, method: str) -> None:
    call = _session_cases(session)[f"Session.{method}"]
    _check_none_draws_from_the_secure_default(call)
    result = call(None)
    assert getattr(result, "insecure", False) is False
