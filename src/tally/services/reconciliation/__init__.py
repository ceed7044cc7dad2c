"""Reconciliation: the matching engine (a pure function), its runs and its API (issue #11)."""
