"""Workers: processes that take jobs from the database (files, notifications)."""
