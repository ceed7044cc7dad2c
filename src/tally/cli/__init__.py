"""The `tally` command: onboarding and operation. Every command prints one JSON object.

- `main`: the typer app; usage errors reported as JSON
- `output`: one JSON object per command, failures too
- `admin`: accounts, workspaces, keys, loads, reconciliations, transformations
- `serve`: the API and its worker (the address bound first, `listening` said once it
  answers); `worker`: extra worker processes
- `demo`, `demo_pair`: the demo's sources, reconciliation and transformation
"""
