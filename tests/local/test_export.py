"""`memwell export` and `memwell import --format memwell` on the real stack: a user's
memories survive export, erasure and import with their fields and provenance; a
malformed file fails with one line naming where."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result
from fastapi.testclient import TestClient

from memwell.local.cli import main

MEMORIES: list[dict[str, Any]] = [
    {"content": "Ada prefers green tea, never coffee.", "kind": "preference", "importance": 0.35,
     "pinned": True, "metadata": {"confidence": 0.9, "tags": ["drinks"]}, "source": "crm"},
    {"content": "Ada ran the Lisbon marathon in October 2023.", "kind": "event",
     "importance": 0.9, "source_turn_ids": ["turn-7", "turn-8"], "session_id": "run-club",
     "agent_id": "coach", "created_at": "2023-10-01T10:00:00Z"},
    {"content": "Ada's employee number is 4471.", "kind": "fact", "importance": 0.6,
     "metadata": {"system": "hr"}, "source_turn_ids": ["turn-9"]},
]  # fmt: skip


def _add(api: TestClient, user: str, memories: list[dict[str, Any]], reconcile: bool) -> list[Any]:
    body = {"user_id": user, "memories": memories, "reconcile": reconcile}
    response = api.post("/v1/memories", json=body)
    assert response.status_code == 200, response.text
    results: list[Any] = response.json()["results"]
    return results


def _cli(stack_env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=stack_env)


def _export(stack_env: dict[str, str], user: str, *flags: str) -> list[dict[str, Any]]:
    """The header and the memory lines (entity lines: tests/entities/)."""
    result = _cli(stack_env, "export", "--user", user, *flags)
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    return [line for line in lines if line.get("record") != "entity"]


def _live_set(lines: list[dict[str, Any]]) -> set[tuple[Any, ...]]:
    return {
        (m["content"], m["kind"], m["importance"], tuple(m["source_turn_ids"]),
         json.dumps(m["metadata"], sort_keys=True), m["pinned"])
        for m in lines if m["state"] == "live"
    }  # fmt: skip


def _as_imported(metadata: str) -> str:
    return json.dumps({"source": "import", **json.loads(metadata)}, sort_keys=True)


def test_export_erase_import_round_trip(
    api: TestClient, stack_env: dict[str, str], ids: dict[str, str], tmp_path: Path
) -> None:
    user = ids["user"]
    [old] = _add(api, user, [{"content": "Ada lives in Berlin.", "source_turn_ids": ["turn-1"]}],
                 reconcile=True)  # fmt: skip
    [moved] = _add(api, user, [{"content": "Ada moved to Lisbon."}], reconcile=True)
    assert moved["action"] == "superseded" and moved["related_memory_id"] == old["memory_id"]
    _add(api, user, MEMORIES, reconcile=False)

    header, *lines = _export(stack_env, user, "--include-superseded")
    assert header["format"] == "memwell-export" and header["version"] == 1
    assert (header["tenant"], header["user_id"], header["count"]) == ("default", user, 5)
    states = {m["content"]: m["state"] for m in lines}
    assert states.pop("Ada lives in Berlin.") == "superseded"
    assert set(states.values()) == {"live"}
    superseded = next(m for m in lines if m["id"] == old["memory_id"])
    assert superseded["superseded_by"] == moved["memory_id"]
    assert [e["event"] for e in superseded["history"]] == ["add", "supersede"]
    assert [m["created_at"] for m in lines] == sorted(m["created_at"] for m in lines)

    file = tmp_path / "ada.jsonl"
    file.write_text("\n".join(json.dumps(x) for x in [header, *lines]) + "\n", encoding="utf-8")
    assert api.delete(f"/v1/users/{user}").status_code == 200
    [empty] = _export(stack_env, user)
    assert empty["count"] == 0

    imported = _cli(stack_env, "import", "--format", "memwell", str(file))
    assert imported.exit_code == 0, imported.output
    assert "added          4" in imported.stdout and "skipped        1" in imported.stdout

    _, *again = _export(stack_env, user)
    # A memory without a source of its own is marked as imported; the rest is as it was.
    expected = {(*row[:4], _as_imported(row[4]), row[5]) for row in _live_set(lines)}
    assert _live_set(again) == expected
    marathon = next(m for m in again if "marathon" in m["content"])
    assert marathon["created_at"].startswith("2023-10-01T10:00:00")
    assert (marathon["session_id"], marathon["agent_id"]) == ("run-club", "coach")
    assert all(m["history"][0]["reason"].startswith("added directly") for m in again)

    # --user: the same file as another user of the tenant.
    other = user + "-copy"
    copied = _cli(stack_env, "import", "--format", "memwell", str(file), "--user", other)
    assert copied.exit_code == 0, copied.output
    assert _live_set(_export(stack_env, other)[1:]) == expected


def test_a_malformed_file_fails_with_one_line(
    stack_env: dict[str, str], ids: dict[str, str], tmp_path: Path
) -> None:
    header = {"format": "memwell-export", "version": 1, "tenant": "default",
              "user_id": ids["user"], "exported_at": "2024-01-01T00:00:00Z",
              "count": 1}  # fmt: skip
    cases = {
        "bad line": ([json.dumps(header), "{not json"], ":2: not JSON"),
        "bad header": ([json.dumps({"format": "csv"})], ":1: not a memwell-export file"),
        "bad version": ([json.dumps({**header, "version": 9})], ":1: export version 9"),
        "bad memory": ([json.dumps(header), json.dumps({"content": "x"})], ":2: bad memory"),
    }
    for name, (rows, says) in cases.items():
        file = tmp_path / f"{name}.jsonl"
        file.write_text("\n".join(rows) + "\n", encoding="utf-8")
        result = _cli(stack_env, "import", "--format", "memwell", str(file))
        assert result.exit_code != 0, name
        [message] = result.stderr.strip().splitlines()
        assert says in message and "Traceback" not in result.output, (name, message)
