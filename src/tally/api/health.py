"""GET /health: the process answers. It does not check the database (spec part 4)."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel

router = APIRouter(tags=["Health"])


class HealthResponse(BaseModel):
    status: str = "ok"


@router.get("/health", summary="Health check", response_model=HealthResponse)
async def health() -> HealthResponse:
    return HealthResponse()
