"""``bench/run [--quick] [--only PF1,PF3] [--results FILE]``: the performance figures PF1–PF15.

Each figure is printed as one line as soon as it is measured, then all of
them are written to bench/results.md as a Markdown table (a run of some
figures, ``--only``, to bench/out/results-PF….md: a part never replaces the
whole table). A figure whose
measurement fails is reported as a MISS with its error; the others still run.
Exit status: 0 when every figure is OK, 1 otherwise.
"""

from __future__ import annotations

import argparse
import importlib
import platform
import subprocess
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

from bench.common import ROOT, Failed, Figure, cpu, load
from sidecar.runtime.threads import usable_cpus

MODULES = [
    ("PF1", "bench.pf1_claim", "claim + fenced commit cycles/s"),
    ("PF2", "bench.pf2_claim_scale", "claim p50 with many rows ahead"),
    ("PF3", "bench.pf3_latency", "upload → done minus provider time"),
    ("PF4", "bench.pf4_worker_rss", "worker peak RSS, 3 h vs 1 min"),
    ("PF5", "bench.pf5_normalize", "normalize throughput vs bare PyAV"),
    ("PF6", "bench.pf6_offline", "offline RTF and WER"),
    ("PF7", "bench.pf7_upload_rss", "PocketBase RSS during a 1 GiB upload"),
    ("PF8", "bench.pf8_long", "six-hour recordings per provider vs one minute"),
    ("PF9", "bench.pf9_batched", "batched offline decoding vs bare faster-whisper"),
    ("PF10", "bench.pf10_speakers", "offline speaker labels: DER, time and memory"),
    ("PF11", "bench.pf11_insights", "offline brief and topics: time, tokens/s, memory, grounding, decisions"),
    ("PF12", "bench.pf12_storage", "bytes stored per hour of audio, fresh and for good"),
    ("PF13", "bench.pf13_voice_note", "a 30-second voice note, upload → transcript"),
    ("PF14", "bench.pf14_literary", "literary text, rule-based and by the owner's model: time, memory, WER, fidelity"),
    ("PF15", "bench.pf15_voices", "word errors on voices nobody tuned to: defaults, greedy, the server"),
]

HEADER = ["id", "measure", "value", "reference (same run)", "ratio", "goal", "result", "notes"]


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=10
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=10
        )
        return out.stdout.strip() + (" (work tree modified)" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def write_results(
    path: Path, rows: list[Figure | Failed], mode: str, started: float, load_before: str, load_after: str
) -> str:
    lines = [
        "# Performance figures",
        "",
        f"Written by `bench/run{' --quick' if mode == 'quick' else ''}` on "
        f"{datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}, commit {_commit()}, "
        f"{usable_cpus()} cores of {cpu()}, Python {platform.python_version()}; "
        f"took {(time.time() - started) / 60:.1f} min.",
        "",
        "Every ratio is against a reference measured in the same run, because the machine is shared and noisy: "
        f"load average (1/5 min) was {load_before} at the start and {load_after} at the end. Absolute times "
        "(PF3, PF6) move with that load; the ratios much less.",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
    ]
    for r in rows:
        lines.append("| " + " | ".join(_cell(c) for c in r.cells()) + " |")
    lines.append("")
    ok = sum(1 for r in rows if isinstance(r, Figure) and r.ok)
    lines.append(f"{ok} of {len(rows)} figures meet their goal.")
    lines.append("")
    text = "\n".join(lines)
    path.write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="scaled-down run, about 10 minutes on 2 cores")
    parser.add_argument("--only", default="", help="comma-separated figure ids, e.g. PF1,PF3")
    parser.add_argument(
        "--results",
        default=None,
        help="where to write the Markdown table (bench/results.md; with --only, bench/out/results-PF….md)",
    )
    args = parser.parse_args(argv)
    only = {x.strip().upper() for x in args.only.split(",") if x.strip()}
    mode = "quick" if args.quick else "full"

    started = time.time()
    load_before = load()
    print(f"bench: {mode} run, {usable_cpus()} cores of {cpu()}, load {load_before}", flush=True)
    rows: list[Figure | Failed] = []
    for fid, module, what in MODULES:
        if only and fid not in only:
            continue
        t0 = time.perf_counter()
        try:
            figures = importlib.import_module(module).run(args.quick)
        except Exception as exc:
            traceback.print_exc()
            figures = [Failed(fid, what, f"{type(exc).__name__}: {exc}"[:300])]
        for f in figures:
            rows.append(f)
            print(f.line(), flush=True)
        print(f"  ({fid} took {time.perf_counter() - t0:.0f} s, load {load()})", file=sys.stderr, flush=True)
    if args.results:
        out = Path(args.results)
    elif only:
        out = ROOT / "bench" / "out" / f"results-{'-'.join(sorted(only))}.md"
    else:
        out = ROOT / "bench" / "results.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_results(out, rows, mode, started, load_before, load())
    print(f"bench: wrote {out} ({(time.time() - started) / 60:.1f} min)", flush=True)
    return 0 if all(isinstance(r, Figure) and r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
