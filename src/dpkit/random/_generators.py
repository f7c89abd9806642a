r"""Random generators: the secure default, its per-process cache, and the labelled insecure one.

Contract
--------
* Every generator is a :class:`numpy.random.Generator`, so anything written for NumPy accepts it.
* :func:`secure_rng` returns a :class:`SecureGenerator` driven by a stream cipher whose key is 256
  (ChaCha20) or 128 (AES-128) bits read from the operating system (:func:`secrets.token_bytes`,
  i.e. ``getrandom``/``urandom``).  The key is given to randomgen directly (``key=``), *not* as
  ``seed=``: randomgen passes seeds through NumPy's ``SeedSequence``, a non-cryptographic hash with
  a 128-bit pool, which would be a needless weak point between the OS entropy and the cipher.
* A :class:`SecureGenerator` refuses to be pickled or copied (a copy would repeat the noise stream,
  the classic multiprocessing mistake), and every live one is re-keyed from the OS in a child
  process right after :func:`os.fork` (``os.register_at_fork``), so a forked child never reuses its
  parent's stream.
* :func:`default_rng` is the generator that samplers use when called with ``rng=None``: one
  :class:`SecureGenerator` per process (checked by ``os.getpid()``, a second line of defence next to
  the at-fork hook), created on first use under a lock.  There is no generator with a fixed seed
  anywhere in dpkit's defaults.
* :func:`insecure_seeded` returns an :class:`InsecureGenerator` (PCG64 from a fixed seed) for tests
  and reproducible examples only; it is not private, says so in its class name and repr, and
  :func:`is_insecure` reports ``True`` for it and for every generator that :func:`secure_rng` did
  not make (a plain NumPy ``Generator`` included), so a release can record what produced its noise.

Choice of cipher
----------------
``secure_rng()`` uses **ChaCha20** (20 rounds, the full-strength cipher of RFC 8439 and of the Linux
and OpenBSD kernel generators) from randomgen.  It is constant-time in software on every CPU, takes
a 256-bit key, and at 35-45 M 64-bit words per second on the 2-core AMD EPYC where dpkit's
benchmarks run it already lets the exact discrete Laplace sampler exceed 30 M draws per second
(``benchmarks/bench_sampling.py``).  ``cipher="aes128"`` selects randomgen's AES-128 counter mode,
about 10x faster here (up to ~480 M words/s, like PCG64) but only where the CPU has AES-NI:
randomgen would otherwise fall back to table-based software AES, whose cache-timing side channel
is exactly what a noise generator must not have, so that request is refused there.  AES-128-CTR
is a sound generator too (it is NIST SP 800-90A's CTR_DRBG core).  :func:`secure_rng` defaults to
ChaCha20, whose security does not depend on the hardware; the process-wide :func:`default_rng`
that releases use takes AES-128-CTR where the CPU has AES-NI (constant-time in hardware, and the
mechanisms' throughput bar needs its speed) and ChaCha20 everywhere else.

randomgen is a dependency of dpkit; if it is missing
:func:`secure_rng` raises :class:`ModuleNotFoundError` with that instruction rather than falling
back to an insecure generator.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import secrets
import threading
import weakref
from typing import Any, Literal, NoReturn, TypeAlias

import numpy as np
from dpkit.errors import ArgumentTypeError, InvalidArgumentError, MissingDependencyError

__all__ = [
    "InsecureGenerator",
    "Rng",
    "SecureGenerator",
    "default_rng",
    "insecure_seeded",
    "is_insecure",
    "secure_rng",
]

#: The generator type that every sampler and mechanism takes as ``rng=``: NumPy's ``Generator``.
Rng: TypeAlias = np.random.Generator

Cipher = Literal["chacha20", "aes128"]
_CIPHERS: tuple[str, ...] = ("chacha20", "aes128")


def _randomgen() -> Any:
    try:
        return importlib.import_module("randomgen")
    except ModuleNotFoundError as exc:  # pragma: no cover - the test environment has randomgen
        raise MissingDependencyError(
            "dpkit's secure generator needs the 'randomgen' package (ChaCha20 / AES bit "
            "generators); install it with `pip install randomgen` (a dependency of dpkit)."
        ) from exc


_SALT = secrets.token_bytes(16)  # keys the fingerprints below, so none of them names a key offline
_getpid = os.getpid
_get = object.__getattribute__
_set = object.__setattr__


def _refuse(what: str) -> NoReturn:
    raise ArgumentTypeError(
        f"{what} is refused on dpkit's secure generators: seeding, reading or setting the state, "
        "copying, pickling, jumping, advancing or re-initialising would repeat the noise stream or "
        "expose its key. For reproducible tests use dpkit.random.insecure_seeded(seed) (not private); "
        "for independent streams use secure_rng() or SecureGenerator.spawn()."
    )


#: Attributes of randomgen's bit generators that seed, read or set the state, copy or move the
#: stream, or hand out raw pointers to the state (ctypes/cffi).  ``capsule`` and ``lock`` stay:
#: NumPy's Generator needs them to draw.
_REFUSED_BIT_GENERATOR = frozenset({
    "seed", "state", "jumped", "advance", "spawn", "ctypes", "cffi", "_ctypes", "_cffi",
    "_seed_from_seq", "_seed_from_seq_numpy_compat", "_seed_with_seed_sequence", "_configure_from_state",
    "__getstate__", "__setstate__", "__setstate_cython__", "__reduce__", "__reduce_ex__", "__reduce_cython__",
    "__init__",
})
#: The same for NumPy's Generator (``__init__`` would re-bind it to another bit generator).
_REFUSED_GENERATOR = frozenset({
    "__getstate__", "__setstate__", "__reduce__", "__reduce_ex__", "__init__",
})


def _fingerprint_and_position(parent: type[Any], bit_generator: object) -> tuple[bytes, int]:
    """A keyed hash of the key and the stream position (32-bit words or bytes drawn), read from C.

    Read through the *parent* class's ``state`` descriptor: the subclass refuses ``state`` to callers.
    """
    state = parent.state.__get__(bit_generator)
    if "keysetup" in state.get("state", {}):  # ChaCha: key words, and a counter of 32-bit words
        inner = state["state"]
        key = np.asarray(inner["keysetup"]).tobytes() + int(inner["rounds"]).to_bytes(2, "little")
        ctr = [int(w) for w in inner["ctr"]]
        position = ctr[0] | (ctr[1] << 64)
    else:  # AESCounter: the key schedule; four 128-bit block counters and a byte offset in the buffer
        inner = state["s"]
        key = np.asarray(inner["seed"]).tobytes()
        ctr = [int(w) for w in inner["counter"]]
        position = (16 * (ctr[0] | (ctr[1] << 64)) + int(inner["offset"]) - 64) % (1 << 136)
    return hashlib.blake2b(key, digest_size=16, key=_SALT).digest(), position


class _KeyedBitGenerator:
    """What dpkit's two keyed bit generators share: refusals, fork detection, self-checks.

    A subclass of randomgen's ChaCha / AESCounter keyed from the operating system when made and
    never again by a caller: every attribute that would seed it, read or set its state (which holds
    the key), copy, pickle, jump or advance it, re-initialise it or hand out raw pointers to its state
    (``ctypes``/``cffi``) raises TypeError, and so does setting any attribute.  It records the
    process id that keyed it and re-keys itself from the operating system when it is used in another
    process (a child made by any ``fork()``, including a raw one that runs no Python at-fork hook).

    Why these refusals are written by hand rather than made with :func:`dpkit._value.value_object`: a bit
    generator is not a value but a stream whose state changes with every draw (inside randomgen's C
    code), so "frozen" cannot mean "unchanging"; it means that no caller can seed it or see or set
    that state.  A frozen dataclass would give none of that: it guards only attribute assignment (the
    state is changed through randomgen's ``state``, ``seed``, ``advance``, ``jumped``, pickling and raw
    pointers, each refused here), its generated ``__init__``, equality and hash would replace the C
    base's, and its refusal (``FrozenInstanceError``, an ``AttributeError``) says nothing useful: these
    are security refusals, an :class:`~dpkit.errors.ArgumentTypeError` whose message says why and what
    to use instead (pinned by ``tests/random/test_random_generators.py``).
    """

    _parent: type[Any]
    _nbytes: int

    def _keyed_init(self, **options: Any) -> None:
        if self in _KEYED:
            _refuse("__init__")
        key = int.from_bytes(secrets.token_bytes(self._nbytes), "little")
        self._parent.__init__(self, key=key, **options)  # calls self.seed once: allowed until keyed
        digest, position = _fingerprint_and_position(self._parent, self)
        _set(self, "_dpkit_pid", _getpid())
        _set(self, "_dpkit_seal", [digest, position])
        _KEYED.add(self)
        _LIVE.add(self)

    def __getattribute__(self, name: str) -> Any:
        if name in _REFUSED_BIT_GENERATOR and self in _KEYED:
            _refuse(f"{name!r} of a secure bit generator")
        if _getpid() != _get(self, "__dict__").get("_dpkit_pid", _getpid()):
            _get(self, "_rekey")()
        return _get(self, name)

    def __setattr__(self, name: str, value: object) -> None:
        _refuse(f"setting {name!r} of a secure bit generator")

    def __delattr__(self, name: str) -> None:
        _refuse(f"deleting {name!r} of a secure bit generator")

    def __reduce__(self) -> NoReturn:
        _refuse("pickling or copying a secure bit generator")

    def __reduce_ex__(self, protocol: object) -> NoReturn:
        _refuse("pickling or copying a secure bit generator")

    def __copy__(self) -> NoReturn:
        _refuse("copying a secure bit generator")

    def __deepcopy__(self, memo: object) -> NoReturn:
        _refuse("copying a secure bit generator")

    def _rekey(self) -> None:
        """Take the whole state (key, counter, buffer) of a fresh generator keyed from the OS."""
        parent = _get(self, "_parent")
        fresh = parent(key=int.from_bytes(secrets.token_bytes(_get(self, "_nbytes")), "little"),
                       **_get(self, "_options"))
        state = parent.state.__get__(fresh)
        state["bit_generator"] = type(self).__name__  # randomgen checks the class name it was read from
        parent.state.__set__(self, state)
        digest, position = _fingerprint_and_position(parent, self)
        _set(self, "_dpkit_seal", [digest, position])
        _set(self, "_dpkit_pid", _getpid())

    def _intact(self) -> bool:
        """Whether the key is the one dpkit drew and the stream never moved backwards since last seen."""
        if self in _TAMPERED:
            return False
        seal = _get(self, "_dpkit_seal")
        digest, position = _fingerprint_and_position(_get(self, "_parent"), self)
        if digest != seal[0] or position < seal[1]:
            _TAMPERED.add(self)
            return False
        seal[1] = position
        return True


def _make_keyed_classes() -> dict[str, type]:
    rg = _randomgen()

    class SecureChaCha(_KeyedBitGenerator, rg.ChaCha):  # type: ignore[misc,name-defined]  # randomgen ships no types
        """randomgen's ChaCha20 (20 rounds), keyed from the OS; unseedable (see _KeyedBitGenerator)."""

        _parent = rg.ChaCha
        _nbytes = 32
        _options = {"rounds": 20}

        def __init__(self) -> None:
            self._keyed_init(rounds=20)

        @property
        def state(self) -> NoReturn:
            _refuse("reading the state of a secure bit generator")

        @state.setter
        def state(self, value: object) -> NoReturn:
            _refuse("setting the state of a secure bit generator")

    class SecureAESCounter(_KeyedBitGenerator, rg.AESCounter):  # type: ignore[misc,name-defined]  # randomgen ships no types
        """randomgen's AES-128 in counter mode (AES-NI only), keyed from the OS; unseedable."""

        _parent = rg.AESCounter
        _nbytes = 16
        _options: dict[str, Any] = {}

        def __init__(self) -> None:
            self._keyed_init()

        @property
        def state(self) -> NoReturn:
            _refuse("reading the state of a secure bit generator")

        @state.setter
        def state(self, value: object) -> NoReturn:
            _refuse("setting the state of a secure bit generator")

    return {"chacha20": SecureChaCha, "aes128": SecureAESCounter}


