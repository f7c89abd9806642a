"""Generators: the secure default, fork safety, the labelled insecure generator, the public surface."""

from __future__ import annotations

import copy
import os
import pickle
import sys

import numpy as np
import pytest
import randomgen

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


def _parent_state(rng: np.random.Generator) -> dict:
    """The bit generator's state read through randomgen's own class (the subclass refuses to show it)."""
    bit_generator = rng.bit_generator
    parent = randomgen.ChaCha if isinstance(bit_generator, randomgen.ChaCha) else randomgen.AESCounter
    return parent.state.__get__(bit_generator)


def _same_state(a: dict, b: dict) -> bool:
    if a.keys() != b.keys():
        return False
    return all(_same_state(a[k], b[k]) if isinstance(a[k], dict) else np.array_equal(a[k], b[k]) for k in a)


def test_secure_generators_are_independent_and_labelled() -> None:
    a, b = secure_rng(), secure_rng()
    assert isinstance(a, np.random.Generator) and isinstance(a, SecureGenerator)
    assert _words(a) != _words(b)
    assert a.cipher == "chacha20"
    assert isinstance(a.bit_generator, randomgen.ChaCha)
    assert _parent_state(a)["state"]["rounds"] == 20
    assert repr(a) == "SecureGenerator(chacha20, key from the operating system)"
    assert not is_insecure(a)


def test_secure_key_is_not_a_small_seed() -> None:
    """The 256-bit key is set directly (not through SeedSequence) and uses all 8 key words."""
    keys = [tuple(_parent_state(secure_rng())["state"]["keysetup"]) for _ in range(4)]
    assert len(set(keys)) == 4
    assert all(sum(1 for word in key if word) >= 6 for key in keys)


def test_aes_cipher_where_available() -> None:
    import randomgen

    if not randomgen.AESCounter(key=1).use_aesni:
        with pytest.raises(ValueError, match="AES-NI"):
            secure_rng(cipher="aes128")
        return
    a = secure_rng(cipher="aes128")
    assert a.cipher == "aes128" and isinstance(a.bit_generator, randomgen.AESCounter)
    assert a.bit_generator.use_aesni
    assert _words(a) != _words(secure_rng(cipher="aes128"))


def test_unknown_cipher() -> None:
    with pytest.raises(ValueError, match="cipher must be one of"):
        secure_rng(cipher="rc4")  # type: ignore[arg-type]


def test_secure_generator_refuses_copies() -> None:
    rng = secure_rng()
    for copier in (pickle.dumps, copy.copy, copy.deepcopy):
        for target in (rng, rng.bit_generator):
            with pytest.raises(TypeError, match="refused on dpkit's secure generators"):
                copier(target)


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
    with pytest.raises(TypeError):
        SecureGenerator(seed=0)  # type: ignore[call-arg]
    parent = SecureGenerator()
    children = parent.spawn(2)
    assert all(isinstance(c, SecureGenerator) and not is_insecure(c) for c in children)
    assert len({tuple(_words(g)) for g in [parent, *children]}) == 3


# ---------------------------------------------------------------------------------------------------
# issue 14, item 9: a secure generator cannot be seeded, rewound, copied or made to show its key
# ---------------------------------------------------------------------------------------------------
def _ciphers() -> list[str]:
    return ["chacha20", "aes128"] if randomgen.AESCounter(key=1).use_aesni else ["chacha20"]


