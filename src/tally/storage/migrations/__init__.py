"""Alembic migrations of the control plane, applied at start by `upgrade_database`."""
