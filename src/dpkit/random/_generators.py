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

import importlib
import os
import secrets
import threading
import weakref
from typing import Any, Literal, NoReturn, TypeAlias

import numpy as np

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
        raise ModuleNotFoundError(
            "dpkit's secure generator needs the 'randomgen' package (ChaCha20 / AES bit "
            "generators); install it with `pip install randomgen` (a dependency of dpkit)."
        ) from exc


def _new_bit_generator(cipher: str) -> np.random.BitGenerator:
    rg = _randomgen()
    if cipher == "chacha20":
        key = int.from_bytes(secrets.token_bytes(32), "little")
        bit_generator: np.random.BitGenerator = rg.ChaCha(key=key, rounds=20)
        return bit_generator
    key = int.from_bytes(secrets.token_bytes(16), "little")
    bit_generator = rg.AESCounter(key=key)
    if not getattr(bit_generator, "use_aesni", False):
        raise ValueError(
            "cipher='aes128' needs a CPU with AES-NI (randomgen would use table-based software "
            "AES, which leaks its key through cache timing); use cipher='chacha20'."
        )
    return bit_generator


_LIVE: weakref.WeakSet[SecureGenerator] = weakref.WeakSet()


class SecureGenerator(np.random.Generator):
    """A :class:`numpy.random.Generator` keyed from the operating system; see :func:`secure_rng`.

    Every instance draws its own key from the operating system when it is made (there is no way
    to give it a key or a seed), so :func:`is_insecure` can trust the class.  It cannot be pickled
    or copied, :meth:`spawn` gives freshly keyed generators, and it is re-keyed in a child process
    after ``os.fork``.

    Parameters
    ----------
    cipher : {"chacha20", "aes128"}
        See :func:`secure_rng`.
    """

    def __init__(self, *, cipher: Cipher = "chacha20") -> None:
        if cipher not in _CIPHERS:
            raise ValueError(f"cipher must be one of {_CIPHERS}; got {cipher!r}.")
        super().__init__(_new_bit_generator(cipher))
        self._cipher: Cipher = cipher
        _LIVE.add(self)

    @property
    def cipher(self) -> Cipher:
        """The stream cipher behind this generator: ``"chacha20"`` or ``"aes128"``."""
        return self._cipher

    def spawn(self, n_children: int) -> list[SecureGenerator]:  # type: ignore[override]
        """Return ``n_children`` new generators, each keyed afresh from the operating system."""
        return [SecureGenerator(cipher=self._cipher) for _ in range(n_children)]

    def _rekey(self) -> None:
        # Copy the whole state of a freshly keyed bit generator (key, counter and output buffer).
        self.bit_generator.state = _new_bit_generator(self._cipher).state

    def __repr__(self) -> str:
        return f"SecureGenerator({self._cipher}, key from the operating system)"

    def __reduce__(self) -> NoReturn:
        raise TypeError(
            "a SecureGenerator cannot be pickled or copied: the copy would repeat its noise "
            "stream. Create one per process or worker with dpkit.random.secure_rng()."
        )

    def __copy__(self) -> NoReturn:
        self.__reduce__()

    def __deepcopy__(self, memo: object) -> NoReturn:
        self.__reduce__()


def _rekey_after_fork() -> None:
    for generator in list(_LIVE):
        generator._rekey()


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
    except Exception:  # pragma: no cover - randomgen missing: secure_rng reports it
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
        raise TypeError(f"seed must be an int; got {type(seed).__name__} {seed!r}.")
    if seed < 0:
        raise ValueError(f"seed must be >= 0; got {seed}.")
    return InsecureGenerator(int(seed))


def is_insecure(rng: object) -> bool:
    """Whether noise drawn from ``rng`` gives no privacy guarantee.

    ``False`` only for a :class:`SecureGenerator` (made by :func:`secure_rng` or
    :func:`default_rng`); ``True`` for an :class:`InsecureGenerator` and for any other generator,
    whose seeding dpkit cannot vouch for.

    Examples
    --------
    >>> is_insecure(insecure_seeded(0)), is_insecure(secure_rng())
    (True, False)
    """
    return not isinstance(rng, SecureGenerator)
