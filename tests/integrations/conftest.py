"""The live API over real HTTP for the framework adapters, and SDK clients bound to
API keys of chosen tenants (one key per tenant: tenancy is the key's)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

import memwell
from tests.support.live_api import serve_api

ClientOf = Callable[[str], memwell.MemoryClient]


@pytest.fixture(scope="module")
def api_url(stack_env: dict[str, str]) -> Iterator[str]:
    with serve_api() as url:
        yield url


@pytest.fixture
def client_of(api_url: str, make_key: Callable[..., dict[str, str]]) -> Iterator[ClientOf]:
    """`client_of(tenant)`: a client with a read/write key of that tenant."""
    made: list[memwell.MemoryClient] = []

    def make(tenant: str) -> memwell.MemoryClient:
        key = make_key(tenant, ("read", "write"))["Authorization"].removeprefix("Bearer ")
        client = memwell.MemoryClient(api_url, api_key=key)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


@pytest.fixture
def client(client_of: ClientOf, ids: dict[str, str]) -> memwell.MemoryClient:
    return client_of(ids["tenant"])
