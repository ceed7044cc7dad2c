"""Pure code shared by every layer: records, types, grammar, errors. No I/O and no
imports of ours (an import-linter contract keeps it so).

- `accounts`: `Account`, `Workspace`; `users`: the console's users, roles and the rules
  of their passwords, sessions and sign-in failures; `files`: `FileRecord`, `FileStatus`;
  `status_callbacks`: `DeliveryStatus` of a status callback's delivery
- `reconciliation`: a reconciliation's definition as frozen values, statuses, manual
  work; `reconciliation_actions`: the manual work's records; `derived_runs`: a derived
  resource's finished run, as its history keeps it
- `bodies`: the JSON body rules /api/v2 and the CLI share (`parsed`: a body checked
  against its model, each fault named by its path)
- `formats`: a source's file layout (leading and trailing lines skipped, dates' token
  formats, numbers' separators and negative forms) and the conversion of a batch's
  values into canonical text; `source_bodies`: a source's declared columns and layout as
  the bodies and `tally admin load --columns` read them
- `columns`: column types, parsing, exact decimal scaling; `filters`: the Data API's
  grammar into a `RowQuery`
- `limits` (`FileLimits`), `sql_limits` (`SqlLimits`), `sql_types` (a transformation's
  expression types), `errors` (the one error tree)
- `ids`, `names`, `urls` (`redact_url`), `redaction` (a logging filter blanking keys and
  webhook ids), `log_lines` (the event, then its context as `key=value`), `encodings`
  (the encodings a source may declare), `sealing`, `json_paths`, `clock`
"""
