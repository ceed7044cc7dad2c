"""Derived resources (reconciliations, transformations): what every kind shares. A kind
(services/reconciliation/, services/transformations/) gives its checks, columns and
builder; this package keeps the rest once: the dependency graph (`graph.upstream`), the
output resource's life (`outputs`), the builders' contract (`builders`), the runs
(`runs.DerivedRuns`) and their publication (`publishing.Publisher`).
"""
