"""The ``transcriber`` command: serve · pocketbase · worker · user add · transcribe · demo."""

from __future__ import annotations

import logging
import os
import secrets
import sys
from pathlib import Path
from typing import Annotated, NoReturn

import anyio
import typer

from sidecar.pocketbase import process
from sidecar.settings import Settings, load_settings

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Self-hosted transcription: PocketBase + pipeline.")
user_app = typer.Typer(no_args_is_help=True, help="Sender accounts.")
app.add_typer(user_app, name="user")

ConfigOpt = Annotated[Path | None, typer.Option("--config", help="TOML settings file (default ./transcriber.toml).")]
DataDirOpt = Annotated[Path | None, typer.Option("--data-dir", help="PocketBase data directory.")]
HttpOpt = Annotated[str | None, typer.Option("--http", help="PocketBase listen address HOST:PORT.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")]

log = logging.getLogger("transcriber")


def _settings(config: Path | None, data_dir: Path | None = None, http: str | None = None) -> Settings:
    try:
        settings = load_settings(config)
    except (FileNotFoundError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if data_dir is not None:
        settings.pocketbase.data_dir = data_dir
    if http is not None:
        settings.pocketbase.http = http
        settings.pocketbase.url = f"http://{http}"
    return settings


def _logging(verbose: bool) -> None:
    from sidecar.logs import configure

    configure(logging.DEBUG if verbose else logging.INFO)


@app.command()
def serve(
    config: ConfigOpt = None, data_dir: DataDirOpt = None, http: HttpOpt = None, verbose: VerboseOpt = False
) -> None:
    """Run PocketBase and the pipeline workers together, in the foreground."""
    _logging(verbose)
    settings = _settings(config, data_dir, http)
    from sidecar.service import serve_all
    from sidecar.storage.errors import AuthFailed

    try:
        sys.exit(anyio.run(serve_all, settings))
    except (RuntimeError, TimeoutError, FileNotFoundError, AuthFailed) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


@app.command()
def pocketbase(config: ConfigOpt = None, data_dir: DataDirOpt = None, http: HttpOpt = None) -> None:
    """Run PocketBase alone (migrations applied, hooks loaded, service user ensured)."""
    settings = _settings(config, data_dir, http)
    try:
        process.prepare(settings)
    except (RuntimeError, FileNotFoundError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    args = process.serve_args(settings)
    os.execve(args[0], args, process.environment(settings))  # noqa: S606 - replaces this process on purpose


@app.command()
def worker(config: ConfigOpt = None, verbose: VerboseOpt = False) -> None:
    """Run the pipeline workers against a running PocketBase."""
    _logging(verbose)
    settings = _settings(config)
    from sidecar.service import run_workers
    from sidecar.storage.errors import AuthFailed

    try:
        sys.exit(anyio.run(run_workers, settings))
    except (FileNotFoundError, AuthFailed) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


@user_app.command("add")
def user_add(
    email: str,
    password: Annotated[str | None, typer.Option("--password", help="Generated and printed when omitted.")] = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
) -> None:
    """Create a sender account."""
    settings = _settings(config, data_dir)
    generated = password is None
    pw = password or secrets.token_urlsafe(12)
    try:
        process.prepare(settings)
        process.add_user(settings, email, pw)
    except RuntimeError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"sender {email} created" + (f"; password: {pw}" if generated else ""))


ServerOpt = Annotated[str, typer.Option("--server", envvar="TRANSCRIBER_SERVER")]
EmailOpt = Annotated[str | None, typer.Option("--email", envvar="TRANSCRIBER_EMAIL")]
PasswordOpt = Annotated[str | None, typer.Option("--password", envvar="TRANSCRIBER_PASSWORD")]
FormatOpt = Annotated[str, typer.Option("--format", help="txt, srt, vtt or json (txt: as the HTTP txt export).")]
TimeoutOpt = Annotated[
    float, typer.Option("--timeout", help="Seconds to wait for the transcript (a six-hour meeting may take hours).")
]


def _credentials(email: str | None, password: str | None) -> tuple[str, str]:
    if not email or not password:
        typer.echo("error: --email and --password (or TRANSCRIBER_EMAIL/TRANSCRIBER_PASSWORD) are required", err=True)
        raise typer.Exit(2)
    return email, password


@app.command()
def transcribe(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True)],
    server: ServerOpt = "http://127.0.0.1:8090",
    email: EmailOpt = None,
    password: PasswordOpt = None,
    fmt: FormatOpt = "txt",
    title: Annotated[str | None, typer.Option("--title")] = None,
    language: Annotated[
        str | None, typer.Option("--language", help="The language spoken (ISO 639-1, e.g. ru); found when left out.")
    ] = None,
    timeout: TimeoutOpt = 86400,
) -> None:
    """Upload FILE as a sender, wait for the transcript and print it (the record's id first, on stderr)."""
    from sidecar.sender import SenderError, check_options, transcribe_file, write_transcript

    record: list[str] = []
    try:
        check_options(fmt, language)  # before anything is uploaded
        user, secret = _credentials(email, password)
        text = transcribe_file(
            server,
            user,
            secret,
            file,
            fmt=fmt,
            title=title,
            language=language,
            timeout=timeout,
            on_record=record.append,
        )
    except SenderError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from exc
    except KeyboardInterrupt:
        _stopped_waiting(record)
    write_transcript(text)


@app.command()
def wait(
    record_id: Annotated[str, typer.Argument(metavar="ID", help="The record id `transcribe` printed.")],
    server: ServerOpt = "http://127.0.0.1:8090",
    email: EmailOpt = None,
    password: PasswordOpt = None,
    fmt: FormatOpt = "txt",
    timeout: TimeoutOpt = 86400,
) -> None:
    """Wait for a recording uploaded earlier (by its record id) and print its transcript."""
    from sidecar.sender import SenderError, check_options, wait_for, write_transcript

    try:
        check_options(fmt, None)
        user, secret = _credentials(email, password)
        text = wait_for(server, user, secret, record_id, fmt=fmt, timeout=timeout)
    except SenderError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from exc
    except KeyboardInterrupt:
        _stopped_waiting([record_id])
    write_transcript(text)


def _stopped_waiting(record: list[str]) -> NoReturn:
    """Ctrl-C: the recording goes on at the server; say how to pick it up again."""
    if record:
        typer.echo(f"stopped waiting; the recording goes on. Resume with: transcriber wait {record[0]}", err=True)
    else:
        typer.echo("stopped before the upload completed", err=True)
    raise typer.Exit(130)


@app.command()
def demo(
    data_dir: DataDirOpt = None,
    http: HttpOpt = None,
    sample: Annotated[Path | None, typer.Option("--sample", help="Audio file (default: the bundled sample).")] = None,
) -> None:
    """Start PocketBase and the workers, transcribe a sample end to end, print it, stop."""
    from sidecar.demo import run_demo

    sys.exit(run_demo(data_dir or Path(".transcriber-demo"), http, sample))


def main() -> None:
    app()
