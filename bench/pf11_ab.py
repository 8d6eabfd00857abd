"""PF11 of another checkout against this one, under equal conditions: interleaved pairs on a shared machine.

``python -m bench.pf11_ab OLD_TREE LANGUAGE LENGTH PAIRS [MODEL]``. OLD_TREE is a checkout of the code to
compare with (``git archive BASE | tar -x -C /tmp/old``). Each pair runs PF11's step (``python -m
bench.pf11_insights step …``) with the old tree's code and with this tree's, one after the other, the order
swapped from pair to pair, each in a fresh process; the other work on the machine falls on both alike. It
prints one line per run and the medians of each side: wall time, the engine's CPU-seconds (what the step
cost, whatever else ran), prompt and generated tokens, the meeting's decisions found in the kept brief.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import ROOT, load


def _step(tree: Path, language: str, length: str, model: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        env = dict(os.environ, PYTHONPATH=str(tree))
        subprocess.run(
            [sys.executable, "-m", "bench.pf11_insights", "step", language, length, model, str(out)],
            cwd=tree,
            env=env,
            check=True,
            timeout=4 * 3600,
            stdout=subprocess.DEVNULL,
        )
        return dict(json.loads(out.read_text()))


def _row(side: str, language: str, length: str, r: dict[str, Any]) -> dict[str, Any]:
    from testkit.meetings import hour, ten_minutes

    meeting = ten_minutes(language) if length == "10m" else hour(language)
    timings = r["timings"]
    return {
        "side": side,
        "seconds": r["seconds"],
        "cpu_s": r["engine_cpu_s"],
        "prompt": sum(int(t.get("prompt_n", 0)) for t in timings),
        "generated": sum(int(t.get("predicted_n", 0)) for t in timings),
        "requests": r["requests"],
        "kept": len(r["brief"]),
        "decisions": len(meeting.found(q["sentence"] for q in r["brief"])),
        "load": r["load"],
    }


def main(old: Path, language: str, length: str, pairs: int, model: str) -> None:
    rows: list[dict[str, Any]] = []
    for n in range(pairs):
        order = [("old", old), ("new", ROOT)] if n % 2 == 0 else [("new", ROOT), ("old", old)]
        for side, tree in order:
            row = _row(side, language, length, _step(tree, language, length, model))
            rows.append(row)
            print(json.dumps({"pair": n + 1, **row, "load_now": load()}), flush=True)
    for side in ("old", "new"):
        mine = [r for r in rows if r["side"] == side]
        keys = ("seconds", "cpu_s", "prompt", "generated", "decisions")
        med = {k: statistics.median(r[k] for r in mine) for k in keys}
        print(json.dumps({"median": side, **med}), flush=True)


if __name__ == "__main__":
    tree, lang, length, count = sys.argv[1:5]
    main(Path(tree).resolve(), lang, length, int(count), sys.argv[5] if len(sys.argv) > 5 else "1.5b")
