"""A child process for the ledger's multi-process tests (run as a script, never imported by a test).

Usage: ``python ledger_child.py MODE LEDGER [ARGS...]``, LEDGER a file path or a ``postgresql://`` URL
(opened with :func:`dpkit.ledger.open_ledger`); it prints one line per event, flushed, so the parent
can follow it (and kill it at a chosen point).

* ``race LEDGER N EPSILON``: open, print ``ready``, wait for a line on stdin (the parent sends it to
  every child at once), print ``attempt``, then try N times to reserve and commit PureDP(EPSILON);
  print ``ok ID T`` or ``refused T`` for each attempt, T the ``time.time()`` at which reserve returned.
* ``stop LEDGER STAGE EPSILON``: open, print ``opened``; then reserve (print ``reserved ID``) and commit
  (print ``committed ID``), blocking for ever right after STAGE (``opened``, ``reserved`` or
  ``committed``) so that the parent can SIGKILL it exactly there.
* ``loop LEDGER EPSILON``: print ``ready``, then reserve and commit PureDP(EPSILON) until refused,
  printing events, until killed (the parent kills it at a random time).
* ``create LEDGER START_AT``: wait until START_AT, then open LEDGER (possibly not existing yet) with
  budget PureDP(0.5), reserve and commit PureDP(2**-6) once and print ``ok ID``.
* ``exit LEDGER EPSILON``: reserve and commit once, print ``committed ID``, then ``os._exit(0)``
  without closing the connection.
* ``plain LEDGER EPSILON``: ``ledger.spend(PureDP(EPSILON))`` called without ``with`` and never committed,
  print ``spent ID``, then ``os._exit(0)`` (as a process that released a value and died).
"""

from __future__ import annotations

import os
import sys
import time


def main(argv: list[str]) -> None:
    from dpkit.errors import BudgetExceededError
    from dpkit.guarantees import PureDP
    from dpkit.ledger import open_ledger

    mode, path = argv[0], argv[1]
    if mode == "create":  # many processes creating one new ledger at once
        start_at = float(argv[2])
        while time.time() < start_at:
            time.sleep(0.001)
        with open_ledger(path, budget=PureDP(0.5)) as ledger:
            r = ledger.reserve(PureDP(2.0**-6))
            ledger.commit(r)
        print(f"ok {r.id}", flush=True)
        return
    ledger = open_ledger(path)  # the parent created it with its budget

    def say(text: str) -> None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    if mode == "race":
        n, epsilon = int(argv[2]), float(argv[3])
        say("ready")
        sys.stdin.readline()
        say("attempt")
        for _ in range(n):
            try:
                r = ledger.reserve(PureDP(epsilon), label=f"pid {os.getpid()}")
            except BudgetExceededError:
                say(f"refused {time.time()!r}")
                continue
            done = time.time()
            ledger.commit(r)
            say(f"ok {r.id} {done!r}")
    elif mode == "stop":
        stage, epsilon = argv[2], float(argv[3])
        say("opened")
        if stage == "opened":
            time.sleep(3600)
        r = ledger.reserve(PureDP(epsilon))
        say(f"reserved {r.id}")
        if stage == "reserved":
            time.sleep(3600)
        ledger.commit(r)
        say(f"committed {r.id}")
        time.sleep(3600)
    elif mode == "loop":
        epsilon = float(argv[2])
        say("ready")
        while True:
            try:
                r = ledger.reserve(PureDP(epsilon))
            except BudgetExceededError:
                say("refused")
                time.sleep(3600)
            say(f"reserved {r.id}")
            ledger.commit(r)
            say(f"committed {r.id}")
    elif mode == "exit":
        epsilon = float(argv[2])
        r = ledger.reserve(PureDP(epsilon))
        ledger.commit(r)
        say(f"committed {r.id}")
        os._exit(0)  # no close, no atexit, no flush of Python objects
    elif mode == "plain":
        handle = ledger.spend(PureDP(float(argv[2])), label="plain")
        say(f"spent {handle.reservation.id}")
        os._exit(0)  # the handle is never committed, entered or collected
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
