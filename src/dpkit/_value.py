"""dpkit's immutable value objects: frozen, slotted dataclasses with one refusal message, and lazy caches.

:func:`value_object` is ``dataclasses.dataclass(frozen=True, slots=True)`` plus one change: assigning
to (or deleting) an attribute raises :class:`dataclasses.FrozenInstanceError` (an ``AttributeError``)
whose message says the object is immutable and what to do instead, rather than the dataclass's
"cannot assign to field".  Everything else is the standard library's: the fields are declared
(so a type checker sees them), stored in slots (no per-instance ``__dict__``), and the dataclass
writes ``__eq__``, ``__hash__``, ``__repr__``, pickling and copying from them.

How the classes built with it set their fields, the only two ways dpkit uses:

* the dataclass's own ``__init__``, with validation and the fields derived from the arguments set in
  ``__post_init__`` through ``object.__setattr__`` (the distributions, the release intervals);
* a hand-written ``__init__`` where the public arguments are not the stored fields (a mechanism is
  built from ``epsilon`` or ``scale`` and stores its grid and noise scale; ``Finite`` takes any
  array-like and stores read-only arrays): it computes every value first and then sets each field
  with ``object.__setattr__``, as the dataclass's own ``__init__`` of a frozen class does (the
  Python documentation's way for frozen dataclasses; ``tests/test_value_objects.py`` checks that
  every field of every such class is set).

A value computed on first use (a cumulative table) is not a field assigned later: the object holds a
:class:`Lazy` in a field made at construction (``field(default_factory=Lazy, init=False, repr=False,
compare=False)``, or set to ``Lazy()`` by a hand-written ``__init__``), and the :class:`Lazy`
stores the value.  Equality and hashing ignore it, a copy shares it (the fields it is computed from
are the same), and a pickle or a deep copy starts it empty.

Pure standard library; imports nothing from dpkit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import Field, FrozenInstanceError, field
from typing import Any, Generic, TypeVar, dataclass_transform, overload

__all__ = ["Lazy", "value_object"]

_T = TypeVar("_T")


def _refuse_setattr(self: object, name: str, value: object) -> None:
    raise FrozenInstanceError(
        f"{type(self).__name__} is immutable; build a new one instead (cannot assign to {name!r})."
    )


def _refuse_delattr(self: object, name: str) -> None:
    raise FrozenInstanceError(f"{type(self).__name__} is immutable (cannot delete {name!r}).")


@overload
def value_object(cls: type[_T], /) -> type[_T]: ...


@overload
def value_object(*, init: bool = True, eq: bool = True, repr: bool = True) -> Callable[[type[_T]], type[_T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field, Field))
def value_object(
    cls: type[_T] | None = None, /, *, init: bool = True, eq: bool = True, repr: bool = True
) -> type[_T] | Callable[[type[_T]], type[_T]]:
    """``@dataclass(frozen=True, slots=True)`` whose assignments fail with an "is immutable" message.

    ``init``, ``eq`` and ``repr`` are the dataclass options of those names (``init=False``: the class
    writes its own ``__init__`` and sets its fields with ``object.__setattr__``; ``eq=False``: identity
    equality and hash, for objects holding arrays).  With ``slots=True`` the class object is a new one,
    so methods of the decorated class must name their base explicitly (``Base.method(self, ...)``)
    instead of calling ``super()`` without arguments (fixed only in Python 3.14).
    """

    def wrap(c: type[_T]) -> type[_T]:
        made = dataclasses.dataclass(frozen=True, slots=True, init=init, eq=eq, repr=repr)(c)
        type.__setattr__(made, "__setattr__", _refuse_setattr)
        type.__setattr__(made, "__delattr__", _refuse_delattr)
        return made

    return wrap if cls is None else wrap(cls)


class Lazy(Generic[_T]):
    """A value derived from an immutable object's fields, computed on first use and kept.

    ``get(build)`` returns the kept value, or calls ``build()`` once and keeps what it returns (two
    threads may both build it; they build the same value).  Not part of the owner's value: compare it
    out (``compare=False``).  A pickle or a deep copy carries it empty.
    """

    __slots__ = ("_value",)

    def __init__(self) -> None:
        self._value: _T | None = None

    def get(self, build: Callable[[], _T]) -> _T:
        value = self._value
        if value is None:
            value = build()
            self._value = value
        return value

    def peek(self) -> _T | None:
        """The kept value, or None if it has not been built (never builds it)."""
        return self._value

    def __reduce__(self) -> tuple[type[Lazy[Any]], tuple[()]]:
        return (type(self), ())

    def __repr__(self) -> str:
        return "Lazy(built)" if self._value is not None else "Lazy(empty)"
