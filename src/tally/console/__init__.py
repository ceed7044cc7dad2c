"""The console: the web pages people sign in to, rendered on the server (Jinja2; one
small own script, which pages work without), mounted under /console/ in the API's app.
An entry point like `api/`: it calls services through the runtime, never storage.

- `app`: `install_console` (its routes, static files, error pages and guard on an app)
- `guard`: `ConsoleGuard`, every console response's security headers and the refusal of
  cross-origin state-changing requests (decision 0026)
- `auth`: the session cookie, the signed-in user of a request, the role an action needs
- `pages`: the Jinja2 environment (autoescaped) and `render`
- `sign_in`: sign-in, invite (choose a password) and sign-out
- `overview`: the workspace's overview
- `resource_table`: any resource's rows (sort, filters, columns, pages) and their CSV
  export; `table_view`: that table's state in its URL, in the Data API's grammar
- `people`: the admins' users page (disable, new invite)
- `reconciliation`: a reconciliation's page (its last run by status and side; the
  workbench grows here)
- `workbench_exceptions`: the workbench's Exceptions view (both sides' open rows, the
  Selection, the candidates of a row); `workbench_exceptions_actions`: its Match and
  Resolve; `exceptions_view`: its state in its URL, each side a Data API query (and
  its text search); `exceptions_rows`: its rows' amounts as the engine compares them,
  ages, the Selection; `exceptions_export`: a side's "Export CSV"
- `workbench_suggestions`, `workbench_matches`, `workbench_resolved`: the workbench's
  views of a reconciliation's suggested matches (confirm, reject), matches (undo) and
  resolutions (reopen); `workbench_groups`: matches read whole, each side's rows beside
  the other's; `workbench_actions`: acting (roles, notes, who did what, refusals)
- `workbench_history`: the workbench's History view (every action and undo, filtered,
  paged, undone where allowed, exported as CSV)
- `transformations`: a transformation's page (its SQL edited, previewed and saved; its
  inputs, readers and last run)
- `transformation_new`: the admins' "New transformation" page (preview, create)
- `transformation_view`: what that page shows, shaped (an error's place in the SQL, a
  preview's exact values, a neighbour's page)
- `source`: a source's page (files, webhook, status callbacks) and one file's page;
  `source_actions`: its admins' upload, webhook rotation and "Retry now"
- `templates/`, `static/`: the pages, their one style sheet, `upload.js` (the upload's
  progress) and `workbench_exceptions.js` (the live Selection and keys); pages work
  without them
"""
