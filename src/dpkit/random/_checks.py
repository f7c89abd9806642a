"""Boundary checks shared by the samplers: ``size`` and ``rng``."""

from __future__ import annotations

import math
import operator

import numpy as np

from dpkit.random._generators import default_rng

Size = int | tuple[int, ...] | None


def check_size(size: object) -> tuple[int, ...] | None:
    """Return ``size`` as a shape tuple (``None`` stays ``None``), or raise ValueError/TypeError."""
    if size is None:
        return None
    entries = size if isinstance(size, (tuple, list)) else (size,)
    shape = []
    for entry in entries:
        if isinstance(entry, (bool, np.bool_, float, np.floating)):
            raise ValueError(
                f"size must be a non-negative integer or a tuple of them; got {size!r}."
            )
        try:
            value = operator.index(entry)
        except TypeError:
            raise TypeError(
                f"size must be a non-negative integer or a tuple of them; got "
                f"{type(size).__name__} {size!r}."
            ) from None
        if value < 0:
            raise ValueError(
                f"size must be a non-negative integer or a tuple of them; got {size!r}."
            )
        shape.append(value)
    return tuple(shape)


def count(shape: tuple[int, ...] | None) -> int:
    """Number of draws for a checked shape (``None`` means one scalar draw)."""
    return 1 if shape is None else math.prod(shape)


def check_rng(rng: object) -> np.random.Generator:
    """``rng`` itself if it is a NumPy Generator, the process's secure generator if ``None``."""
    if rng is None:
        return default_rng()
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"rng must be a numpy.random.Generator (e.g. dpkit.random.secure_rng()) or None; "
            f"got {type(rng).__name__}."
        )
    return rng
