"""The served address `memwell up` prints answers its `/`: a browser goes on to the
console, any other client gets the links, and neither is a 404."""

from __future__ import annotations

from fastapi.testclient import TestClient


def test_a_browser_at_the_served_address_lands_on_the_console(api: TestClient) -> None:
    first = api.get("/", headers={"accept": "text/html,*/*;q=0.8"}, follow_redirects=False)
    assert first.status_code == 307
    assert first.headers["location"] == "/console"
    page = api.get("/", headers={"accept": "text/html"})
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")


def test_any_other_client_gets_an_index_of_links_that_answer(api: TestClient) -> None:
    index = api.get("/")
    assert index.status_code == 200
    body = index.json()
    assert body["service"] == "memwell"
    assert set(body["links"]) >= {"console", "openapi", "health", "ready"}
    for path in body["links"].values():
        assert api.get(path).status_code == 200, path


def test_the_index_stays_out_of_the_published_schema(api: TestClient) -> None:
    assert "/" not in api.get("/openapi.json").json()["paths"]
