"""`memwell up --llm-gguf`'s model server: checked before anything starts, started
before the API and the workers and waited on, restarted when it dies, stopped with the
stack, and reported by `memwell status`.

The server here is a stand-in that only lists its model
(tests/support/fake_llama_server.py): these tests are about supervision. The real
llama.cpp server runs in the real-model tier (tests/real_llm/).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from memwell.core.errors import ConfigurationError
from memwell.core.settings import Settings
from memwell.llm.model_server import probe_model_server
from memwell.local.llm_server import (
    LocalLlmServer,
    check_gguf,
    check_runtime,
    planned_server,
)
from memwell.local.ports import is_free
from memwell.local.supervisor import Child, Supervisor
from memwell.local.waiting import wait_for
from memwell.maintenance.status import StackStatus, read_model_server, render
from tests.support.fake_openai import FakeOpenAI

FAKE_SERVER = "tests.support.fake_llama_server"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-model.gguf"
    path.write_bytes(b"GGUF" + bytes(60))
    return path


def _server(gguf: Path, *, timeout_s: float = 30.0) -> LocalLlmServer:
    return LocalLlmServer(
        gguf=gguf, port=_free_port(), alias="tiny", n_ctx=2048, n_threads=2,
        start_timeout_s=timeout_s,
    )  # fmt: skip


def _supervisor(children: list[Child], **env: str) -> Supervisor:
    return Supervisor(children, env={**os.environ, **env})


# --- checked before anything starts ------------------------------------------------


def test_a_missing_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"GGUF model file .*nope\.gguf does not exist"):
        check_gguf(tmp_path / "nope.gguf")


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "weights.bin"
    path.write_bytes(b"PK\x03\x04 a zip, say")
    with pytest.raises(ConfigurationError, match="not a GGUF model file"):
        check_gguf(path)


def test_a_gguf_file_passes(gguf: Path) -> None:
    check_gguf(gguf)


def test_a_missing_runtime_names_the_extra() -> None:
    with pytest.raises(ConfigurationError, match=r"no_such_runtime_lib.*memwell\[llm-local\]"):
        check_runtime(("no_such_runtime_lib",))


def test_the_gguf_and_another_endpoint_together_are_refused(gguf: Path) -> None:
    settings = Settings(MEMWELL_LOCAL_LLM_GGUF=gguf, OPENAI_BASE_URL="http://x:1/v1")  # type: ignore[call-arg]
    with pytest.raises(ConfigurationError, match="both set"):
        planned_server(settings)


def test_no_gguf_plans_no_server() -> None:
    assert planned_server(Settings()) is None


def _up(*args: str, data_dir: Path, repo_root: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_BASE_URL"}
    env["MEMWELL_DATA_DIR"] = str(data_dir)
    return subprocess.run(
        [sys.executable, "-m", "memwell", "up", *args],
        cwd=repo_root, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_up_with_a_bad_model_file_fails_in_one_line_before_starting(
    tmp_path: Path, repo_root: Path
) -> None:
    not_gguf = tmp_path / "model.gguf"
    not_gguf.write_text("hello")
    for path, reason in ((tmp_path / "missing.gguf", "does not exist"),
                         (not_gguf, "not a GGUF model file")):  # fmt: skip
        data = tmp_path / f"data-{path.name}"
        done = _up("--llm-gguf", str(path), data_dir=data, repo_root=repo_root)
        assert done.returncode != 0
        errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
        assert len(errors) == 1 and reason in errors[0], done.stderr
        assert "Traceback" not in done.stderr
        assert not data.exists()  # nothing started: no data dir, no lock, no ports


# --- supervised: start, wait, restart, stop -----------------------------------------


def test_the_server_starts_first_and_the_others_only_once_it_answers(
    gguf: Path, tmp_path: Path
) -> None:
    server = _server(gguf)
    seen = tmp_path / "seen"
    # A one-shot child that records whether the model server answered when it started.
    client = Child(
        "client",
        [sys.executable, "-c", "import httpx, sys; open(sys.argv[1], 'w').write("
         "str(httpx.get(sys.argv[2] + '/models').json()['data'][0]['id']))",
         str(seen), server.base_url],
        restart=False,
    )  # fmt: skip
    argv_log = tmp_path / "argv.jsonl"
    supervisor = Supervisor(
        [client, server.child(Path(sys.executable), tmp_path, module=FAKE_SERVER)],
        env={**os.environ, "FAKE_LLAMA_ARGV": str(argv_log)},
        exit_after_oneshots=True,
    )
    assert supervisor.run() == 0
    assert seen.read_text() == "tiny"
    argv = json.loads(argv_log.read_text().splitlines()[0])
    assert argv == [
        "--model", str(gguf), "--model_alias", "tiny", "--host", "127.0.0.1",
        "--port", str(server.port), "--n_ctx", "2048", "--n_threads", "2",
        "--interrupt_requests", "false",
    ]  # fmt: skip
    assert is_free(server.port)  # stopped with the stack


def test_a_killed_server_is_restarted_and_stops_with_the_stack(gguf: Path, tmp_path: Path) -> None:
    server = _server(gguf)
    child = server.child(Path(sys.executable), tmp_path, module=FAKE_SERVER)
    supervisor = _supervisor([child])
    supervisor._start(child)
    try:
        supervisor._await_answer(child)
        assert child.process is not None
        first = child.process.pid
        os.killpg(first, signal.SIGKILL)

        def back() -> bool:
            supervisor._poll()
            return (
                child.process is not None
                and child.process.pid != first
                and probe_model_server(server.base_url).up
            )

        wait_for(back, timeout=30, interval=0.1, what="the model server to come back")
        assert child.restarts == 1
    finally:
        supervisor.stop_all()
    assert child.process is None
    wait_for(lambda: is_free(server.port), timeout=10, what="the port to be released")


def test_a_server_that_exits_while_loading_stops_up_with_its_last_words(
    gguf: Path, tmp_path: Path
) -> None:
    server = _server(gguf)
    child = server.child(Path(sys.executable), tmp_path, module=FAKE_SERVER)
    supervisor = _supervisor([child], FAKE_LLAMA_FAIL="ValueError: Failed to load model")
    supervisor._start(child)
    try:
        with pytest.raises(ConfigurationError) as raised:
            supervisor._await_answer(child)
    finally:
        supervisor.stop_all()
    message = str(raised.value)
    assert "exited with code 1 before answering" in message
    assert "ValueError: Failed to load model" in message
    assert str(tmp_path / "llm-server.log") in message
    assert "\n" not in message


def test_a_server_that_never_answers_times_out_with_a_clear_error(
    gguf: Path, tmp_path: Path
) -> None:
    server = _server(gguf, timeout_s=1.0)
    child = server.child(Path(sys.executable), tmp_path, module=FAKE_SERVER)
    supervisor = _supervisor([child], FAKE_LLAMA_SILENT="1")
    supervisor._start(child)
    try:
        with pytest.raises(ConfigurationError, match=r"at http://127\.0\.0\.1:\d+/v1 did not "
                           r"answer within 1 s"):  # fmt: skip
            supervisor._await_answer(child)
    finally:
        supervisor.stop_all()


def test_the_clients_are_pointed_at_the_server(gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # What the operator did not set: the session's test stack sets these in os.environ.
    monkeypatch.delenv("MEMWELL_EMBEDDING_PROVIDER", raising=False)
    monkeypatch.delenv("MEMWELL_LLM_TIMEOUT_S", raising=False)
    monkeypatch.delenv("MEMWELL_LLM_RESPONSE_FORMAT", raising=False)
    monkeypatch.delenv("MEMWELL_LLM_ANSWER", raising=False)
    server = _server(gguf)
    env = server.client_env(Settings())
    assert env == {
        "OPENAI_BASE_URL": server.base_url,
        "MEMWELL_CHAT_MODEL": "tiny",
        "MEMWELL_LOCAL_LLM_URL": server.base_url,
        "MEMWELL_EMBEDDING_PROVIDER": "local",
        "MEMWELL_LLM_TIMEOUT_S": "120.0",
        "MEMWELL_LLM_RESPONSE_FORMAT": "none",
        "MEMWELL_LLM_ANSWER": "brief",
    }
    # The children's settings: the chat doors on this server, memories embedded locally.
    child = Settings(**env)  # type: ignore[arg-type]
    assert child.llm_mode and child.resolved_embedding_provider == "local"
    assert child.llm_response_format == "none" and child.llm_answer == "brief"
    explicit = server.client_env(
        Settings(
            MEMWELL_EMBEDDING_PROVIDER="openai",
            MEMWELL_LLM_TIMEOUT_S=10,
            MEMWELL_LLM_RESPONSE_FORMAT="json_schema",
            MEMWELL_LLM_ANSWER="full",
        )  # type: ignore[call-arg]
    )
    assert set(explicit) == {"OPENAI_BASE_URL", "MEMWELL_CHAT_MODEL", "MEMWELL_LOCAL_LLM_URL"}


def test_the_alias_defaults_to_the_file_name_and_threads_to_the_cores(gguf: Path) -> None:
    planned = LocalLlmServer.from_settings(Settings(), gguf)
    assert planned.alias == "tiny-model" and planned.n_threads == (os.cpu_count() or 1)
    settings = Settings(
        MEMWELL_LOCAL_LLM_ALIAS="qwen", MEMWELL_LOCAL_LLM_THREADS=3, MEMWELL_LOCAL_LLM_CTX=8192
    )  # type: ignore[call-arg]
    chosen = LocalLlmServer.from_settings(settings, gguf)
    assert (chosen.alias, chosen.n_threads, chosen.n_ctx) == ("qwen", 3, 8192)


# --- reported ------------------------------------------------------------------------


def test_status_shows_the_server_up_with_its_model(fake_openai: FakeOpenAI) -> None:
    report = StackStatus()
    read_model_server(report, fake_openai.base_url)
    assert report.model_server is not None
    assert report.model_server["status"] == "up"
    assert report.model_server["models"] == [fake_openai.model_id]
    assert report.errors == {}
    assert f"Model server    up: {fake_openai.model_id} on port" in render(report)


def test_status_shows_a_server_that_is_down_as_an_error() -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    report = StackStatus()
    read_model_server(report, url)
    assert report.model_server is not None and report.model_server["status"] == "down"
    assert "model server" in report.errors
    assert "UNAVAILABLE model server: ConnectError" in render(report)
