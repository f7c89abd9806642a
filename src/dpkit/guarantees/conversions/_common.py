"""Shared helpers of the conversion modules: input checks and the WassersteinDP refusal."""

from __future__ import annotations

from typing import Literal, TypeVar

from dpkit.errors import ArgumentTypeError, InvalidArgumentError, UnsupportedError
from dpkit.guarantees.definitions import WassersteinDP

RdpMethod = Literal["cks", "mironov"]
ZcdpMethod = Literal["cks", "bs16"]
G = TypeVar("G")

WASSERSTEIN_REFUSAL = (
    "WassersteinDP cannot be converted to any differential-privacy guarantee: it bounds the "
    "transport distance W_p between output distributions, which is unchanged by the noise scale "
    "of an additive mechanism (a shift by Delta has W_p = Delta whatever the noise) and is small "
    "for deterministic releases that are not private at all. No function of it implies "
    "(epsilon, delta)-DP, Renyi DP, zCDP or GDP; state the mechanism's own guarantee instead."
)

METHOD_NAMES = {
    "cks": "CKS 2020 Prop 12 / Balle et al. 2020 Thm 21",
    "mironov": "Mironov 2017 Prop 3",
}


def require(guarantee: object, cls: type[G], function: str) -> G:
    if isinstance(guarantee, WassersteinDP):
        raise UnsupportedError(WASSERSTEIN_REFUSAL)
    if not isinstance(guarantee, cls):
        raise ArgumentTypeError(f"{function} needs a {cls.__name__}; got {type(guarantee).__name__}.")
    return guarantee


def check_method(method: str, allowed: tuple[str, ...]) -> None:
    if method not in allowed:
        raise InvalidArgumentError(f"method must be one of {allowed}; got {method!r}.")
