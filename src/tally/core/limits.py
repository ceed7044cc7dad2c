"""What a file may be (issue #14): the limits a load checks before building anything.

Each is a setting (TALLY_MAX_*); the defaults stay under what SQLite and PostgreSQL
accept (2,000 and 1,600 columns; PostgreSQL's 8 KB row holds 1,000 8-byte values).
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024
DEFAULT_MAX_FILE_BYTES = 1024 * MIB
DEFAULT_MAX_COMPRESSION_RATIO = 200.0  # a CSV shrinks 3-15 times; deflate's best is ~1,000
DEFAULT_MAX_COLUMNS = 500
DEFAULT_MAX_HEADER_BYTES = 64 * 1024
DEFAULT_MAX_LINE_BYTES = 16 * MIB
DEFAULT_MAX_CELL_BYTES = 16 * MIB  # the loader's limit on one value before issue #14


@dataclass(frozen=True)
class FileLimits:
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    max_compression_ratio: float = DEFAULT_MAX_COMPRESSION_RATIO
    max_columns: int = DEFAULT_MAX_COLUMNS
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    max_cell_bytes: int = DEFAULT_MAX_CELL_BYTES


DEFAULT_FILE_LIMITS = FileLimits()  # the settings' defaults; entry points pass the settings'
