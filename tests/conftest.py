"""Shared pytest set-up: make tests/ importable as a package root for reference helpers."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
