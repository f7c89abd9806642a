"""Bridges to training frameworks.  Each module imports its framework only when used.

* :mod:`dpkit.integrations.opacus`: dpkit's certified DP-SGD accountant for Opacus and plain loops.
"""
