"""Generated documentation must match what generates it: a stale page fails here."""

from __future__ import annotations

from pathlib import Path

from memwell.core.settings_docs import render


def test_configuration_reference_is_fresh(repo_root: Path) -> None:
    committed = (repo_root / "docs" / "configuration.md").read_text()
    assert committed == render(), (
        "docs/configuration.md is stale: run "
        "`python -m memwell.core.settings_docs > docs/configuration.md`"
    )


def test_configuration_reference_names_every_setting(repo_root: Path) -> None:
    from memwell.core.settings import Settings

    page = render()
    for name, field in Settings.model_fields.items():
        env = field.validation_alias if isinstance(field.validation_alias, str) else name.upper()
        assert f"`{env}`" in page


def test_short_settings_table_is_fresh(repo_root: Path) -> None:
    from memwell.core.settings_docs import SHORT_PAGE, render_short_table

    page = (repo_root / SHORT_PAGE).read_text()
    assert page == render_short_table(page), (
        f"{SHORT_PAGE}'s settings table is stale: run "
        "`python -m memwell.core.settings_docs --short-table`"
    )