def _refused_operations(rng: SecureGenerator) -> dict[str, object]:
    """Everything NumPy's and randomgen's public surface offers to seed, read, set, copy or move a stream."""
    bg = rng.bit_generator
    sibling = secure_rng(cipher=rng.cipher)
    return {
        "bg.seed(0)": lambda: bg.seed(0),
        "bg.seed(key=0)": lambda: bg.seed(key=0),
        "bg.seed()": lambda: bg.seed(),
        "read bg.state": lambda: bg.state,
        "set bg.state": lambda: setattr(bg, "state", _parent_state(sibling)),
        "bg.jumped()": lambda: bg.jumped(),
        "bg.advance(-1)": lambda: bg.advance(-1),
        "bg.spawn(1)": lambda: bg.spawn(1),
        "bg.ctypes": lambda: bg.ctypes,
        "bg.cffi": lambda: bg.cffi,
        "bg._ctypes": lambda: bg._ctypes,
        "bg._cffi": lambda: bg._cffi,
        "bg.__getstate__()": lambda: bg.__getstate__(),
        "bg.__setstate__": lambda: bg.__setstate__(_parent_state(sibling)),
        "bg.__reduce__()": lambda: bg.__reduce__(),
        "bg.__init__(key=0)": lambda: bg.__init__(key=0),
        "bg._seed_from_seq": lambda: bg._seed_from_seq(np.random.SeedSequence(0)),
        "bg._seed_with_seed_sequence": lambda: bg._seed_with_seed_sequence(0),
        "bg._configure_from_state": lambda: bg._configure_from_state(_parent_state(sibling)),
        "bg.use_simd / use_aesni = False": lambda: setattr(
            bg, "use_aesni" if rng.cipher == "aes128" else "use_simd", False
        ),
        "bg.__class__ = ...": lambda: setattr(bg, "__class__", type(sibling.bit_generator)),
        "rng.__setstate__(state)": lambda: rng.__setstate__(_parent_state(sibling)),
        "rng.__setstate__(bit generator)": lambda: rng.__setstate__(np.random.PCG64(0)),
        "rng.__getstate__()": lambda: rng.__getstate__(),
        "rng.__reduce__()": lambda: rng.__reduce__(),
        "rng.__init__()": lambda: rng.__init__(),
        "SecureGenerator.__init__(rng)": lambda: SecureGenerator.__init__(rng),
        "rng.__class__ = Generator": lambda: setattr(rng, "__class__", InsecureGenerator),
        "rng._bit_generator = ...": lambda: setattr(rng, "_bit_generator", np.random.PCG64(0)),
    }


@pytest.mark.parametrize("cipher", _ciphers())
def test_every_seeding_state_and_copy_path_is_refused_and_changes_nothing(cipher: str) -> None:
    rng = secure_rng(cipher=cipher)  # type: ignore[arg-type]
    _words(rng)
    for name, operation in _refused_operations(rng).items():
        before = _parent_state(rng)
        with pytest.raises(TypeError, match="refused on dpkit's secure generators"):
            operation()  # type: ignore[operator]
        assert _same_state(before, _parent_state(rng)), name
        assert type(rng) is SecureGenerator and not is_insecure(rng), name
    for shared in (default_rng(), default_rng().bit_generator):  # the process's generator refuses too
        with pytest.raises(TypeError, match="refused"):
            (shared.bit_generator if shared is default_rng() else shared).seed(0)  # type: ignore[union-attr]
    with pytest.raises(TypeError, match="refused"):
        default_rng().bit_generator.state = _parent_state(rng)
    assert not is_insecure(default_rng())


def test_the_issue_replay_attack_is_refused() -> None:
    """Issue 14 item 9: seed twice (or save and restore the state) to replay noise and subtract it."""
    from dpkit.mechanisms import Laplace

    rng = secure_rng()
    m = Laplace(sensitivity=1.0, epsilon=0.1)
    with pytest.raises(TypeError, match="refused"):
        rng.bit_generator.seed(0)
    with pytest.raises(TypeError, match="refused"):
        saved = rng.bit_generator.state  # noqa: F841 - reading the state (and its key) is refused
    first, second = m.release(100.0, rng=rng), m.release(100.0, rng=rng)
    assert not first.insecure and not second.insecure
    assert first.value != second.value  # fresh noise (equal with probability ~1e-5 at this scale)


