"""The local model server of `memwell up --llm-gguf PATH`: llama.cpp's
OpenAI-compatible server (`python -m llama_cpp.server`, the llm-local extra) on a GGUF
file the user brings, as a supervised child on a loopback port.

Everything that can be known before a process starts is checked first, each failure
one line: the file exists and is GGUF (its magic bytes), the runtime is installed, no
other endpoint is configured. The supervisor then starts the server before the API
and the workers, which start only once it lists its model (GET /v1/models): the
chat doors and LLM mode reach it through OPENAI_BASE_URL, under the model's alias.
"""

from __future__ import annotations

import importlib.util
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memwell.core.errors import ConfigurationError
from memwell.core.settings import Settings
from memwell.llm.model_server import probe_model_server
from memwell.local.supervisor import Child

GGUF_MAGIC = b"GGUF"
SERVER_MODULE = "llama_cpp.server"
LOG_FILE = "llm-server.log"
#: what `python -m llama_cpp.server` imports beyond llama_cpp (its [server] extra)
_SERVER_LIBRARIES = ("llama_cpp", "uvicorn", "sse_starlette", "starlette_context")
_INSTALL_HINT = "pip install 'memwell[llm-local]'"
#: MEMWELL_LLM_TIMEOUT_S for a stack on the local server, unless set
LOCAL_LLM_TIMEOUT_S = 120.0


#: What a path that is not a regular file is, for the refusal.
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def gguf_path(raw: str) -> Path:
    """`raw` (as given on the command line or in the environment) as a checked GGUF
    model file: ConfigurationError, in one line, for anything else. Checked on the
    string: an empty one would otherwise name the working directory."""
    if not raw.strip():
        raise ConfigurationError("the GGUF model path is empty: give the path of a .gguf file")
    path = Path(raw).expanduser()
    check_gguf(path)
    return path


def check_gguf(path: Path) -> None:
    """ConfigurationError unless `path` is a readable regular file in GGUF.

    Looked at before it is opened, and opened without blocking: opening a named pipe
    waits for a writer (forever, silently) and a device may never end."""
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise ConfigurationError(f"the GGUF model file {path} does not exist") from None
    except OSError as exc:
        raise ConfigurationError(
            f"cannot read the GGUF model file {path}: {_reason(exc)}"
        ) from None
    if not stat.S_ISREG(mode):
        raise ConfigurationError(f"the GGUF model path {path} is {_kind(mode)}, not a regular file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot read the GGUF model file {path}: {_reason(exc)}"
        ) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced since the look
            raise ConfigurationError(f"the GGUF model path {path} is not a regular file")
        magic = os.read(fd, len(GGUF_MAGIC))
    except OSError as exc:
        raise ConfigurationError(
            f"cannot read the GGUF model file {path}: {_reason(exc)}"
        ) from None
    finally:
        os.close(fd)
    if magic != GGUF_MAGIC:
        raise ConfigurationError(
            f"{path} is not a GGUF model file (it does not start with the GGUF magic bytes)"
        )


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def check_runtime(libraries: Sequence[str] = _SERVER_LIBRARIES) -> None:
    """ConfigurationError unless llama.cpp's server can run here. Looked up, not
    imported: loading llama.cpp's library takes a while and the server imports it."""
    missing = [name for name in libraries if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigurationError(
            f"the local model server needs llama-cpp-python with its server ({', '.join(missing)} "
            f"not installed): {_INSTALL_HINT}"
        )


@dataclass(frozen=True)
class LocalLlmServer:
    gguf: Path
    port: int
    alias: str
    n_ctx: int
    n_threads: int
    start_timeout_s: float

    @classmethod
    def from_settings(cls, settings: Settings, gguf: Path) -> LocalLlmServer:
        """The server the settings describe, its port still to be chosen (0)."""
        return cls(
            gguf=gguf,
            port=0,
            alias=settings.local_llm_alias or gguf.name.removesuffix(".gguf"),
            n_ctx=settings.local_llm_ctx,
            n_threads=settings.local_llm_threads or os.cpu_count() or 1,
            start_timeout_s=settings.local_llm_start_timeout_s,
        )

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible root the stack's clients use."""
        return f"http://127.0.0.1:{self.port}/v1"

    def argv(self, python: Path, *, module: str = SERVER_MODULE) -> list[str]:
        return [
            str(python), "-m", module,
            "--model", str(self.gguf),
            "--model_alias", self.alias,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads),
            # By default a stream is cut short (after its first chunk) whenever another
            # request waits; here the chat doors and the workers share the one slot.
            "--interrupt_requests", "false",
        ]  # fmt: skip

    def child(self, python: Path, log_dir: Path, *, module: str = SERVER_MODULE) -> Child:
        """The supervised child: the others start once it lists its model."""
        return Child(
            "llm-server",
            self.argv(python, module=module),
            log_path=log_dir / LOG_FILE,
            start_probe=lambda: probe_model_server(self.base_url).up,
            start_timeout_s=self.start_timeout_s,
            label=f"the local model server at {self.base_url}",
        )

    def client_env(self, settings: Settings) -> dict[str, str]:
        """What points the API and the workers at this server."""
        env = {
            "OPENAI_BASE_URL": self.base_url,
            "MEMWELL_CHAT_MODEL": self.alias,
            "MEMWELL_LOCAL_LLM_URL": self.base_url,
        }
        # A chat model serves no embeddings: memories keep the local embedding model
        # (which `memwell up` prepared) unless the operator chose otherwise.
        if "embedding_provider" not in settings.model_fields_set:
            env["MEMWELL_EMBEDDING_PROVIDER"] = "local"
        # One slot on a CPU: a call may wait behind others and then take tens of seconds;
        # abandoning it at a hosted endpoint's 30 s would waste the work and fall back.
        if "llm_timeout_s" not in settings.model_fields_set:
            env["MEMWELL_LLM_TIMEOUT_S"] = str(LOCAL_LLM_TIMEOUT_S)
        # On a CPU, every token the model writes costs tens of milliseconds, and
        # llama-cpp-python's grammar-constrained sampling doubles that: the brief answer,
        # asked for by the prompt alone (answers are validated either way), measured in
        # docs/evaluation.md.
        if "llm_response_format" not in settings.model_fields_set:
            env["MEMWELL_LLM_RESPONSE_FORMAT"] = "none"
        if "llm_answer" not in settings.model_fields_set:
            env["MEMWELL_LLM_ANSWER"] = "brief"
        return env


def planned_server(settings: Settings) -> LocalLlmServer | None:
    """Check the local model settings (each failure one line) before anything starts;
    None when no GGUF is configured. The port comes later, with the stack's."""
    gguf = settings.local_llm_gguf
    if gguf is None:
        return None
    if settings.openai_base_url is not None:
        raise ConfigurationError(
            "MEMWELL_LOCAL_LLM_GGUF (--llm-gguf) and OPENAI_BASE_URL are both set: "
            "unset one, the stack talks to one model endpoint"
        )
    gguf = gguf_path(str(gguf)).resolve()
    check_runtime()
    return LocalLlmServer.from_settings(settings, gguf)
