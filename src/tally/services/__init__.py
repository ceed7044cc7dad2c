"""Domain services: the use cases. They call storage and net, never FastAPI or typer."""
