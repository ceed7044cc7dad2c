"""How much SQL a transformation may be (issue #30): its checking parses, qualifies and
translates it with sqlglot, whose memory and time grow with the SQL and whose parser
and SQL writer recurse once per level of nesting. So the text is measured before it is
parsed (bytes, then its tokens: nesting, CTEs, terms), and the parsed tree before any
walk of it recurses (nodes and depth), again once `*` is expanded; each limit is a
setting, named in its rejection. A check also stops at its deadline: the time limit of
the run or preview it is part of.

Measured (sqlglot 30, Python 3.11, one thread at the default recursion limit of 1,000):
- the parser recursed past the limit at 45 nested parentheses, 41 nested function
  calls, 51 nested CASEs and 96 NOTs in a row; SQLite's SQL writer at a chain of 162
  `||` (its translation nests a parenthesis per term); a chain of 3,000 `+` or `OR` was
  fine. Hence 24 levels of nesting and a tree 100 deep, with room for the caller's stack.
- 3,000 CTEs (90.8 KB, each `SELECT *` of the last) took 9.7 s and 660 MB more memory to
  preview on SQLite; 9,000 `+` terms 28.6 s before SQLite refused its expression depth.
  Within these limits the heaviest checks measured took 1-4 s in a process of 110-160 MB
  (docs/transformations.md, "Limits of the SQL").
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from sqlglot import TokenType, exp
from sqlglot.errors import TokenError

from tally.core.sql_limits import SqlLimits
from tally.services.transformations.dialect import Input, SqlText

_OPENING = (TokenType.L_PAREN, TokenType.CASE)  # each nests what follows, to its closing
_CLOSING = (TokenType.R_PAREN, TokenType.END)
_PREFIX = (TokenType.NOT, TokenType.DASH, TokenType.PLUS)  # after these, a prefix operator
_OPERAND_ENDS = (  # a token after which `-` or `+` is binary, not a prefix
    TokenType.R_PAREN,
    TokenType.END,
    TokenType.VAR,
    TokenType.NUMBER,
    TokenType.STRING,
    TokenType.IDENTIFIER,
    TokenType.STAR,
    TokenType.NULL,
    TokenType.TRUE,
    TokenType.FALSE,
)


def check_text(text: SqlText, limits: SqlLimits) -> None:
    """The text within the limits, told from its bytes and tokens alone (the tokenizer
    is linear and keeps no tree): DefinitionRejectedError naming the first limit passed."""
    size = len(text.sql.encode("utf-8", "surrogatepass"))
    if size > limits.max_sql_bytes:
        raise text.reject(
            f"the SQL is {size:,} bytes, more than TALLY_TRANSFORMATION_MAX_SQL_BYTES "
            f"({limits.max_sql_bytes:,})"
        )
    try:
        tokens = text.tokens()  # kept: a rejection later finds positions in them
    except TokenError:
        return  # the parser says where, as for any SQL that does not parse
    if len(tokens) > limits.max_terms:
        raise text.reject(_too_many_terms(len(tokens), limits))
    depth = prefixes = ctes = 0
    previous: TokenType | None = None
    for token in tokens:
        kind = token.token_type
        if kind in _OPENING:
            depth += 1
        elif kind in _CLOSING:
            depth = max(0, depth - 1)
        if kind is TokenType.L_PAREN and previous is TokenType.ALIAS:
            ctes += 1  # `name AS (`: only a CTE opens a parenthesis after AS
        if kind in _PREFIX and (kind is TokenType.NOT or previous not in _OPERAND_ENDS):
            prefixes += 1
        else:
            prefixes = 0
        if depth + prefixes > limits.max_nesting:
            raise text.reject(
                "the SQL nests parentheses, CASEs and prefix operators more than "
                f"TALLY_TRANSFORMATION_MAX_NESTING ({limits.max_nesting}) deep"
                + text.at(token.start)
            )
        previous = kind
    if ctes > limits.max_ctes:
        raise text.reject(_too_many_ctes(ctes, limits))


def _too_many_ctes(found: int, limits: SqlLimits) -> str:
    return (
        f"the SQL has {found:,} CTEs, more than TALLY_TRANSFORMATION_MAX_CTES ({limits.max_ctes:,})"
    )


_QUALIFIED = " once `*` is expanded and every column named"


def _too_many_terms(found: int, limits: SqlLimits) -> str:
    return (
        f"the SQL has {found:,} terms (names, values, operators), more than "
        f"TALLY_TRANSFORMATION_MAX_TERMS ({limits.max_terms:,})"
    )


def check_tree(
    text: SqlText, tree: exp.Expr, limits: SqlLimits, *, qualified: bool = False
) -> None:
    """The parsed (or qualified: `*` expanded) tree within the limits, measured without
    recursion, before anything walks it recursively."""
    nodes, ctes, stack = 0, 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        nodes += 1
        ctes += isinstance(node, exp.CTE)
        if nodes > limits.max_terms:
            raise text.reject(_too_many_terms(nodes, limits) + (_QUALIFIED if qualified else ""))
        if depth > limits.max_depth:
            raise text.reject(
                "an expression nests more than TALLY_TRANSFORMATION_MAX_DEPTH "
                f"({limits.max_depth}) levels deep: each operator of a chain is a level "
                "(for many ORs of one column, write `x IN (...)`)",
                node,
            )
        stack.extend((child, depth + 1) for child in node.iter_expressions())
    if ctes > limits.max_ctes:  # `AS MATERIALIZED (` too
        raise text.reject(_too_many_ctes(ctes, limits))


def check_expansion(
    text: SqlText, tree: exp.Query, inputs: Mapping[str, Input], limits: SqlLimits
) -> None:
    """The tree's terms once `*` is expanded, bounded before `qualify` expands them (its
    time and memory grow with them: 100 CTEs each `SELECT *` of the last, over ten
    inputs of 500 columns, took it 30 s and 970 MB). An estimate: each `*` counted as
    every column its sources can have, 5 nodes each, a CTE as wide as the widest of its
    name; `check_tree` counts the tree `qualify` made again."""
    widths = {name: len(source.columns) for name, source in inputs.items()}
    for cte in _ctes_in_post_order(tree):  # a CTE after those it can read
        name = cte.alias_or_name
        widths[name] = max(_width(cte.this, widths), widths.get(name, 0))
    expanded = sum(
        5 * (_width(select, widths) - len(select.expressions))  # an expanded column: 5 nodes
        for select in tree.find_all(exp.Select)
    )
    terms = sum(1 for _ in tree.walk()) + max(0, expanded)
    if terms > limits.max_terms:
        raise text.reject(_too_many_terms(terms, limits) + _QUALIFIED)


def _ctes_in_post_order(tree: exp.Expr) -> list[exp.CTE]:
    """Each CTE after the CTEs inside it and those before it (without recursion)."""
    order, stack = [], [tree]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(node.iter_expressions())  # popped last first: reversed, first first
    return [node for node in reversed(order) if isinstance(node, exp.CTE)]


def _width(query: exp.Expr, widths: Mapping[str, int]) -> int:
    """How many columns the query can give at most (its sources' widths by name)."""
    while isinstance(query, exp.SetOperation | exp.Subquery):
        query = query.left if isinstance(query, exp.SetOperation) else query.this
    assert isinstance(query, exp.Select)  # check_nodes allows no other query
    sources: dict[str, int] = {}
    for source in [query.args.get("from_"), *(query.args.get("joins") or [])]:
        table = source.this if source is not None else None
        if isinstance(table, exp.Table):
            sources[table.alias_or_name] = widths.get(table.name, 0)
        elif isinstance(table, exp.Subquery):
            sources[table.alias_or_name] = _width(table.this, widths)
    width = 0
    for projection in query.expressions:
        if isinstance(projection, exp.Star):
            width += sum(sources.values())
        elif isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star):
            width += sources.get(projection.table, 0)
        else:
            width += 1
    return width


def check_deadline(text: SqlText, deadline: float | None) -> None:
    """A check past its deadline (a `time.monotonic()`) is rejected: the run or preview
    it is part of would have no time left to run the query."""
    if deadline is not None and time.monotonic() > deadline:
        raise text.reject(
            "checking the SQL took longer than TALLY_TRANSFORMATION_TIMEOUT_SECONDS: "
            "make it smaller"
        )
