"""dpkit: differential privacy with exact divergences, safe noise and tight accounting."""

__version__ = "0.1.0"
