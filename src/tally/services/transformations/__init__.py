"""Transformations: resources derived from others by one SELECT (issue #12;
docs/transformations.md).

- The SQL heart, pure code without a database: `dialect` parses and checks one SELECT
  reading only its inputs, against `allow_list`; `casts`, `expressions` and `functions`
  type every expression (the rules in `core/sql_types`); `translate` rewrites it in the
  forms it is given (storage picks the backend's: storage/sql_forms); `limits` measures
  the SQL's budget before each step that grows with it; `query` ties them together
  (`check_sql`, `CheckedQuery`)
- The resource: `bodies` (the definition's JSON body) + `definitions` (checked against
  the workspace), `service` (`TransformationService`), `previews` (`Previews`: at most
  so many at once a process and a workspace), `runs` (`TransformationBuilder`: INSERT
  ... SELECT into the staged output within time and row limits; incremental where the
  query allows)
"""
