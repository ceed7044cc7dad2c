"""Reconciliations (issue #11): two resources of a workspace matched by ordered passes,
the result served as an ordinary resource (kind `reconciliation`) whose every row says
why it matched or did not.

definitions.py checks a JSON body against the workspace; output_columns.py says what
the output's columns are; service.py is the use cases the API and the CLI call;
matching.py is the engine; runs.py computes and publishes an output."""
