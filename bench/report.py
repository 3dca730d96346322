"""Run every performance figure and rewrite the results table of docs/performance.md.

    python -m bench.report            # full scale (1M rows: hours on a small machine)
    python -m bench.report --quick    # small sizes, a few minutes
    python -m bench.report --only 1 4 --no-write    # figure 1 and 4, with their LoCoMo rows
    python -m bench.report --only 1-locomo          # one row

Each figure runs as its own subprocess (fresh throwaway services and environment),
its tables streamed to stderr as progress, and writes its headline dataclass as JSON;
this reads them back and replaces the text between the page's markers. A figure that
fails keeps a "failed" row, and the command exits non-zero; a real-data row whose data
is missing (LoCoMo, see bench/harness/evaldata.py) keeps a "skipped" row. At full scale
it also writes the run's headline figures into docs/figures/headline.json and every quote
of them in the README and docs/ (bench/doc_figures.py), so no page states another value.

The block starts with the host's CPU and vector extensions and the ONNX execution
settings (bench/harness/host.py): absolute numbers move 3-5x between hosts of the same
kind, so every row also shows the floors measured in the same run and the ratio to them.

Adding a row: append a `Figure` to FIGURES. Its module's `main` must accept the row's
arguments plus `--json PATH`, and write there (bench/harness/headline.py `write_json`)
a dataclass whose `report_row()` returns a ReportRow, or whose `report_rows()` returns
several; a module that finds no data exits 0 without writing the file.
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import doc_figures
from bench.harness.headline import ReportRow, read_json
from bench.harness.host import describe_host, describe_onnx
from bench.harness.stack import LOCOMO_DEFAULT, REPO_ROOT

START, END = "<!-- bench:results:start -->", "<!-- bench:results:end -->"
SMALL_STORE = ("--rows", "20000", "--users", "50")
LOCOMO = ("--locomo", str(LOCOMO_DEFAULT))


@dataclass(frozen=True)
class Figure:
    #: "1", or "1-locomo" for a variant of figure 1 (`--only 1` runs both)
    key: str
    #: module under bench/, run as `python -m bench.<module>`
    module: str
    #: "module:Class" of its headline dataclass, imported when its JSON is read
    headline: str
    full: tuple[str, ...]
    quick: tuple[str, ...]
    #: needs the LoCoMo file: without it the row says "skipped"
    real_data: bool = False


FIGURES = (
    Figure("1", "figures.chat", "bench.figures.chat:ChatHeadline", (),
           (*SMALL_STORE, "--requests", "200")),
    Figure("1-locomo", "figures.chat", "bench.figures.chat:ChatHeadline", LOCOMO,
           (*SMALL_STORE, "--requests", "200", *LOCOMO), real_data=True),
    # Figure 2 runs its LoCoMo level itself when the data is there (one headline, one row).
    Figure("2", "figures.concurrency", "bench.figures.concurrency:ConcurrencyHeadline", (),
           (*SMALL_STORE, "--requests", "400", "--time-cap", "30")),
    Figure("3", "figures.enqueue", "bench.figures.enqueue:EnqueueHeadline", (), ("--n", "500")),
    Figure("4", "figures.pipeline", "bench.figures.pipeline:PipelineHeadline",
           ("--turns", "10000"), ("--turns", "300")),
    Figure("4-locomo", "figures.pipeline", "bench.figures.pipeline:PipelineHeadline",
           ("--data", str(LOCOMO_DEFAULT)), ("--data", str(LOCOMO_DEFAULT), "--turns", "600"),
           real_data=True),
    # The global HNSW build alone takes hours at 1M rows; run it by hand when wanted.
    Figure("5", "figures.retrieval", "bench.figures.retrieval:RetrievalHeadline",
           ("--queries", "30", "--no-global-hnsw"),
           (*SMALL_STORE, "--big", "5000", "--queries", "10", "--inserts", "200",
            "--no-global-hnsw")),
    Figure("5-locomo", "figures.retrieval", "bench.figures.retrieval:LocomoRetrievalHeadline",
           LOCOMO, (*SMALL_STORE, *LOCOMO), real_data=True),
    Figure("5-sdk", "figures.search_sdk", "bench.figures.search_sdk:SearchSdkHeadline",
           (), ("--questions", "100"), real_data=True),
    Figure("6", "figures.footprint", "bench.figures.footprint:FootprintHeadline", (),
           (*SMALL_STORE, "--chat-requests", "100", "--turns", "300")),
)  # fmt: skip


def _headline_class(spec: str) -> Any:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def rows_of(headline: Any) -> list[ReportRow]:
    """A headline's rows: `report_rows()` when it has several, else `report_row()`."""
    many = getattr(headline, "report_rows", None)
    return list(many()) if many is not None else [headline.report_row()]


