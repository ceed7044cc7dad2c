"""tally: a self-hosted data platform for finance operations.

The packages in their layers (docs/architecture.md): `cli/`, `api/`, `worker/`,
`console/` (entry points) call `services/`, built once per process by `runtime/` from `settings`;
services call `storage/`, `net/` and `processes/`; every layer may use `core/` (pure
code). `__main__` runs the CLI.
"""

__version__ = "0.1.0"
