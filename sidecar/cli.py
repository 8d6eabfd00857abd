"""The ``transcriber`` command: serve · pocketbase · worker · user add/password · transcribe · demo."""

from __future__ import annotations

import logging
import os
import secrets
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, NoReturn

import anyio
import typer

from sidecar.pocketbase import process
from sidecar.serving.locate import Server
from sidecar.settings import Settings, load_settings

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Self-hosted transcription: PocketBase + pipeline.")


def _version(value: bool) -> None:
    if value:
        from sidecar import __version__

        typer.echo(f"transcriber {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Self-hosted transcription: PocketBase + pipeline."""


user_app = typer.Typer(no_args_is_help=True, help="Sender accounts.")
app.add_typer(user_app, name="user")
owner_app = typer.Typer(no_args_is_help=True, help="The owner's account (the admin panel's login).")
app.add_typer(owner_app, name="owner")
backup_app = typer.Typer(no_args_is_help=True, help="Backups of the data directory (records, files, transcripts).")
app.add_typer(backup_app, name="backup")

ConfigOpt = Annotated[Path | None, typer.Option("--config", help="TOML settings file (default ./transcriber.toml).")]
DataDirOpt = Annotated[Path | None, typer.Option("--data-dir", help="PocketBase data directory.")]
HttpOpt = Annotated[str | None, typer.Option("--http", help="PocketBase listen address HOST:PORT.")]
# The owner's and the sender's commands: which server (see sidecar/serving/locate.py for the default).
ServerDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        help="The server's data directory, as `serve` was given it"
        " (default: the server running here, else [pocketbase] data_dir).",
    ),
]
ServerOpt = Annotated[
    str | None,
    typer.Option(
        "--server",
        "--http",
        envvar="TRANSCRIBER_SERVER",
        help="The server's address, HOST:PORT or a URL (default: the server running here, else [pocketbase] url).",
    ),
]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")]
NewPasswordOpt = Annotated[str | None, typer.Option("--password", help="Generated and printed when omitted.")]

log = logging.getLogger("transcriber")


