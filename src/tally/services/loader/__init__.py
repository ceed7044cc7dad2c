"""The CSV loader: read a file as published, infer its types, load it all or nothing.

- `reader`: the file's format; `decoding`: strict decoding in the source's encoding
- `limits`: the file limits measured while the bytes stream
- `inference`: column types; `chunks`: pass 1 over a plain file's own lines, matched a
  chunk at a time
- `load`: the two-pass all-or-nothing load; `staged`: SQLite's load outside the write
  lock (decision 0013)
- `pace`: a worker's COPY held to a rate while the API accepts notifications (decision
  0022)
"""
