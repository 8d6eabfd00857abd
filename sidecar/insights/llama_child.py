"""The offline engine's own process: llama.cpp (xllamacpp) serving one GGUF model on 127.0.0.1.

Started by ``offline.OfflineEngine`` as ``python -m sidecar.insights.llama_child``
with ``OMP_WAIT_POLICY=PASSIVE`` in its environment (its threads sleep when
idle instead of spinning: set here, before llama.cpp's OpenMP starts, and
nowhere else). It reads its settings as one JSON line on standard input (the
API key among them: never on a command line), prints ``{"address": …}`` once
the model is loaded (or ``{"error": …}``), and lives until its standard
input closes (the parent stopped or died).
"""

from __future__ import annotations

import json
import sys
from typing import Any


def _serve(cfg: dict[str, Any]) -> Any:
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(cfg["model"])
    params.n_ctx = int(cfg["n_ctx"])
    # One request at a time, llama.cpp's own batch sizes and flash attention (auto), no speculative decoding:
    # measured on 2 cores, two slots answered no faster (prompt and generation alike cost the same CPU per
    # token), other batch sizes and flash attention on or off read prompts within ±7% of the defaults, and
    # prompt-lookup drafts cost more than they saved.
    params.n_parallel = 1
    params.n_predict = int(cfg.get("n_predict", 1024))
    threads = int(cfg["threads"])
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    # ggml's own thread pool: no polling either (OpenMP's waiting is the environment's).
    params.cpuparams.poll = 0
    params.cpuparams_batch.poll = 0
    params.warmup = False
    # No copies of earlier prompts kept in memory (llama.cpp keeps up to 8 GB of them by default): the requests
    # of one step share only their instructions, which the one slot still holds. Measured: each part of an
    # hour's meeting left its state behind, 2,128 MB at ten minutes became 2,585 MB at an hour.
    params.cache_ram_mib = 0
    params.api_keys = [str(cfg["api_key"])]
    params.hostnames = ["127.0.0.1"]
    return xllamacpp.Server(params)


def main() -> int:
    cfg = json.loads(sys.stdin.readline())
    try:
        server = _serve(cfg)
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 3
    print(json.dumps({"address": server.listening_address}), flush=True)
    sys.stdin.read()  # until the parent closes it
    return 0


if __name__ == "__main__":
    sys.exit(main())
