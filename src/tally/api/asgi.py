"""The app factory uvicorn imports in each API process (settings from the environment)."""

from __future__ import annotations

from fastapi import FastAPI

from tally.api.app import create_app
from tally.settings import load_settings


def app_factory() -> FastAPI:
    return create_app(load_settings())
