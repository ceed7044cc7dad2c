"""Reconciliations (issue #11): two resources of a workspace matched by ordered passes,
the result served as an ordinary resource (kind `reconciliation`) whose every row says
why it matched or did not.

- The definition: `bodies` (the JSON body's model), `definitions` + `inputs` (a body
  checked against the workspace: 422 / 400 naming each field), `output_columns`
- The use cases: `service` (`ReconciliationService`), `manual` (match, confirm, reject,
  undo), `resolutions` (rows of one side closed with a reason code, and reopened),
  `patches` (the published output and last_run changed at once by a match or a
  resolution), `kept_work` (manual work found again after its source's rows were
  replaced or taken back: carried to the new positions, or retired with the reason),
  `candidates` (a row's nearest rows of the other side under each pass, each condition
  met or failed), `match_pages` (a page of the output's matches, whole, for the
  console's workbench), `history` (every action and undo, newest first, a page at a
  time or as CSV)
- A run: `runs` (`ReconciliationBuilder`: snapshot, engine, output), `reading` (what it
  reads of each side), `plan` (the output's plan rows, full or incremental),
  `incremental` (whether a run may patch the output, and the patch), `keys` (key
  signatures, the late rows' component), `totals` (last_run's amounts, signed and
  absolute, per currency where the sides name one), `oldest` (last_run's oldest
  unmatched date per side), `replay` (the actions taken while it ran, shown again on
  what it publishes)
- The engine, pure: `matching` (`reconcile`) over `state`, its values in `rows` (a
  side's rows in, matches and reasons out); `passes` (manual, one-to-one) with
  `key_join` (keys one row a side has, joined by hash with numpy) and `large_groups` (a
  key group of many candidate pairs, matched level by level); `grouped` (one-to-many,
  many-to-one); `explain` + `reasons` (a reason on every row); `normalizers`
"""
