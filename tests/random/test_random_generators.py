"""Generators: the secure default, fork safety, the labelled insecure generator, the public surface."""

from __future__ import annotations

import copy
import os
import pickle
import sys

import numpy as np
import pytest

import dpkit.random as dr
from dpkit.random import (
    InsecureGenerator,
    SecureGenerator,
    default_rng,
    insecure_seeded,
    is_insecure,
    secure_rng,
)


def _words(rng: np.random.Generator, n: int = 8) -> list[int]:
    return [int(w) for w in rng.integers(0, 1 << 64, size=n, dtype=np.uint64)]


def test_all_is_sorted_and_complete() -> None:
    assert dr.__all__ == sorted(dr.__all__)
    public = {name for name in vars(dr) if not name.startswith("_")}
    assert set(dr.__all__) == public
    for name in dr.__all__:
        assert getattr(dr, name).__doc__


def test_secure_generators_are_independent_and_labelled() -> None:
    a, b = secure_rng(), secure_rng()
    assert isinstance(a, np.random.Generator) and isinstance(a, SecureGenerator)
    assert _words(a) != _words(b)
    assert a.cipher == "chacha20"
    assert type(a.bit_generator).__name__ == "ChaCha"
    assert a.bit_generator.state["state"]["rounds"] == 20
    assert repr(a) == "SecureGenerator(chacha20, key from the operating system)"
    assert not is_insecure(a)


def test_secure_key_is_not_a_small_seed() -> None:
    """The 256-bit key is set directly (not through SeedSequence) and uses all 8 key words."""
    keys = [tuple(secure_rng().bit_generator.state["state"]["keysetup"]) for _ in range(4)]
    assert len(set(keys)) == 4
    assert all(sum(1 for word in key if word) >= 6 for key in keys)


def test_aes_cipher_where_available() -> None:
    import randomgen

    if not randomgen.AESCounter(key=1).use_aesni:
        with pytest.raises(ValueError, match="AES-NI"):
            secure_rng(cipher="aes128")
        return
    a = secure_rng(cipher="aes128")
    assert a.cipher == "aes128" and type(a.bit_generator).__name__ == "AESCounter"
    assert _words(a) != _words(secure_rng(cipher="aes128"))


def test_unknown_cipher() -> None:
    with pytest.raises(ValueError, match="cipher must be one of"):
        secure_rng(cipher="rc4")  # type: ignore[arg-type]


def test_secure_generator_refuses_copies() -> None:
    rng = secure_rng()
    with pytest.raises(TypeError, match="cannot be pickled or copied"):
        pickle.dumps(rng)
    with pytest.raises(TypeError, match="cannot be pickled or copied"):
        copy.copy(rng)
    with pytest.raises(TypeError, match="cannot be pickled or copied"):
        copy.deepcopy(rng)


def test_default_rng_is_shared_in_process() -> None:
    assert default_rng() is default_rng()
    assert isinstance(default_rng(), SecureGenerator)


def _in_child(action) -> list[int]:  # type: ignore[no-untyped-def]
    """Run ``action()`` (returning words) in a forked child and return its words."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        try:
            os.close(read)
            os.write(write, repr(action()).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return eval(data)  # a list of ints written by our own child


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin", reason="needs os.fork")
def test_forked_child_does_not_repeat_the_parent_stream() -> None:
    explicit = secure_rng()
    shared = default_rng()
    child_explicit = _in_child(lambda: _words(explicit))
    child_shared = _in_child(lambda: _words(default_rng()))
    assert child_explicit != _words(explicit)
    assert child_shared != _words(shared)
    assert child_explicit != child_shared


def test_insecure_seeded_is_reproducible_and_labelled() -> None:
    a, b = insecure_seeded(1234), insecure_seeded(1234)
    assert _words(a) == _words(b)
    assert _words(insecure_seeded(1)) != _words(insecure_seeded(2))
    assert isinstance(a, InsecureGenerator) and isinstance(a, np.random.Generator)
    assert "Insecure" in type(a).__name__
    assert "Insecure" in repr(a) and "not private" in repr(a)
    assert "for tests and reproducible examples only; not private" in (insecure_seeded.__doc__ or "")
    assert "for tests and reproducible examples only; not private" in (InsecureGenerator.__doc__ or "")
    assert a.seed == 1234
    assert is_insecure(a)


def test_other_generators_count_as_insecure() -> None:
    assert is_insecure(np.random.default_rng(0))
    assert is_insecure(np.random.Generator(np.random.PCG64()))
    assert is_insecure(None)


@pytest.mark.parametrize("seed", [1.5, "7", None, True])
def test_insecure_seed_types(seed: object) -> None:
    with pytest.raises(TypeError, match="seed must be an int"):
        insecure_seeded(seed)  # type: ignore[arg-type]


def test_insecure_seed_negative() -> None:
    with pytest.raises(ValueError, match="seed must be >= 0; got -1"):
        insecure_seeded(-1)
    assert insecure_seeded(np.int64(5)).seed == 5


def test_secure_generator_cannot_be_given_a_key() -> None:
    """The class keys itself, so is_insecure can trust it; spawn keys each child afresh."""
    with pytest.raises(TypeError):
        SecureGenerator(np.random.PCG64(0))  # type: ignore[call-arg]
    parent = SecureGenerator()
    children = parent.spawn(2)
    assert all(isinstance(c, SecureGenerator) and not is_insecure(c) for c in children)
    assert len({tuple(_words(g)) for g in [parent, *children]}) == 3
