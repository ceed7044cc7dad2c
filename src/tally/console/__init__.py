"""The console: the web pages people sign in to, rendered on the server (Jinja2, no
script), mounted under /console/ in the API's app. An entry point like `api/`: it calls
services through the runtime, never storage.

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
- `templates/`, `static/`: the pages and their one style sheet (no JavaScript yet)
"""
