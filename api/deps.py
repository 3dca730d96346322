"""Annotated dependencies, so routes read like sentences."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from api.state import AppState


def get_state(request: Request) -> AppState:
    state: AppState = request.app.state.memwell
    return state


def get_tenant(state: Annotated[AppState, Depends(get_state)]) -> str:
    """The caller's tenant. Until API keys exist every caller is the default tenant;
    the request body never decides it."""
    return state.settings.default_tenant


StateDep = Annotated[AppState, Depends(get_state)]
TenantDep = Annotated[str, Depends(get_tenant)]
