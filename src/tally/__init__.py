"""tally: a self-hosted data platform for finance operations."""

__version__ = "0.1.0"
