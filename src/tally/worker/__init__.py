"""Workers: processes that take jobs from the database.

- `runner`: N threads claiming files, status callbacks, derived runs (and the outbox
  events that queue them) and resources a load left work in; graceful stop; a listener
  thread wakes idle threads when files are queued (PostgreSQL: by any process; SQLite:
  by this one) and marks the loads' pace busy (decision 0022)
"""