def run_figure(figure: Figure, args: tuple[str, ...], out: Path) -> tuple[list[ReportRow], Any]:
    """One figure in a subprocess; its stdout (the tables) goes to our stderr. Its rows,
    and its headline (None when it failed or was skipped)."""
    label = f"{figure.key}. bench.{figure.module} {' '.join(args)}".strip()
    if figure.real_data and not LOCOMO_DEFAULT.exists():
        return [ReportRow(label, f"skipped: no data at {LOCOMO_DEFAULT}", "", "")], None
    argv = [sys.executable, "-m", f"bench.{figure.module}", *args, "--json", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen(argv, stdout=sys.stderr, env=env, cwd=REPO_ROOT)
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        # The child got the same Ctrl-C: let it stop its services (subprocess.run would
        # SIGKILL it after a quarter second and leave them running).
        proc.wait(timeout=120)
        raise
    if code != 0:
        return [ReportRow(label, f"failed (exit {code})", "", "")], None
    if not out.exists():
        return [ReportRow(label, "skipped (the figure found no data)", "", "")], None
    headline = read_json(_headline_class(figure.headline), out)
    return rows_of(headline), headline


def render(rows: list[ReportRow], *, quick: bool, started: datetime, only: list[str]) -> str:
    scale = "`--quick` sizes" if quick else "full scale"
    flags = (" --quick" if quick else "") + (f" --only {' '.join(only)}" if only else "")
    load = os.getloadavg()[0]
    lines = [
        f"Generated by `python -m bench.report{flags}` on {started:%Y-%m-%d}, {scale}, load "
        f"average {load:.1f} at the end. Floors and baselines come from the same run; "
        "compare hosts by the ratios, not the milliseconds (bench/README.md).",
        "",
        f"- host: {describe_host()}",
        f"- local model: {describe_onnx()}",
        "",
        "| figure | measured on this machine | floors / baseline (same run) | goal |",
        "|---|---|---|---|",
        *(f"| {r.figure} | {r.measured} | {r.baseline} | {r.goal} |" for r in rows),
    ]
    return "\n".join(lines)


def rewrite(page: Path, table: str) -> None:
    """Replace what lies between the markers; the markers must exist once each."""
    text = page.read_text()
    if text.count(START) != 1 or text.count(END) != 1:
        raise SystemExit(f"{page} must hold {START} and {END} once each")
    head, rest = text.split(START)
    _, tail = rest.split(END)
    page.write_text(f"{head}{START}\n{table}\n{END}{tail}")


def quote_figures(headlines: dict[str, Any], *, started: datetime, only: list[str]) -> None:
    """Write this run's figures into docs/figures/headline.json and every quote of them
    in the README and docs/ (bench/doc_figures.py)."""
    flags = f" --only {' '.join(only)}" if only else ""
    run = f"python -m bench.report{flags}, {started:%Y-%m-%d}, full scale, {describe_host()}"
    figures = doc_figures.record(headlines, run=run)
    for page in doc_figures.rewrite(figures, doc_figures.pages()):
        print(f"rewrote the quoted figures in {page.relative_to(REPO_ROOT)}", file=sys.stderr)


def selected(only: list[str] | None) -> list[Figure]:
    """`--only 1` picks figure 1 and its variants; `--only 1-locomo` that row alone."""
    if not only:
        return list(FIGURES)
    keys = set(only)
    picked = [f for f in FIGURES if f.key in keys or f.key.split("-")[0] in keys]
    unknown = keys - {f.key for f in FIGURES} - {f.key.split("-")[0] for f in FIGURES}
    if unknown:
        raise SystemExit(f"unknown figures {sorted(unknown)}; choose from "
                         f"{[f.key for f in FIGURES]}")  # fmt: skip
    return picked


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes, a few minutes")
    p.add_argument("--only", nargs="+", help="figure keys, e.g. 1 4 5-locomo (default: all)")
    p.add_argument("--page", type=Path, default=REPO_ROOT / "docs" / "performance.md")
    p.add_argument("--no-write", action="store_true", help="print the table only")
    a = p.parse_args()
    figures = selected(a.only)
    started = datetime.now(UTC)
    rows: list[ReportRow] = []
    headlines: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="memwell-report-") as tmp:
        for n, figure in enumerate(figures, 1):
            args = figure.quick if a.quick else figure.full
            print(f"\n== [{n}/{len(figures)}] figure {figure.key}: bench.{figure.module} "
                  f"{' '.join(args)}", file=sys.stderr, flush=True)  # fmt: skip
            t0 = time.monotonic()
            figure_rows, headline = run_figure(
                figure, args, Path(tmp) / f"figure-{figure.key}.json"
            )
            rows += figure_rows
            if headline is not None:
                headlines[figure.key] = headline
            print(f"== figure {figure.key} done in {time.monotonic() - t0:.0f} s",
                  file=sys.stderr, flush=True)  # fmt: skip
    table = render(rows, quick=a.quick, started=started, only=a.only or [])
    print(table)
    if not a.no_write:
        rewrite(a.page, table)
        print(f"\nrewrote the results in {a.page}", file=sys.stderr)
        if not a.quick:  # small sizes show the method, not the figures pages quote
            quote_figures(headlines, started=started, only=a.only or [])
    return 1 if any(r.measured.startswith("failed") for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
