"""REDIS_URL in its sentinel:// form: parsed into what redis-py and Kombu need, and
refused at startup, with the reason, when it is malformed."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from memwell.core.errors import ConfigurationError
from memwell.core.redis_target import celery_broker, parse_sentinel
from memwell.core.settings import Settings


def test_a_sentinel_url_names_its_sentinels_master_db_and_passwords() -> None:
    target = parse_sentinel(
        "sentinel://:s3cret@10.0.0.1:26379,10.0.0.2:26380,[::1]:26381/2"
        "?master_name=memwell&sentinel_password=watch"
    )
    assert target.sentinels == (("10.0.0.1", 26379), ("10.0.0.2", 26380), ("::1", 26381))
    assert (target.master_name, target.db) == ("memwell", 2)
    assert (target.password, target.sentinel_password) == ("s3cret", "watch")


def test_kombu_gets_one_url_per_sentinel_and_the_master_name() -> None:
    url, options = celery_broker("sentinel://:pw@a:1,b:2/0?master_name=m")
    assert url == "sentinel://:pw@a:1/0;sentinel://:pw@b:2/0"
    assert options == {"master_name": "m"}
    assert celery_broker("redis://r:6379/0") == ("redis://r:6379/0", {})


def test_replica_acks_default_to_one_behind_sentinel_only() -> None:
    settings = Settings()
    assert settings.resolved_replica_acks("sentinel://a:1/0?master_name=m") == 1
    assert settings.resolved_replica_acks("redis://r:6379/0") == 0
    assert Settings(MEMWELL_REPLICA_ACKS=2).resolved_replica_acks("redis://r/0") == 2


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("sentinel://a:26379/0", "master_name"),
        ("sentinel:///0?master_name=m", "host:port"),
        ("sentinel://a:notaport/0?master_name=m", "port must be a number from 1 to 65535"),
        ("sentinel://a:1/x?master_name=m", "database must be a number"),
        ("sentinel://a:1/-1?master_name=m", "database must be a number"),
        ("sentinel://a:99999/0?master_name=m", "port must be a number from 1 to 65535"),
    ],
)
def test_a_malformed_sentinel_url_is_refused_with_its_reason(url: str, reason: str) -> None:
    with pytest.raises(ConfigurationError, match=reason):
        parse_sentinel(url)
    with pytest.raises(ValidationError, match=reason):
        Settings(REDIS_URL=url)


def test_the_status_screen_masks_both_passwords_of_a_sentinel_url() -> None:
    from memwell.maintenance.status import masked_url

    masked = masked_url("sentinel://:pw@a:1,b:2/0?master_name=m&sentinel_password=watch")
    assert "pw" not in masked.replace("sentinel_password", "") and "watch" not in masked
    assert masked.startswith("sentinel://:***@a:1,b:2/0?master_name=m")
