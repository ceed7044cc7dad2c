"""`python -m tally` runs the CLI."""

from tally.cli.main import app

app()
