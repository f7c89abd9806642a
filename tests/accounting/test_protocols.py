"""The Protocols at the seams (dpkit.accounting.protocols, dpkit.ledger._base): they resolve at run time
(``typing.get_type_hints`` on the seams works), and the real implementations have the members they name."""

from __future__ import annotations

import sqlite3
import typing

import pytest

from dpkit.accounting import Accountant
from dpkit.accounting.protocols import CalibratedMechanism, MechanismLike, PrivacyLike
from dpkit.ledger._base import Connection, Cursor, Ledger
from dpkit.mechanisms import Gaussian, Geometric, Laplace


@pytest.mark.parametrize("method", ["check", "spend", "admit"])
def test_the_accountant_takes_a_privacy_like_item(method: str) -> None:
    assert typing.get_type_hints(getattr(Accountant, method))["item"] == PrivacyLike


def test_the_ledger_protocol_takes_a_privacy_like_spend() -> None:
    assert typing.get_type_hints(Ledger.reserve)["spend"] == PrivacyLike


@pytest.mark.parametrize("mechanism", [Laplace(sensitivity=1.0, epsilon=1.0), Geometric(sensitivity=1, epsilon=1.0),
                                       Gaussian(sensitivity=1.0, epsilon=1.0, delta=1e-6)], ids=repr)
def test_dpkit_mechanisms_have_the_members_of_the_mechanism_protocols(mechanism: object) -> None:
    for proto in (MechanismLike, CalibratedMechanism):
        for name in typing.get_protocol_members(proto) if hasattr(typing, "get_protocol_members") else (
                "pair", "release", "pure_dp", "zcdp"):
            assert hasattr(mechanism, name), name


def test_sqlite_has_the_members_of_the_connection_protocols() -> None:
    con = sqlite3.connect(":memory:")
    try:
        cur = con.execute("SELECT ?", (1,))
        assert all(callable(getattr(cur, n)) for n in ("fetchone", "fetchall"))
        assert cur.fetchone() == (1,)
    finally:
        con.close()
    assert Connection.__name__ == "Connection" and Cursor.__name__ == "Cursor"
