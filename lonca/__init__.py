"""Lonca: symbol leases and a merge queue for many AI coding agents, with human review."""

__version__ = "0.1.0"
