"""`memwell up --llm-gguf PATH` takes only an existing, readable regular file in GGUF.
Anything else (missing, empty, a directory, a named pipe, a device, unreadable, not
GGUF) is refused in one line, with exit code 2 and no traceback, before anything
starts; a named pipe is refused at once instead of hanging the command."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from memwell.core.settings import Settings, get_settings
from memwell.local.cli import main

#: A regular file root cannot read either (its mode is write-only for everyone).
_WRITE_ONLY = Path("/proc/sys/vm/drop_caches")


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    """The stack's data dir: it must not exist after a refusal (nothing started)."""
    data = tmp_path / "data"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MEMWELL_DATA_DIR", str(data))
        env.delenv("OPENAI_BASE_URL", raising=False)
        get_settings.cache_clear()
        yield data
    get_settings.cache_clear()


def _unreadable(tmp_path: Path) -> str:
    if os.geteuid() != 0:
        path = tmp_path / "locked.gguf"
        path.write_bytes(b"GGUF" + bytes(60))
        path.chmod(0)
        return str(path)
    if _WRITE_ONLY.is_file() and not os.access(_WRITE_ONLY, os.R_OK):
        return str(_WRITE_ONLY)
    pytest.skip("running as root, with no regular file root cannot read")


def _fifo(tmp_path: Path) -> str:
    path = tmp_path / "model.gguf"
    os.mkfifo(path)
    return str(path)


def _not_gguf(tmp_path: Path) -> str:
    path = tmp_path / "model.gguf"
    path.write_text("hello")
    return str(path)


CASES: dict[str, tuple[Callable[[Path], str], str]] = {
    "missing": (lambda tmp: str(tmp / "missing.gguf"), "does not exist"),
    "empty": (lambda _: "", "is empty"),
    "blank": (lambda _: "   ", "is empty"),
    "directory": (lambda tmp: str(tmp), "is a directory, not a regular file"),
    "named pipe": (_fifo, "is a named pipe, not a regular file"),
    "device": (lambda _: os.devnull, "is a character device, not a regular file"),
    "under a file": (lambda tmp: _not_gguf(tmp) + "/x.gguf", "does not exist"),
    "unreadable": (_unreadable, "cannot read the GGUF model file"),
    "not gguf": (_not_gguf, "is not a GGUF model file"),
}


@pytest.mark.timeout(30)  # a named pipe used to block the open forever
@pytest.mark.parametrize("case", list(CASES))
def test_anything_but_a_gguf_file_is_refused_in_one_line(
    case: str, tmp_path: Path, data_dir: Path
) -> None:
    make, reason = CASES[case]
    path = make(tmp_path)
    done = CliRunner().invoke(main, ["up", "--llm-gguf", path])
    assert done.exit_code == 2, done.output
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("Error: --llm-gguf: ") and reason in line, line
    assert not data_dir.exists()  # nothing started: no data dir, no lock, no ports


def test_a_named_pipe_is_refused_by_the_command_at_once(tmp_path: Path, repo_root: Path) -> None:
    """The command as an operator runs it: no writer ever opens the pipe."""
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_BASE_URL"}
    env["MEMWELL_DATA_DIR"] = str(tmp_path / "data")
    done = subprocess.run(
        [sys.executable, "-m", "memwell", "up", "--llm-gguf", _fifo(tmp_path)],
        cwd=repo_root, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"Error: --llm-gguf: the GGUF model path {tmp_path / 'model.gguf'} is a named pipe, "
        "not a regular file"
    ]
    assert not (tmp_path / "data").exists()


def test_an_empty_setting_means_no_local_model(data_dir: Path) -> None:
    """MEMWELL_LOCAL_LLM_GGUF= (set, empty) is unset, not the working directory."""
    assert Settings(MEMWELL_LOCAL_LLM_GGUF="").local_llm_gguf is None  # type: ignore[call-arg]
    assert Settings(MEMWELL_LOCAL_LLM_GGUF=" ").local_llm_gguf is None  # type: ignore[call-arg]
