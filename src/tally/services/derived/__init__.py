"""Derived resources (reconciliations, transformations): what every kind shares. A kind
(services/reconciliation/, services/transformations/) gives its checks, columns and
builder; this package keeps the rest once: a definition's create, list, get, replace and
delete (`lifecycle.DefinitionLifecycle`), the output's deletion (`outputs`), the
dependency graph (`graph`: upstream, a page's neighbours), the builders' contract
(`builders`), the runs (`runs.DerivedRuns`), the phase a run is in and each phase's
seconds (`phases`), their publication (`publishing.Publisher`) and their history
(`history`: each finished run, the last RUNS_KEPT).
"""
