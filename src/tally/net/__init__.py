"""Talking to the outside world safely: SSRF-guarded downloads and signed webhooks."""
