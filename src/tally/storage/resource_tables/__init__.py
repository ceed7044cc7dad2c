"""The per-resource row tables, in eight modules: `ddl` (layout, DDL, indexes),
`stored_types` (PostgreSQL's own types translated to the stored forms tally sees),
`row_json` (rows rendered to JSON text, and that text stored), `csv_lines` (rows
rendered to their CSV line, for the export), `pages` (the Data API's page and count
statements, the export's pages, rows by id), `text_search` (a column containing a
text, case-insensitively alike on both backends), `column_values` (a table's columns as JSON
arrays, for column snapshots), and `source_rows` (a source's rows removed, and found
again by position, row id or content).

Each resource has a table `r_<id>` with a hidden, monotonically increasing `_row_id`
(the Data API's system column `_row`; in a source's table never given twice, even after
rows are removed: AUTOINCREMENT on SQLite, an identity on PostgreSQL) and physical
columns c0..cN (labels live in the catalogue, so any header text is a valid column
name). A source's table also has
`_file_id` (its system column of that name): the file whose load inserted the row, one
value per load (SQLite: a constant of the INSERT; PostgreSQL: the column's DEFAULT reads
the load transaction's `tally.file_id`, `ddl.set_file_id`, since COPY takes no
constants), NULL for `tally admin load`; indexed with the per-column indexes, so a
file's rows are found without a scan.

Rows are rendered to JSON by the database itself (json_object on
SQLite, row_to_json on PostgreSQL): a page travels to Python as one string per
row, which is what makes large pages cheap, and decimals keep their exact digits.

Each row also has a hidden `_json`: its whole JSON object text, stored by a worker after
a load (`row_json.store_row_json`), or NULL until then. A page of whole rows reads
`COALESCE(_json, <the row rendered>)`, so a stored text saves the rendering and a
missing one costs nothing but the rendering (decision 0011). The one rule that keeps
them true: every statement that changes a row's values sets its `_json` to NULL.
"""
