"""The `tally` command: onboarding and operation. Every command prints one JSON object."""