_KEYED_CLASSES: dict[str, type] = {}


def _new_bit_generator(cipher: str) -> np.random.BitGenerator:
    if not _KEYED_CLASSES:
        _KEYED_CLASSES.update(_make_keyed_classes())
    if cipher == "aes128" and not getattr(_randomgen().AESCounter(key=0), "use_aesni", False):
        raise InvalidArgumentError(
            "cipher='aes128' needs a CPU with AES-NI (randomgen would use table-based software "
            "AES, which leaks its key through cache timing); use cipher='chacha20'."
        )
    bit_generator: np.random.BitGenerator = _KEYED_CLASSES[cipher]()
    return bit_generator


#: Bit generators dpkit keyed from the OS; those later found with another key or rewound; all live ones.
_KEYED: weakref.WeakSet[Any] = weakref.WeakSet()
_TAMPERED: weakref.WeakSet[Any] = weakref.WeakSet()
_LIVE: weakref.WeakSet[Any] = weakref.WeakSet()


class SecureGenerator(np.random.Generator):
    """A :class:`numpy.random.Generator` keyed from the operating system; see :func:`secure_rng`.

    Every instance draws its own key from the operating system when it is made (there is no way
    to give it a key or a seed), so :func:`is_insecure` can trust the class.  Neither it nor its
    ``bit_generator`` can be seeded, re-initialised, pickled, copied, jumped or advanced, or have its
    state read or set (the state holds the key); each refusal raises :class:`TypeError`.
    :meth:`spawn` gives freshly keyed generators.  It re-keys itself from the operating system when
    first used in a new process, whatever made the process (``os.fork``, a raw ``fork()`` through
    ctypes, ``multiprocessing``), because every use checks the process id (about 0.3 microseconds
    per method call, nothing per draw).

    Not a :func:`dpkit._value.value_object` (nor is :class:`InsecureGenerator`): a generator is a
    :class:`numpy.random.Generator` subclass, a stream whose state every draw changes, not a value; a
    frozen dataclass would guard only attribute assignment, replace NumPy's ``__init__`` and equality,
    and refuse with an uninformative ``FrozenInstanceError``, while these refusals are security
    refusals (:class:`~dpkit.errors.ArgumentTypeError`, saying what to use instead; see
    ``_KeyedBitGenerator`` for the bit generator's own).

    Parameters
    ----------
    cipher : {"chacha20", "aes128"}
        See :func:`secure_rng`.
    """

    def __init__(self, *, cipher: Cipher = "chacha20") -> None:
        if "_pid" in _get(self, "__dict__"):
            _refuse("re-initialising a SecureGenerator")
        if cipher not in _CIPHERS:
            raise InvalidArgumentError(f"cipher must be one of {_CIPHERS}; got {cipher!r}.")
        np.random.Generator.__init__(self, _new_bit_generator(cipher))
        _set(self, "_cipher", cipher)
        _set(self, "_pid", _getpid())

    def __getattribute__(self, name: str) -> Any:
        if name in _REFUSED_GENERATOR and "_pid" in _get(self, "__dict__"):
            _refuse(f"{name!r} of a SecureGenerator")
        if _getpid() != _get(self, "__dict__").get("_pid", _getpid()):
            _get(self, "_after_fork")()
        return _get(self, name)

    def __setattr__(self, name: str, value: object) -> None:
        _refuse(f"setting {name!r} of a SecureGenerator")

    def __delattr__(self, name: str) -> None:
        _refuse(f"deleting {name!r} of a SecureGenerator")

    def _after_fork(self) -> None:
        bit_generator = np.random.Generator.bit_generator.__get__(self)
        if isinstance(bit_generator, _KeyedBitGenerator) and _get(bit_generator, "_dpkit_pid") != _getpid():
            _get(bit_generator, "_rekey")()
        _set(self, "_pid", _getpid())

    @property
    def cipher(self) -> Cipher:
        """The stream cipher behind this generator: ``"chacha20"`` or ``"aes128"``."""
        cipher: Cipher = _get(self, "_cipher")
        return cipher

    def spawn(self, n_children: int) -> list[SecureGenerator]:  # type: ignore[override]  # list is invariant; SecureGenerator is a Generator
        """Return ``n_children`` new generators, each keyed afresh from the operating system."""
        return [SecureGenerator(cipher=self.cipher) for _ in range(n_children)]

    def _rekey(self) -> None:
        bit_generator = np.random.Generator.bit_generator.__get__(self)
        if isinstance(bit_generator, _KeyedBitGenerator):
            _get(bit_generator, "_rekey")()

    def __repr__(self) -> str:
        return f"SecureGenerator({self.cipher}, key from the operating system)"

    def __reduce__(self) -> NoReturn:
        _refuse("pickling or copying a SecureGenerator (the copy would repeat its noise stream)")

    def __reduce_ex__(self, protocol: object) -> NoReturn:
        _refuse("pickling or copying a SecureGenerator (the copy would repeat its noise stream)")

    def __copy__(self) -> NoReturn:
        _refuse("copying a SecureGenerator (the copy would repeat its noise stream)")

    def __deepcopy__(self, memo: object) -> NoReturn:
        _refuse("copying a SecureGenerator (the copy would repeat its noise stream)")