def _settings(config: Path | None, data_dir: Path | None = None, http: str | None = None) -> Settings:
    try:
        settings = load_settings(config)
    except (FileNotFoundError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    pb = settings.pocketbase
    if "http" in pb.model_fields_set and "url" not in pb.model_fields_set:
        from sidecar.serving.locate import url_of

        pb.url = url_of(pb.http)  # the settings moved the server: its own workers (and commands) follow
    if data_dir is not None:
        pb.data_dir = data_dir
    if http is not None:
        pb.http = http
        pb.url = f"http://{http}"
    return settings


def _the_server(
    config: Path | None, data_dir: Path | None, server: str | None, *, new_dir: str | None = ""
) -> tuple[Settings, Server]:
    """The settings pointed at the server the command means (one way for every command), or exit 2 saying
    what to pass. ``new_dir``: what the command would do in a data directory no server has used yet
    (asked on a terminal; refused without one); empty: such a directory is refused; None: the command
    talks to the server only, never to its directory."""
    from sidecar.serving.locate import ServerNotFound, is_new, locate

    settings = _settings(config)
    try:
        where = locate(settings, data_dir=data_dir, server=server)
    except ServerNotFound as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    settings.pocketbase.data_dir = where.data_dir
    settings.pocketbase.url = where.url
    if new_dir is not None and server is not None and data_dir is None and where.running is None:
        # This command works on the server's data directory, which only a server running here shows.
        typer.echo(
            f"error: no server on this host listens at {where.url}, so its data directory is unknown: run this"
            " on the server's host, or pass --data-dir DIR",
            err=True,
        )
        raise typer.Exit(2)
    if new_dir is not None and is_new(where.data_dir) and where.running is None:
        _new_data_dir(where, new_dir, named=data_dir is not None)
    return settings, where


def _new_data_dir(where: Server, would: str, *, named: bool) -> None:
    """A data directory no server has used: created where it was named and the command makes one, asked
    for on a terminal otherwise; never made behind the owner's back."""
    what = f"no server has used {where.data_dir} ({where.how}) and none runs on it"
    if not would:
        typer.echo(f"error: {what}: pass --data-dir DIR, the directory `transcriber serve` uses", err=True)
        raise typer.Exit(2)
    if named:
        typer.echo(f"note: {what}: a new data directory is made there", err=True)
        return
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        typer.echo(
            f"error: {what}: pass --data-dir DIR, the directory `transcriber serve` uses"
            " (or the new one to make, named)",
            err=True,
        )
        raise typer.Exit(2)
    typer.echo(f"{what[0].upper()}{what[1:]}.")
    if not typer.confirm(f"Make a new data directory there and {would} in it?", default=False):
        typer.echo("nothing done: pass --data-dir DIR, the directory `transcriber serve` uses", err=True)
        raise typer.Exit(1)


def _reach(where: Server) -> None:
    from sidecar.serving.locate import ServerNotFound, check_reachable

    try:
        check_reachable(where)
    except ServerNotFound as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


def _logging(verbose: bool, settings: Settings) -> None:
    """Logging as ``[logs]`` says (``--verbose``: debug)."""
    from sidecar.runtime.logs import configure

    level = logging.DEBUG if verbose else logging.getLevelNamesMapping()[settings.logs.level.upper()]
    configure(level, settings.logs.format)


@app.command()
def serve(
    config: ConfigOpt = None, data_dir: DataDirOpt = None, http: HttpOpt = None, verbose: VerboseOpt = False
) -> None:
    """Run PocketBase and the pipeline workers together, in the foreground."""
    settings = _settings(config, data_dir, http)
    _logging(verbose, settings)
    from sidecar.serving.supervise import serve_all

    sys.exit(_started(lambda: anyio.run(serve_all, settings)))


@app.command()
def pocketbase(config: ConfigOpt = None, data_dir: DataDirOpt = None, http: HttpOpt = None) -> None:
    """Run PocketBase alone (migrations applied, hooks loaded, service user ensured)."""
    settings = _settings(config, data_dir, http)
    _logging(False, settings)
    from sidecar.pocketbase.lock import DataDirInUse, DataDirLock
    from sidecar.serving.startup import StartupError, ensure_port_free, resolved

    pb = settings.pocketbase
    pb.data_dir = resolved(pb.data_dir)
    log.info("data directory: %s", pb.data_dir)
    lock = DataDirLock(pb.data_dir)

    def start() -> int:
        try:
            lock.acquire("transcriber pocketbase", pb.http)
        except DataDirInUse as exc:
            raise StartupError(f"{exc}: stop it first, or give this one another --data-dir") from None
        ensure_port_free(pb.http, "[pocketbase] http")
        try:
            process.prepare(settings)
        except RuntimeError as exc:
            raise StartupError(str(exc)) from None
        return 0

    _started(start)
    if not process.has_owner(settings):
        from sidecar.pocketbase.output import OWNER_HINT

        log.info("no owner account yet: open the installer link PocketBase prints below, or run `%s`", OWNER_HINT)
    if settings.logs.format == "json":
        sys.exit(_pocketbase_relayed(settings, lock.fd))
    # PocketBase takes this process's place and keeps the data directory's lock.
    os.set_inheritable(lock.fd, True)
    args = process.serve_args(settings)
    os.umask(process.UMASK)
    os.execve(args[0], args, process.environment(settings))  # noqa: S606 - replaces this process on purpose


def _pocketbase_relayed(settings: Settings, lock_fd: int) -> int:
    """PocketBase as a child whose lines come out as JSON like the rest (``[logs] format = "json"``); the
    stop signals are passed on to it, and its exit status is this command's."""
    import subprocess

    from sidecar.pocketbase.output import relay

    proc = process.start(settings, pass_fds=(lock_fd,), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: proc.send_signal(signum))
    assert proc.stdout is not None
    relay(proc.stdout)
    return proc.wait()


@app.command()
def worker(config: ConfigOpt = None, verbose: VerboseOpt = False) -> None:
    """Run the pipeline workers against a running PocketBase."""
    settings = _settings(config)
    _logging(verbose, settings)
    from sidecar.serving.supervise import run_workers

    sys.exit(_started(lambda: anyio.run(run_workers, settings)))


def _started(run: Callable[[], int]) -> int:
    """Runs a command; a mistake found while starting is one line on stderr and exit 2, never a traceback."""
    from sidecar.serving.startup import EXIT_STARTUP, StartupError
    from sidecar.storage.errors import AuthFailed, ReleaseMismatch

    try:
        code = run()
    except (StartupError, AuthFailed, ReleaseMismatch, FileNotFoundError) as exc:
        typer.echo("error: " + " ".join(str(exc).split()), err=True)  # one line, whatever a library said
        raise typer.Exit(EXIT_STARTUP) from None
    _exit_past_dropped_work(code)
    return code


def _exit_past_dropped_work(code: int) -> None:
    """Exits at once when a stop went on without work still running (a decoder call in the middle
    of a batch, its record already handed back): letting the interpreter wind down under a running
    CTranslate2 call aborts the process (``terminate called without an active exception``)."""
    from sidecar.runtime.threads import left_running

    if left_running():
        logging.getLogger("transcriber").info("stopped; a decoder call still running is dropped with the process")
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _give_password(
    apply: Callable[[Settings, str, str], None],
    email: str,
    password: str | None,
    settings: Settings,
) -> str | None:
    """Gives ``email`` the password (a generated one when None) by ``apply``; the generated one, to print."""
    pw = password or secrets.token_urlsafe(12)
    try:
        process.prepare(settings)
        apply(settings, email, pw)
    except RuntimeError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    return pw if password is None else None


@user_app.command("add")
def user_add(
    email: str,
    password: NewPasswordOpt = None,
    config: ConfigOpt = None,
    data_dir: ServerDirOpt = None,
    server: ServerOpt = None,
) -> None:
    """Create a sender account."""
    settings, _ = _the_server(config, data_dir, server, new_dir=f"add {email}")
    generated = _give_password(process.add_user, email, password, settings)
    typer.echo(f"sender {email} created" + (f"; password: {generated}" if generated else ""))


@user_app.command("password")
def user_password(
    email: str,
    password: NewPasswordOpt = None,
    config: ConfigOpt = None,
    data_dir: ServerDirOpt = None,
    server: ServerOpt = None,
) -> None:
    """Set a sender's password (one who forgot theirs where no mail is set up); their sessions end."""
    settings, _ = _the_server(config, data_dir, server)
    generated = _give_password(process.set_password, email, password, settings)
    typer.echo(
        f"password of {email} set" + (f": {generated}" if generated else "") + "; their other sessions are signed out"
    )


@owner_app.command("add")
def owner_add(
    email: str,
    password: NewPasswordOpt = None,
    config: ConfigOpt = None,
    data_dir: ServerDirOpt = None,
    server: ServerOpt = None,
) -> None:
    """Make the owner's account (a PocketBase superuser: the panel's login), or set its password."""
    settings, where = _the_server(config, data_dir, server, new_dir=f"make the owner {email}")
    generated = _give_password(process.add_owner, email, password, settings)
    typer.echo(
        f"owner {email} ready" + (f"; password: {generated}" if generated else "") + f"; the panel: {where.url}/_/"
    )


@user_app.command("unlock")
def user_unlock(
    email: str,
    owner: Annotated[
        bool, typer.Option("--owner", help="The owner's own login (a superuser), not a sender's.")
    ] = False,
    config: ConfigOpt = None,
    data_dir: ServerDirOpt = None,
    server: ServerOpt = None,
) -> None:
    """Let an account in again while strangers' wrong passwords keep its new devices waiting."""
    settings, _ = _the_server(config, data_dir, server)
    try:
        said = process.unlock(settings, email, owner=owner)
    except RuntimeError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(said.splitlines()[-1] if said else f"unlock of {email} written")


@user_app.command("export")
def user_export(
    email: str,
    out: Annotated[Path, typer.Option("--out", help="The archive to write (a zip).")],
    config: ConfigOpt = None,
    data_dir: ServerDirOpt = None,
    server: ServerOpt = None,
) -> None:
    """Everything of one sender as one archive: recordings, files, transcripts, journal."""
    from sidecar.owner.sender_data import SenderDataError, export

    settings, _ = _the_server(config, data_dir, server)
    try:
        held, written = export(settings.pocketbase.data_dir, email, out)
    except SenderDataError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"exported {len(held.records)} recording(s) and {written} file(s) of {held.email} to {out}")


