"""Boundary checks shared by the samplers: ``size``, and ``rng`` (:func:`resolve_rng`, public as
:func:`dpkit.random.resolve_rng`)."""

from __future__ import annotations

import math
import operator

import numpy as np

from dpkit.random._generators import default_rng
from dpkit.errors import ArgumentTypeError, InvalidArgumentError

Size = int | tuple[int, ...] | None


def check_size(size: object) -> tuple[int, ...] | None:
    """Return ``size`` as a shape tuple (``None`` stays ``None``), or raise ValueError/TypeError."""
    if size is None:
        return None
    entries = size if isinstance(size, (tuple, list)) else (size,)
    shape = []
    for entry in entries:
        if isinstance(entry, (bool, np.bool_, float, np.floating)):
            raise InvalidArgumentError(
                f"size must be a non-negative integer or a tuple of them; got {size!r}."
            )
        try:
            value = operator.index(entry)
        except TypeError:
            raise ArgumentTypeError(
                f"size must be a non-negative integer or a tuple of them; got "
                f"{type(size).__name__} {size!r}."
            ) from None
        if value < 0:
            raise InvalidArgumentError(
                f"size must be a non-negative integer or a tuple of them; got {size!r}."
            )
        shape.append(value)
    return tuple(shape)


def count(shape: tuple[int, ...] | None) -> int:
    """Number of draws for a checked shape (``None`` means one scalar draw)."""
    return 1 if shape is None else math.prod(shape)


def resolve_rng(rng: object) -> np.random.Generator:
    """The generator a call with ``rng=rng`` draws from: dpkit's one resolver of an ``rng=`` argument.

    Every sampler, mechanism release, distribution ``sample`` and query in dpkit resolves its ``rng``
    argument here, so they all accept and refuse the same things:

    * ``None`` gives this process's shared secure generator, :func:`dpkit.random.default_rng`
      (cryptographically secure, keyed from the operating system, re-keyed in a forked child);
    * a :class:`numpy.random.Generator` (a :class:`~dpkit.random.SecureGenerator`, an
      :class:`~dpkit.random.InsecureGenerator`, or any other) is returned as it is;
    * anything else (an integer seed, a legacy ``numpy.random.RandomState``, the function
      ``numpy.random.default_rng`` itself) raises :class:`~dpkit.errors.ArgumentTypeError` (a
      ``TypeError``): a seed is never turned into a generator silently, since noise from a known
      seed gives no privacy (:func:`dpkit.random.insecure_seeded` makes one, labelled).

    Parameters
    ----------
    rng : numpy.random.Generator or None

    Returns
    -------
    numpy.random.Generator

    Raises
    ------
    ArgumentTypeError
        ``rng`` is neither ``None`` nor a ``numpy.random.Generator``.

    Examples
    --------
    >>> from dpkit.random import default_rng, insecure_seeded, resolve_rng
    >>> resolve_rng(None) is default_rng()
    True
    >>> g = insecure_seeded(0)
    >>> resolve_rng(g) is g
    True
    >>> resolve_rng(42)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpkit.errors.ArgumentTypeError: rng must be a numpy.random.Generator (...) or None; got int.
    """
    if rng is None:
        return default_rng()
    if not isinstance(rng, np.random.Generator):
        raise ArgumentTypeError(
            f"rng must be a numpy.random.Generator (e.g. dpkit.random.secure_rng()) or None; "
            f"got {type(rng).__name__}."
        )
    return rng


_allocator_primed = False


def prime_allocator(n: int) -> None:
    """Before a large vectorised call, keep glibc from handing block temporaries back to the OS.

    glibc's malloc returns freed heap memory to the operating system eagerly (trim threshold
    128 KiB) until the process has freed one mmap-backed block below 32 MiB; only then does it raise
    its thresholds to that block's size (mmap) and twice it (trim).  A fresh process whose only
    large arrays are the >32 MiB outputs of a sampler therefore page-faults its per-block
    temporaries afresh on every block: measured here, about 10^6 faults and a 3x slower discrete
    Gaussian for 10^7 draws.  Allocating and freeing one *untouched* 16 MiB array (no page is
    written, so this costs microseconds) raises the thresholds as any mid-sized NumPy temporary
    would.  It changes only how much freed memory glibc keeps (at most 32 MiB) and does nothing
    under other allocators.  Done once per process.
    """
    global _allocator_primed
    if n >= 1 << 16 and not _allocator_primed:
        _allocator_primed = True
        np.empty(1 << 21, dtype=np.float64)  # 16 MiB, never written; freed at once