def _rekey_after_fork() -> None:
    for bit_generator in list(_LIVE):
        _get(bit_generator, "_rekey")()


if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=_rekey_after_fork)


def secure_rng(*, cipher: Cipher = "chacha20") -> SecureGenerator:
    """Return a new cryptographically secure generator keyed from the operating system.

    Parameters
    ----------
    cipher : {"chacha20", "aes128"}
        ``"chacha20"`` (default): ChaCha20 with a 256-bit key, constant-time everywhere.
        ``"aes128"``: AES-128 in counter mode, about 10x faster, only on CPUs with AES-NI.

    Returns
    -------
    SecureGenerator
        A :class:`numpy.random.Generator`; two calls give independent streams.

    Raises
    ------
    ValueError
        For an unknown ``cipher``, or ``"aes128"`` on a CPU without AES-NI.
    ModuleNotFoundError
        If randomgen is not installed (``pip install randomgen``).

    Notes
    -----
    The module docstring of :mod:`dpkit.random` explains the choice of cipher.

    References
    ----------
    Bernstein 2008, "ChaCha, a variant of Salsa20"; RFC 8439 (ChaCha20); NIST SP 800-90A Rev. 1
    (CTR_DRBG).

    Examples
    --------
    >>> rng = secure_rng()
    >>> rng.integers(0, 10, size=3).shape
    (3,)
    """
    return SecureGenerator(cipher=cipher)


