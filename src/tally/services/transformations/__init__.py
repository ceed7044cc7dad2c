"""Transformations: resources derived from others by one SELECT (issue #12).

The SQL heart, pure code without a database: `dialect` parses and checks the SQL
against the inputs and the allow-list (`allow_list`), `core/sql_types` holds the type
rules, `translate` types every expression and rewrites it in the forms it is given
(storage/sql_forms: storage picks the backend's), and `query` ties them together into
the `CheckedQuery` the runs and the API use (docs/transformations.md).
"""
