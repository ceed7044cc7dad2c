"""Talking to the outside world safely.

- `fetch`: the SSRF-safe streaming download (the body in chunks within its limits;
  writes nothing)
- `callbacks`: status callbacks POSTed over the same guard
- `signing`: Standard Webhooks signatures
"""