@user_app.command("erase")
def user_erase(
    email: str,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
    keep_account: Annotated[bool, typer.Option("--keep-account", help="Erase the data but keep the account.")] = False,
    prune_backups: Annotated[
        bool,
        typer.Option(
            "--prune-backups",
            help="Also rewrite each local backup that holds this sender's data without it (same name, one rename).",
        ),
    ] = False,
    config: ConfigOpt = None,
    data_dir: ServerDirOpt = None,
    server: ServerOpt = None,
) -> None:
    """Erase one sender's data for good (recordings, files, provider-side copies, transcripts, journal,
    and the account unless --keep-account); an audit row records that it happened. Then says which
    older backups still hold their data (--prune-backups rewrites those). A sender erased earlier is
    found by the audit, for their backups."""
    from sidecar.owner.sender_backups import erased_sender
    from sidecar.owner.sender_data import SenderDataError, erase_rows, read, remove_provider_copies
    from sidecar.serving.assembly import make_provider

    settings, _ = _the_server(config, data_dir, server)
    try:
        held = read(settings.pocketbase.data_dir, email)
    except SenderDataError as exc:
        earlier = erased_sender(settings.pocketbase.data_dir, email)
        if earlier is None:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None
        typer.echo(f"{email} was erased earlier (account id {earlier}); looking at the backups")
        _confirm(yes, f"This rewrites the backups that hold data of {email}", email, asked=prune_backups)
        _older_backups(settings, earlier, email, keep_account=keep_account, prune=prune_backups)
        return
    what = f"{len(held.records)} recording(s), {len(held.files)} file row(s) and the journal of {held.email}"
    also = ", and the local backups that hold it" if prune_backups else ""
    _confirm(yes, f"This erases {what}{'' if keep_account else ', and the account'}{also}, for good", held.email)

    async def cleanup(provider: str, operation_id: str, audio_uri: str) -> None:
        p = make_provider(settings, provider)
        try:
            await p.cleanup(operation_id, audio_uri)
        finally:
            await p.aclose()

    removed, failed = anyio.run(remove_provider_copies, held, cleanup)
    if failed:
        typer.echo("error: some provider-side copies could not be removed; nothing erased:", err=True)
        for line in failed:
            typer.echo(f"  {line}", err=True)
        raise typer.Exit(1)
    try:
        summary = erase_rows(settings, email, keep_account=keep_account, provider_copies=removed)
    except (SenderDataError, RuntimeError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(
        f"erased {summary['recordings']} recording(s), {summary['files']} stored file(s) ({summary['bytes']:,} bytes)"
        f" and {removed} provider-side cop{'y' if removed == 1 else 'ies'} of {held.email}"
        + ("" if keep_account else "; the account is gone")
    )
    _older_backups(settings, held.sender_id, held.email, keep_account=keep_account, prune=prune_backups)


def _confirm(yes: bool, what: str, email: str, *, asked: bool = True) -> None:
    if yes or not asked:
        return
    typer.echo(f"{what}.")
    if typer.prompt("Type the address to confirm").strip().lower() != email.lower():
        typer.echo("not confirmed: nothing erased", err=True)
        raise typer.Exit(1)


def _older_backups(settings: Settings, sender_id: str, email: str, *, keep_account: bool, prune: bool) -> None:
    """What the local backups still hold of the sender, each named; rewritten without it when ``prune``."""
    import getpass
    from datetime import UTC, datetime

    from sidecar.owner.sender_backups import (
        Held,
        PruneError,
        holding,
        holds,
        prune_backup,
        s3_backups,
        s3_holding,
        upload,
    )

    def examine(found: list[Held], where: str, put_back: Callable[[Held], None] | None) -> bool:
        """Each backup named with what it holds, or rewritten without it; False if any failed."""
        ok = True
        for held in found:
            when = datetime.fromtimestamp(held.path.stat().st_mtime, UTC).strftime("%Y-%m-%d %H:%M UTC")
            name = f"{where}{held.path.name}"
            if held.unreadable:
                typer.echo(f"error: backup {name} ({when}) could not be read: {held.unreadable}", err=True)
                ok = False
                continue
            if not prune:
                typer.echo(f"backup {name} ({when}) still holds {holds(held)} of {email}")
                continue
            try:
                done = prune_backup(
                    settings, held, sender_id, keep_account=keep_account, by=f"{getpass.getuser()} ({name})"
                )
                if put_back is not None:
                    put_back(held)
            except PruneError as exc:
                typer.echo(f"error: backup {where}{exc}; it is left as it was", err=True)
                ok = False
                continue
            except Exception as exc:  # the bucket refused the upload: boto3's errors have no common root
                typer.echo(f"error: backup {name} could not be put back: {exc}; it is left as it was", err=True)
                ok = False
                continue
            typer.echo(
                f"backup {name} ({when}) rewritten without {holds(held)} of {email}"
                f" ({done.files} stored file(s)): {done.before:,} → {done.after:,} bytes"
            )
        return ok

    data = settings.pocketbase.data_dir
    found = holding(data, sender_id, account=not keep_account)
    failed = not examine(found, "", None)
    if not found:
        typer.echo(f"no local backup (in {data / 'backups'}) holds anything of {email}")
    store = s3_backups(settings)
    if store is not None:
        try:
            with s3_holding(store, sender_id, account=not keep_account) as in_bucket:
                failed |= not examine(in_bucket, f"s3://{store.bucket}/", lambda held: upload(store, held))
                if not in_bucket:
                    typer.echo(f"no backup in the S3 bucket {store.bucket} holds anything of {email}")
                found = found + in_bucket
        except Exception as exc:  # the bucket could not be listed or read
            typer.echo(f"error: the backups in the S3 bucket {store.bucket} could not be read: {exc}", err=True)
            failed = True
    if found and not prune:
        typer.echo("to rewrite them without this sender (each keeps its name): the same command with --prune-backups")
    if failed:
        raise typer.Exit(1)


OwnerEmailOpt = Annotated[
    str | None, typer.Option("--email", help="The owner's (superuser's) email; default [pocketbase] superuser_email.")
]
OwnerPasswordOpt = Annotated[
    str | None, typer.Option("--password", help="Asked for when not given and not in the settings.")
]


def _owner(settings: Settings, email: str | None, password: str | None) -> tuple[str, str]:
    pb = settings.pocketbase
    email = email or pb.superuser_email
    if not email:
        typer.echo("error: give --email (the owner's superuser account) or set [pocketbase] superuser_email", err=True)
        raise typer.Exit(2)
    if password is None and email == pb.superuser_email and pb.superuser_password:
        password = pb.superuser_password.get_secret_value()
    if password is None:
        password = typer.prompt(f"password for {email}", hide_input=True)
    return email, password


@backup_app.command("create")
def backup_create(
    name: Annotated[str | None, typer.Option("--name", help="e.g. before-upgrade.zip (default: a timestamp)")] = None,
    config: ConfigOpt = None,
    email: OwnerEmailOpt = None,
    password: OwnerPasswordOpt = None,
    data_dir: ServerDirOpt = None,
    server: ServerOpt = None,
) -> None:
    """Back up the running server's data directory now (consistent while it works)."""
    from sidecar.owner.backups import BackupError, OwnerClient

    settings, where = _the_server(config, data_dir, server, new_dir=None)
    _reach(where)
    try:
        with OwnerClient(settings.pocketbase.url, *_owner(settings, email, password)) as owner:
            made = owner.create(name)
    except BackupError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"backup {made.key} ({made.size:,} bytes)")


