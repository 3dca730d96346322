"""The quickstarts carry a newcomer to a working key: they link the security page, make
an admin key (erasure needs one), give Compose the secret it refuses to start without,
and name the key one way in every example."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

QUICKSTARTS = ("README.md", "docs/quickstarts.md")


def _quickstart(repo_root: Path, name: str) -> str:
    text = (repo_root / name).read_text()
    if name == "README.md":  # its Quickstarts section
        text = text[text.index("## Quickstarts") :]
        text = text[: text.index("\n## ", 1)]
    return text


@pytest.mark.parametrize("name", QUICKSTARTS)
def test_the_quickstart_links_the_security_page(repo_root: Path, name: str) -> None:
    links = re.findall(r"\]\(([^)#]+)", _quickstart(repo_root, name))
    assert any(Path(link).name == "security.md" for link in links)
    for link in links:
        if not link.startswith("http"):
            assert ((repo_root / name).parent / link).exists(), link


@pytest.mark.parametrize("name", QUICKSTARTS)
def test_the_quickstart_makes_an_admin_key_and_names_keys_one_way(
    repo_root: Path, name: str
) -> None:
    text = _quickstart(repo_root, name)
    assert re.search(r"memwell keys create [^\n]*--scope admin", text)
    assert "api_key=None" not in text
    assert set(re.findall(r"api_key=([^,)\s]+)", text)) == {'"mw_..."'}


def test_the_compose_quickstart_sets_the_secret_compose_requires(repo_root: Path) -> None:
    compose = (repo_root / "docker-compose.yml").read_text()
    assert "${MEMWELL_ERASURE_SECRET:?" in compose  # compose refuses to start without it
    for name in QUICKSTARTS:
        text = _quickstart(repo_root, name)
        assert 'echo "MEMWELL_ERASURE_SECRET=' in text and "docker compose exec api" in text
        secret = text.index('echo "MEMWELL_ERASURE_SECRET=')
        assert secret < text.index("docker compose up") < text.index("docker compose exec api")