_default_lock = threading.Lock()
_default: tuple[int, SecureGenerator] | None = None


def preferred_cipher() -> Cipher:
    """``"aes128"`` where randomgen can use AES-NI (hardware, constant time), else ``"chacha20"``."""
    try:
        return "aes128" if getattr(_randomgen().AESCounter(), "use_aesni", False) else "chacha20"
    except ImportError:  # pragma: no cover - randomgen missing (MissingDependencyError): secure_rng reports it
        return "chacha20"


def default_rng() -> SecureGenerator:
    """Return this process's shared secure generator, creating it on first use.

    AES-128-CTR where the CPU has AES-NI, ChaCha20 elsewhere (:func:`preferred_cipher`; the module
    docstring explains both).

    Samplers and mechanisms use it when called with ``rng=None``.  It is created under a lock, is
    specific to the process (a forked child gets its own, never its parent's), and is never seeded
    by dpkit with anything but operating-system entropy.

    Returns
    -------
    SecureGenerator

    Examples
    --------
    >>> default_rng() is default_rng()
    True
    """
    global _default
    pid = os.getpid()
    cached = _default
    if cached is not None and cached[0] == pid:
        return cached[1]
    with _default_lock:
        cached = _default
        if cached is None or cached[0] != pid:
            cached = (pid, secure_rng(cipher=preferred_cipher()))
            _default = cached
        return cached[1]