@backup_app.command("list")
def backup_list(
    config: ConfigOpt = None,
    email: OwnerEmailOpt = None,
    password: OwnerPasswordOpt = None,
    data_dir: ServerDirOpt = None,
    server: ServerOpt = None,
) -> None:
    """The running server's backups, oldest first."""
    from sidecar.owner.backups import BackupError, OwnerClient

    settings, where = _the_server(config, data_dir, server, new_dir=None)
    _reach(where)
    try:
        with OwnerClient(settings.pocketbase.url, *_owner(settings, email, password)) as owner:
            rows = owner.list()
    except BackupError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    for b in rows:
        typer.echo(f"{b.modified}  {b.size:>14,}  {b.key}")


@backup_app.command("restore")
def backup_restore(
    backup: Annotated[str, typer.Argument(help="A backup file, or the name of one in the data directory's backups/")],
    into: Annotated[Path, typer.Option("--into", help="A new, empty data directory to restore into.")],
    config: ConfigOpt = None,
    data_dir: ServerDirOpt = None,
    server: ServerOpt = None,
) -> None:
    """Restore a backup into a new data directory; then start a server on it."""
    from sidecar.owner.backups import BackupError, find_archive, restore

    settings, _ = _the_server(config, data_dir, server, new_dir=None)
    try:
        archive = find_archive(backup, settings.pocketbase.data_dir)
        written = restore(archive, into)
    except BackupError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"restored {archive.name} into {into.resolve()} ({written} files)")
    try:
        _restored_key(settings, into)
    except RuntimeError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"start it with: transcriber serve --data-dir {into.resolve()}")


