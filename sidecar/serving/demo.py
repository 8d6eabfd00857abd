"""``transcriber demo``: the whole service on the embedded defaults, one sample end to end."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console

from sidecar.pocketbase import process
from sidecar.sender.client import SenderError, transcribe_file
from sidecar.settings import load_settings


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bundled_sample() -> Path:
    here = Path(__file__).resolve()
    for base in (here.parents[1] / "_pb" / "samples", here.parents[2] / "samples"):
        if (base / "sample.ogg").is_file():
            return base / "sample.ogg"
    raise FileNotFoundError("the bundled sample (samples/sample.ogg) is missing")


def run_demo(data_dir: Path, http: str | None, sample: Path | None) -> int:
    console = Console(stderr=True)
    sample = sample or bundled_sample()
    http = http or f"127.0.0.1:{_free_port()}"
    url = f"http://{http}"
    data_dir.mkdir(parents=True, exist_ok=True)
    log_path = data_dir / "serve.log"
    console.print(f"[bold]transcriber demo[/]: PocketBase + workers on {url} (data in {data_dir}, log in {log_path})")
    with log_path.open("ab") as log:
        serve = subprocess.Popen(
            [sys.executable, "-m", "sidecar", "serve", "--data-dir", str(data_dir), "--http", http],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ),
        )
    try:
        process.wait_healthy(url, serve, timeout=120)
        settings = load_settings(None)
        settings.pocketbase.data_dir = data_dir
        email = f"demo-{secrets.token_hex(4)}@example.com"
        password = secrets.token_urlsafe(12)
        process.add_user(settings, email, password)
        console.print(f"sender {email} created; uploading {sample.name} …")
        started = time.monotonic()
        text = transcribe_file(url, email, password, sample, title="demo sample", timeout=600, console=console)
        console.print(f"[green]done[/] in {time.monotonic() - started:.1f} s. Transcript:")
        print(text, flush=True)
        return 0
    except (SenderError, RuntimeError, TimeoutError) as exc:
        console.print(f"[red]demo failed:[/] {exc}")
        tail = log_path.read_text(errors="replace").splitlines()[-30:]
        console.print("\n".join(tail), markup=False)
        return 1
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(30)
        except subprocess.TimeoutExpired:
            serve.kill()
