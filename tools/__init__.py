"""Tooling run by scripts/check, never part of tally."""