def _restored_key(settings: Settings, into: Path) -> None:
    """The restored directory's settings key: this install's, copied beside it where it has none; a
    backup's settings encrypted with another key are named (the key kept with that backup is needed)."""
    import shutil

    from sidecar.pocketbase.settings_key import ENV, key_file, settings_encrypted, stored_settings

    target = settings.model_copy(deep=True)
    target.pocketbase.data_dir = into
    dest = key_file(target)
    if not os.environ.get(ENV) and not dest.exists() and key_file(settings).is_file():
        shutil.copyfile(key_file(settings), dest)
        dest.chmod(0o600)
        typer.echo(f"this install's settings key copied to {dest}: the restored settings are read with it")
    key = os.environ.get(ENV) or (dest.read_text().strip() if dest.is_file() else "")
    if settings_encrypted(into) and stored_settings(into / "data.db", key) is None:
        raise RuntimeError(
            f"the backup's settings are encrypted with another key than {dest if not os.environ.get(ENV) else ENV}:"
            f" put the key kept with that backup in {dest} (or {ENV}) before starting it"
        )


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
    server: ServerOpt = None,
    data_dir: ServerDirOpt = None,
    config: ConfigOpt = None,
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
    from sidecar.sender.client import SenderError, check_options, transcribe_file, write_transcript

    record: list[str] = []
    _ctrl_c_stops_waiting()
    try:
        check_options(fmt, language)  # before anything is uploaded
        user, secret = _credentials(email, password)
        url = _sender_server(config, data_dir, server)
        text = transcribe_file(
            url,
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
    server: ServerOpt = None,
    data_dir: ServerDirOpt = None,
    config: ConfigOpt = None,
    email: EmailOpt = None,
    password: PasswordOpt = None,
    fmt: FormatOpt = "txt",
    timeout: TimeoutOpt = 86400,
) -> None:
    """Wait for a recording uploaded earlier (by its record id) and print its transcript."""
    from sidecar.sender.client import SenderError, check_options, wait_for, write_transcript

    _ctrl_c_stops_waiting()
    try:
        check_options(fmt, None)
        user, secret = _credentials(email, password)
        text = wait_for(_sender_server(config, data_dir, server), user, secret, record_id, fmt=fmt, timeout=timeout)
    except SenderError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from exc
    except KeyboardInterrupt:
        _stopped_waiting([record_id])
    write_transcript(text)


def _sender_server(config: Path | None, data_dir: Path | None, server: str | None) -> str:
    """The URL a sender's command uses: found as the owner's commands find it; checked to answer."""
    from sidecar.serving.locate import Server, url_of

    if server is not None and data_dir is None and config is None:
        where = Server(Path(), url_of(server), "named by --server", None)  # a server elsewhere: no settings needed here
    else:
        where = _the_server(config, data_dir, server, new_dir=None)[1]
    _reach(where)
    return where.url


def _ctrl_c_stops_waiting() -> None:
    """Ctrl-C ends the wait (and says how to resume) however the command was started: a program that
    starts it with SIGINT ignored or blocked (as some launchers and non-interactive shells do) would
    otherwise leave a sender no way to stop it but a harder signal."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.default_int_handler)


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
    from sidecar.serving.demo import run_demo

    sys.exit(run_demo(data_dir or Path(".transcriber-demo"), http, sample))


def main() -> None:
    app()