class InsecureGenerator(np.random.Generator):
    """A seeded generator for tests and reproducible examples only; not private.

    Its stream is fixed by its seed, so noise drawn from it can be recomputed by anyone who knows
    the seed: a release made with it gives no privacy.  Make one with :func:`insecure_seeded`.
    """

    def __init__(self, seed: int) -> None:
        super().__init__(np.random.PCG64(seed))
        self._seed = seed

    @property
    def seed(self) -> int:
        """The seed this generator was made from."""
        return self._seed

    def __repr__(self) -> str:
        return (
            f"InsecureGenerator(PCG64, seed={self._seed}): "
            "for tests and reproducible examples only; not private"
        )


def insecure_seeded(seed: int) -> InsecureGenerator:
    """Return a seeded generator for tests and reproducible examples only; not private.

    Parameters
    ----------
    seed : int, >= 0
        The seed of a NumPy PCG64 bit generator.

    Returns
    -------
    InsecureGenerator
        A :class:`numpy.random.Generator` whose class name and repr say "Insecure";
        :func:`is_insecure` returns ``True`` for it.

    Raises
    ------
    TypeError
        If ``seed`` is not an integer.
    ValueError
        If ``seed`` is negative.

    Examples
    --------
    >>> rng = insecure_seeded(7)
    >>> is_insecure(rng), int(rng.integers(0, 100)) == int(insecure_seeded(7).integers(0, 100))
    (True, True)
    """
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise ArgumentTypeError(f"seed must be an int; got {type(seed).__name__} {seed!r}.")
    if seed < 0:
        raise InvalidArgumentError(f"seed must be >= 0; got {seed}.")
    return InsecureGenerator(int(seed))


