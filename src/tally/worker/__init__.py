"""Workers: processes that take jobs from the database (files, status callbacks, derived runs)."""
