"""Every URL setting is checked when the settings load, and a refusal is one line that
names the setting and the rule, never the value (which may hold a password)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from memwell.core.settings import Settings
from memwell.core.settings_errors import describe_settings_error
from memwell.core.url_rules import DATABASE_RULE, PORT_RULE

SECRET = "pw-canary"


def _refusal(**env: str) -> str:
    with pytest.raises(ValidationError) as refused:
        Settings(**env)
    line = describe_settings_error(refused.value)
    assert line is not None
    assert SECRET not in str(refused.value) and SECRET not in line
    assert "\n" not in line
    return line


@pytest.mark.parametrize(
    ("env", "setting", "rule"),
    [
        ({"REDIS_URL": f"redis://:{SECRET}@h:6379/-1"}, "REDIS_URL", "database must be a number"),
        ({"REDIS_URL": f"redis://:{SECRET}@h:6379/0?db=-1"}, "REDIS_URL", "database must be"),
        ({"REDIS_URL": f"redis://:{SECRET}@h:99999/0"}, "REDIS_URL", PORT_RULE),
        ({"REDIS_URL": f"redis://:{SECRET}@h:0/0"}, "REDIS_URL", PORT_RULE),
        ({"REDIS_URL": f"http://:{SECRET}@h/0"}, "REDIS_URL", "redis://, rediss://"),
        ({"REDIS_URL": f"sentinel://:{SECRET}@a:1/-1?master_name=m"}, "REDIS_URL", "database"),
        ({"REDIS_URL": "sentinel://"}, "REDIS_URL", "master_name"),
        (
            {"DATABASE_URL": f"postgresql+psycopg://u:{SECRET}@h:99999/db"},
            "DATABASE_URL",
            PORT_RULE,
        ),
        ({"DATABASE_URL": f"not a url {SECRET}"}, "DATABASE_URL", DATABASE_RULE),
        ({"DATABASE_URL": f"postgresql://u:{SECRET}@h:port/db"}, "DATABASE_URL", DATABASE_RULE),
        ({"DATABASE_URL": f"mysql://u:{SECRET}@h/db"}, "DATABASE_URL", DATABASE_RULE),
        (
            {
                "MEMWELL_DATABASE_READ_URL": f"postgresql+psycopg://u:{SECRET}@a:5432/db,"
                f"postgresql+psycopg://u:{SECRET}@b:99999/db"
            },
            "MEMWELL_DATABASE_READ_URL",
            PORT_RULE,
        ),
        ({"OPENAI_BASE_URL": f"https://{SECRET}@h:70000/v1"}, "OPENAI_BASE_URL", PORT_RULE),
        ({"OPENAI_BASE_URL": f"ftp://{SECRET}/v1"}, "OPENAI_BASE_URL", "http(s) URL"),
        ({"MEMWELL_API_URL": f"http://{SECRET}:0"}, "MEMWELL_API_URL", PORT_RULE),
        (
            {"MEMWELL_REEMBED_TARGETS": f"openai:m@https://{SECRET}:99999"},
            "MEMWELL_REEMBED_TARGETS",
            f"entry 1's endpoint: {PORT_RULE}",
        ),
        ({"MEMWELL_METRICS_TOKEN": SECRET}, "MEMWELL_METRICS_TOKEN", "at least 16"),
    ],
)
def test_a_bad_setting_is_refused_by_name_and_rule(
    env: dict[str, str], setting: str, rule: str
) -> None:
    line = _refusal(**env)
    assert line.startswith(f"invalid settings: {setting}: "), line
    assert rule in line, line


def test_good_urls_still_load() -> None:
    settings = Settings(
        REDIS_URL="rediss://:pw@h:6380/3",
        DATABASE_URL="postgresql+psycopg://u:pw@h:5432/db",
        MEMWELL_DATABASE_READ_URL="postgresql+psycopg://u@a/db, postgresql://u@b:6432/db",
        OPENAI_BASE_URL="http://127.0.0.1:11434/v1",
        MEMWELL_REEMBED_TARGETS="openai:text-embedding-3-small@https://h:8443/v1,local:e5-small",
    )
    assert settings.database_read_urls[1] == "postgresql://u@b:6432/db"
    assert Settings(REDIS_URL="unix:///run/redis.sock?db=2").redis_url
    assert Settings(REDIS_URL="sentinel://a:1,b:2/1?master_name=m").redis_url


def test_every_problem_is_on_the_one_line() -> None:
    line = _refusal(REDIS_URL="redis://h/-1", MEMWELL_TOP_K="0")
    assert line.count("; ") == 1
    assert "REDIS_URL: " in line and "MEMWELL_TOP_K: Input should be greater than" in line


def test_an_empty_url_means_unset_where_it_did() -> None:
    settings = Settings(MEMWELL_API_URL="", MEMWELL_DATABASE_READ_URL="", REDIS_URL="")
    assert settings.database_read_urls == [] and settings.resolved_api_url.startswith("http://")
    assert _refusal(OPENAI_BASE_URL="").startswith("invalid settings: OPENAI_BASE_URL: ")