def is_insecure(rng: object) -> bool:
    """Whether noise drawn from ``rng`` gives no privacy guarantee.

    ``False`` only for a :class:`SecureGenerator` (made by :func:`secure_rng` or
    :func:`default_rng`, exactly that class, not a subclass) whose bit generator is one that dpkit
    keyed from the operating system, still holds that key, and has never moved backwards in its
    stream since the previous call.  ``True`` for an :class:`InsecureGenerator`, for any other
    generator (a plain NumPy ``Generator`` included), whose seeding dpkit cannot vouch for, and for a
    secure generator that was re-bound to another bit generator (``numpy.random.Generator.__init__``
    called on it), re-keyed or rewound by a path that bypassed its refusals (such as randomgen's
    methods called unbound on it): once found, such a generator is reported insecure for good.

    What it cannot see: code that rewinds the stream and replays it exactly up to the position seen
    at the previous call, or writes the process's memory (ctypes).  Such code can as well replace
    dpkit's own functions; the release path's guarantees assume the analyst's code calls dpkit's
    public API.

    Examples
    --------
    >>> is_insecure(insecure_seeded(0)), is_insecure(secure_rng())
    (True, False)
    """
    if type(rng) is not SecureGenerator:
        return True
    try:
        bit_generator = rng.bit_generator  # the process-id check runs here: a forked child re-keys
        if type(bit_generator) not in _KEYED_CLASSES.values() or bit_generator not in _KEYED:
            return True
        return not _get(bit_generator, "_intact")()
    except (AttributeError, KeyError, TypeError, ValueError):
        # a malformed or tampered object (a seal or state removed or replaced): vouch for nothing.
        # Other exceptions are bugs in this check and propagate.
        return True