@pytest.mark.parametrize("cipher", _ciphers())
def test_bypassing_the_refusals_makes_the_generator_report_insecure_for_good(cipher: str) -> None:
    """Code that calls randomgen's methods unbound on the object gets past the refusals; is_insecure notices."""
    parent = randomgen.ChaCha if cipher == "chacha20" else randomgen.AESCounter

    reseeded = secure_rng(cipher=cipher)  # type: ignore[arg-type]
    parent.seed(reseeded.bit_generator, key=0)  # a known key
    assert is_insecure(reseeded)
    _words(reseeded, 100)
    assert is_insecure(reseeded)  # for good, not only until the next draw

    rewound = secure_rng(cipher=cipher)  # type: ignore[arg-type]
    _words(rewound)
    saved = parent.state.__get__(rewound.bit_generator)
    _words(rewound)
    assert not is_insecure(rewound)  # sees the current position
    parent.state.__set__(rewound.bit_generator, saved)  # rewind: the next draws would repeat
    assert is_insecure(rewound)

    swapped = secure_rng(cipher=cipher)  # type: ignore[arg-type]
    np.random.Generator.__init__(swapped, np.random.PCG64(0))  # re-bound to a seeded bit generator
    assert is_insecure(swapped)

    if cipher == "aes128":
        moved = secure_rng(cipher=cipher)  # type: ignore[arg-type]
        _words(moved)
        assert not is_insecure(moved)
        parent.advance(moved.bit_generator, -1)  # type: ignore[attr-defined]
        assert is_insecure(moved)


def test_lookalikes_are_insecure() -> None:
    class Subclass(SecureGenerator):
        def integers(self, *args: object, **kwargs: object) -> int:  # type: ignore[override]
            return 0

    assert is_insecure(Subclass())

    class Plain(np.random.Generator):
        pass

    impostor = Plain(np.random.PCG64(0))
    impostor.__class__ = SecureGenerator  # a seeded generator dressed as a secure one
    assert is_insecure(impostor)
    disguised = insecure_seeded(0)
    disguised.__class__ = SecureGenerator
    assert is_insecure(disguised)


def _raw_fork_words(draw) -> list[int]:  # type: ignore[no-untyped-def]
    """Run ``draw()`` in a child made by libc's fork() through ctypes: no Python at-fork hook runs."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    read, write = os.pipe()
    pid = libc.fork()
    if pid == 0:  # child: no register_at_fork hook has run
        try:
            os.close(read)
            os.write(write, repr(draw()).encode())
        finally:
            os._exit(0)
    assert pid > 0, ctypes.get_errno()
    os.close(write)
    with os.fdopen(read) as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return eval(data)  # a list of ints written by our own child


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="raw fork through libc")
@pytest.mark.parametrize("cipher", _ciphers())
def test_raw_fork_without_at_fork_hooks_does_not_repeat_any_generator(cipher: str) -> None:
    explicit = secure_rng(cipher=cipher)  # type: ignore[arg-type]
    spawned = explicit.spawn(1)[0]
    bit_generator = secure_rng(cipher=cipher).bit_generator  # used only through the bit generator
    shared = default_rng()
    streams = {
        "explicit": (explicit, lambda: _words(explicit)),
        "spawned": (spawned, lambda: _words(spawned)),
        "default": (shared, lambda: _words(default_rng())),
    }
    for name, (parent_rng, draw) in streams.items():
        child = _raw_fork_words(draw)
        assert child != _words(parent_rng), name
    child_raw = _raw_fork_words(lambda: [int(w) for w in bit_generator.random_raw(8)])
    assert child_raw != [int(w) for w in bit_generator.random_raw(8)]
    # a child's generator is still secure, and two children do not share a stream either
    assert _raw_fork_words(lambda: [int(is_insecure(explicit))]) == [0]
    assert _raw_fork_words(lambda: _words(explicit)) != _raw_fork_words(lambda: _words(explicit))
