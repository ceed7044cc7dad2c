"""Text search in a row table (`Operator.CONTAINS`, the console's reference search):
`col` contains the text, case-insensitively, the same on SQLite and PostgreSQL.

"Case-insensitively" means both sides lowered by Unicode's case mapping, so "müller"
finds "MÜLLER" and "ÉLECTRICITÉ" finds "électricité" (not by LIKE's own folding:
SQLite's folds ASCII letters only, PostgreSQL's ILIKE follows the database's locale).
SQLite lowers with Python's `str.lower` (`tally_lower`, registered on every connection
by `sql_functions`); PostgreSQL with `lower()` under the ICU root collation
(`"und-x-icu"`: a server built with ICU, as Debian's packages and the official images
are), never the database's locale. The text is matched as typed: its `%`, `_` and the
escape character are escaped (`like_pattern`), and the statement names `ESCAPE`.
A row without a value contains nothing. No index serves it: the rows are scanned."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

ESCAPE = "\\"
SQLITE_LOWER = "tally_lower"  # the SQLite function `sql_functions` registers
ICU_ROOT = "und-x-icu"


def like_pattern(text: str) -> str:
    """A LIKE pattern matching any text that contains `text` literally."""
    escaped = text.replace(ESCAPE, ESCAPE * 2).replace("%", ESCAPE + "%")
    return "%" + escaped.replace("_", ESCAPE + "_") + "%"


class _Lowered(FunctionElement[str]):
    """Its one argument lowered by Unicode's case mapping, whatever the backend."""

    type = sa.Text()
    inherit_cache = True


@compiles(_Lowered)
def _lowered_sqlite(element: _Lowered, compiler: SQLCompiler, **kw: Any) -> str:
    return f"{SQLITE_LOWER}({compiler.process(element.clauses, **kw)})"


@compiles(_Lowered, "postgresql")
def _lowered_postgresql(element: _Lowered, compiler: SQLCompiler, **kw: Any) -> str:
    return f'lower(({compiler.process(element.clauses, **kw)}) COLLATE "{ICU_ROOT}")'


def contains(col: sa.ColumnElement[Any], pattern: sa.BindParameter[Any]) -> sa.ColumnElement[bool]:
    """`col` matches `pattern` (a `like_pattern`), both lowered."""
    return _Lowered(col).like(_Lowered(pattern), escape=ESCAPE)
