"""Generate examples/transactions.csv: a small synthetic card-transaction table for `dpkit query`.

Nothing in it is real.  1 000 customers (``user_id``, the privacy unit) in 5 regions make about
20 000 purchases over the first quarter of 2026.  Each customer has a home region, an age band
and 1-4 favourite categories; amounts are log-normal by category, with a few large outliers
(so clamping matters), about 1% missing amounts (NULL: declined or pending) and a heavy tail of
very active customers (so contribution bounds matter).  Fixed seed: re-running reproduces the file.

    python examples/make_transactions.py            # writes examples/transactions.csv
"""

from __future__ import annotations

import csv
import datetime as dt
from pathlib import Path

import numpy as np

CATEGORIES = {  # name: (median amount, log-sd)
    "groceries": (38.0, 0.6), "restaurants": (27.0, 0.5), "transport": (12.0, 0.7), "fuel": (55.0, 0.3),
    "pharmacy": (18.0, 0.6), "clothing": (60.0, 0.7), "electronics": (140.0, 0.9), "travel": (320.0, 0.8),
    "entertainment": (25.0, 0.6), "utilities": (85.0, 0.3),
}
REGIONS = ["north", "south", "east", "west", "central"]
AGE_BANDS = ["18-29", "30-44", "45-64", "65+"]
PAYMENT = ["card", "contactless", "online"]


def generate(seed: int = 20260101, users: int = 1000) -> list[dict[str, object]]:
    rng = np.random.default_rng(seed)
    names = list(CATEGORIES)
    start = dt.date(2026, 1, 1)
    rows: list[dict[str, object]] = []
    activity = rng.pareto(1.6, users) + 1.0  # a few customers are far more active than the rest
    counts = np.minimum(np.round(activity / activity.mean() * 20).astype(int), 400)
    for u in range(users):
        region = REGIONS[rng.choice(5, p=[0.22, 0.24, 0.18, 0.2, 0.16])]
        age = AGE_BANDS[rng.choice(4, p=[0.24, 0.3, 0.32, 0.14])]
        favourites = rng.choice(len(names), size=rng.integers(1, 5), replace=False)
        for _ in range(max(1, counts[u])):
            cat = names[int(rng.choice(favourites))] if rng.random() < 0.8 else names[int(rng.integers(len(names)))]
            median, sd = CATEGORIES[cat]
            amount: float | None = round(float(median * np.exp(sd * rng.standard_normal())), 2)
            if rng.random() < 0.002:
                amount = round(float(amount * rng.uniform(20, 80)), 2)  # outliers
            if rng.random() < 0.01:
                amount = None
            day = start + dt.timedelta(days=int(rng.integers(0, 90)))
            rows.append({"user_id": 100000 + u, "day": day.isoformat(), "region": region, "age_band": age,
                         "category": cat, "payment": PAYMENT[int(rng.choice(3, p=[0.5, 0.3, 0.2]))],
                         "amount": amount})
    order = rng.permutation(len(rows))
    return [rows[i] for i in order]


def main() -> None:
    out = Path(__file__).with_name("transactions.csv")
    rows = generate()
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if v is None else v) for k, v in r.items()})
    print(f"wrote {len(rows)} rows to {out}")


if __name__ == "__main__":
    main()
