"""Each figure's headline numbers, as a small dataclass, and how they travel to the report.

A figure's `main` takes `--json PATH`; with it, the headline is also written there as
JSON. `python -m bench.report` runs each figure as a subprocess (fresh services, its own
environment) and reads that file back into the same dataclass.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar


@dataclass(frozen=True)
class ReportRow:
    """One line of the results table (docs/performance.md)."""

    figure: str
    measured: str
    baseline: str
    goal: str


class Headline(Protocol):
    """What every figure's headline dataclass offers the report."""

    def report_row(self) -> ReportRow: ...


H = TypeVar("H")


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", type=Path, default=None, metavar="PATH", help="also write the headline here"
    )


def write_json(headline: Any, path: Path | None) -> None:
    """Write a headline dataclass as JSON, when a path was asked for."""
    if path is not None:
        path.write_text(json.dumps(dataclasses.asdict(headline), indent=2))


def figure_main(headline: Callable[[], object | None], parser: argparse.ArgumentParser) -> int:
    """A figure's `main`: run it (it prints its tables), then write its headline where
    `--json` asks; a figure that found no data writes nothing."""
    found = headline()
    if found is not None:
        write_json(found, parser.parse_args().json)
    return 0


def read_json(cls: type[H], path: Path) -> H:
    """The headline a figure wrote, as its dataclass."""
    return cls(**json.loads(path.read_text()))
