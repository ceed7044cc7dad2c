"""How much SQL a transformation may be (issue #30): each limit is a setting
(TALLY_TRANSFORMATION_MAX_*); services/transformations/limits.py checks them, and says
what was measured to choose these defaults."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MAX_SQL_BYTES = (
    65_536  # below the API body's 100,000 characters (transformations/bodies.py)
)
DEFAULT_MAX_NESTING = 24
DEFAULT_MAX_DEPTH = 100
DEFAULT_MAX_TERMS = 50_000
DEFAULT_MAX_CTES = 100


@dataclass(frozen=True)
class SqlLimits:
    max_sql_bytes: int = DEFAULT_MAX_SQL_BYTES
    max_nesting: int = DEFAULT_MAX_NESTING
    max_depth: int = DEFAULT_MAX_DEPTH
    max_terms: int = DEFAULT_MAX_TERMS
    max_ctes: int = DEFAULT_MAX_CTES


DEFAULT_SQL_LIMITS = SqlLimits()  # the settings' defaults; entry points pass the settings'
