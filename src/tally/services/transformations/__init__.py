"""Transformations: resources derived from others by one SELECT (issue #12).

The SQL heart, pure code without a database: `dialect` parses and checks the SQL
against the inputs and the allow-list (`allow_list`), `sql_types` holds the type rules,
`forms` the per-backend SQL of each typed operation, `translate` types every expression
and rewrites it for one backend, and `query` ties them together into the
`CheckedQuery` the runs and the API use (docs/transformations.md).
"""
