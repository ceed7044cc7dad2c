"""Storage: the SQL database and the file store. Imports only tally.core."""
