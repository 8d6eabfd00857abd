"""H2, third pass: no stranger can lock an account's holder out.

A stranger's wrong passwords, from one address or a thousand, leave the holder able to sign in from
their own address at once and their session untouched (the owner's too); one (account, address) pair
waits longer after each failure; a guess spread over many addresses is still bounded, and an identity
no account has is answered alike; the owner is told (a log line, a login_alerts row, the metrics).
Passwords are changed by a route of ours and reset by mail, PocketBase's own flow.

On Linux every 127.x.y.z address reaches the loopback server: each test's strangers sign in from
addresses of their own (``Network``), which PocketBase sees as the request's address (``realIP``).
"""

from __future__ import annotations

import io
import re
import shutil
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from prometheus_client import generate_latest

from sidecar.pipeline.metrics import Metrics
from sidecar.pocketbase import process
from sidecar.pocketbase.client import PocketBaseClient
from sidecar.sender.client import Lines, Session
from sidecar.sender.devices import DeviceTokens
from testkit.pocketbase import PASSWORD, Caller, PocketBaseServer, running_pocketbase
from tests.support.mail import configure_mail, link_in, mail_sink
from tests.support.waiting import eventually_sync

pytestmark = pytest.mark.slow

# lib/logins.js: free tries of a pair, then 1 s doubling; 20 failures from addresses an account does not know
# make an attack, which keeps every such address out until the 15-minute window ends, but for the lane of
# clients never seen on the account: 3 tries a minute.
FREE = 5
ATTACK_AT = 20
WINDOW_S = 15 * 60
FRESH = 3
FRESH_WINDOW_S = 60
# Past 200,000 entries in the guard's store, an address that opened this many counts lately is refused.
CROWD = 10
DEVICE = "X-Device-Token"
HOME = "127.0.0.1"  # where every Caller of testkit signs in from: the holders' own address
NEW_PASSWORD = "a-brand-new-secret-7"


class Network:
    """A client per loopback address, each connecting from that address."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._clients: dict[str, httpx.Client] = {}

    def client(self, address: str) -> httpx.Client:
        if address not in self._clients:
            transport = httpx.HTTPTransport(local_address=address)
            self._clients[address] = httpx.Client(base_url=self.url, transport=transport, timeout=60)
        return self._clients[address]

    def login(
        self, address: str, collection: str, identity: str, password: str, device: str | None = None
    ) -> httpx.Response:
        """A password sign-in; ``device``: the device token it presents (as the CLI does, in the header)."""
        body = {"identity": identity, "password": password}
        headers = {DEVICE: device} if device else None
        return self.client(address).post(
            f"/api/collections/{collection}/auth-with-password", json=body, headers=headers
        )

    def post(self, address: str, path: str, body: dict[str, Any]) -> httpx.Response:
        return self.client(address).post(path, json=body)

    def close(self) -> None:
        for c in self._clients.values():
            c.close()


@contextmanager
def network(pb: PocketBaseServer) -> Iterator[Network]:
    net = Network(pb.url)
    try:
        yield net
    finally:
        net.close()


def stranger(i: int, group: int = 1) -> str:
    """The i-th of a stranger's addresses (100 a group: PocketBase's own limiter allows each 20 logins in 10 s)."""
    return f"127.{group}.{i % 100 // 10}.{i % 10 + 1}"


def attack(net: Network, collection: str, identity: str, *, group: int, tries: int = ATTACK_AT) -> list[httpx.Response]:
    """Wrong passwords for ``identity``, each from an address of its own."""
    return [net.login(stranger(i, group), collection, identity, f"guess-{i}") for i in range(tries)]


def retry_after(resp: httpx.Response) -> int:
    return int(resp.headers["Retry-After"])


def alerts(owner: Caller) -> list[dict[str, Any]]:
    resp = owner.http.get("/api/collections/login_alerts/records", params={"sort": "created"})
    assert resp.status_code == 200, resp.text
    return list(resp.json()["items"])


def attack_logged(owner: Caller, account: str) -> dict[str, Any]:
    """PocketBase's log line of an attack on ``account`` (its log is written in batches: waited for)."""

    def line() -> dict[str, Any] | None:
        items = owner.http.get("/api/logs", params={"filter": "message ~ 'Login attack'"}).json()["items"]
        return next((i for i in items if i["data"].get("account") == account), None)

    found = eventually_sync(line, within=20, what="the attack's log line")
    assert found is not None
    return found


def exported_metrics(pb: PocketBaseServer) -> dict[str, float]:
    """The worker's metrics as it reads them from PocketBase (the service account's route)."""

    async def read() -> str:
        account = pb.service_account
        async with PocketBaseClient(pb.url, account.email, account.password) as client:
            metrics = Metrics()
            await metrics.refresh_logins(client)
            return generate_latest(metrics.registry).decode()

    text = anyio.run(read)
    pattern = r"^(transcriber_(?:failed_logins_total|accounts_under_attack)) (\S+)$"
    return {name: float(value) for name, value in re.findall(pattern, text, re.M)}


@pytest.mark.parametrize("collection", ["users", "_superusers"])
def test_a_strangers_thousand_wrong_passwords_leave_the_holder_signed_in_and_able_to_sign_in(
    collection: str, tmp_path: Path, figures: dict[str, str]
) -> None:
    """Ten wrong passwords from anywhere used to lock the account for 15 minutes, the holder included."""
    with running_pocketbase(tmp_path) as pb, network(pb) as net:
        owner = pb.superuser()  # signed in from HOME: the owner's own address
        holder = owner if collection == "_superusers" else pb.new_sender()
        started = time.monotonic()
        with ThreadPoolExecutor(4) as pool:
            answers = list(
                pool.map(lambda i: net.login(stranger(i), collection, holder.email, f"guess-{i}"), range(1000))
            )
        took = time.monotonic() - started
        codes = Counter(a.status_code for a in answers)
        # A guess spread over 100 addresses: 20 passwords looked at, 3 more from addresses new to the account
        # (their lane), then every address it never signed in from waits.
        looked = ATTACK_AT + FRESH
        assert codes == {400: looked, 429: 1000 - looked}, codes
        for a in answers:
            if a.status_code == 429:
                assert a.json()["code"] == "too_many_failed_logins" and 0 < retry_after(a) <= WINDOW_S, a.text
                assert set(a.json()) == {"status", "code", "message", "data"}

        # The holder, at once, from their own address; their session goes on, token refresh included.
        assert net.login(HOME, collection, holder.email, PASSWORD).status_code == 200
        own = "/api/transcriber/records" if collection == "users" else "/api/collections/login_alerts/records"
        assert holder.http.get(own).status_code == 200
        assert holder.http.post(f"/api/collections/{collection}/auth-refresh").status_code == 200
        # The right password from an address it never signed in from waits too: it tells the guesser nothing.
        late = net.login(stranger(0, group=2), collection, holder.email, PASSWORD)
        assert (late.status_code, late.json()["code"]) == (429, "too_many_failed_logins")

        # The owner is told: a row, a log line, the metrics.
        (row,) = alerts(owner)
        assert {k: row[k] for k in ("collection", "account", "identity", "failures", "addresses", "refused")} == {
            "collection": collection,
            "account": holder.id,
            "identity": holder.email,
            "failures": looked,
            "addresses": looked,
            "refused": 1000 - looked + 1,
        }
        assert row["ongoing"] is True and row["first_seen"] <= row["last_seen"]
        line = attack_logged(owner, holder.id)
        assert line["level"] == 4 and line["data"]["collection"] == collection and line["data"]["alert"] == row["id"]
        assert "login attack on " + collection in pb.log()  # and on PocketBase's standard error (the journal)
        assert exported_metrics(pb) == {
            "transcriber_failed_logins_total": looked,
            "transcriber_accounts_under_attack": 1,
        }
        # The owner reads; nobody writes.
        url = f"/api/collections/login_alerts/records/{row['id']}"
        assert owner.http.patch(url, json={"failures": 0}).status_code == 400
        assert owner.http.delete(url).status_code == 400  # still going
    figures[f"stranger's 1,000 wrong passwords ({collection})"] = (
        f"{looked} looked at, {1000 - looked} refused, in {took:.1f} s; the holder signed in at once"
    )


def test_one_address_waits_longer_after_each_wrong_password(tmp_path: Path) -> None:
    """The holder's own address, mistyping: a few free tries, then 1 s, 2 s, 4 s; their session goes on."""
    with running_pocketbase(tmp_path) as pb, network(pb) as net:
        alice = pb.new_sender()
        for _ in range(FREE):
            assert net.login(HOME, "users", alice.email, "wrong").status_code == 400
        for wait in (1, 2, 4):
            refused = net.login(HOME, "users", alice.email, "wrong")
            assert (refused.status_code, retry_after(refused)) == (429, wait), refused.text
            assert f"try again in {wait} seconds" in refused.json()["message"]
            # the right password waits too, and the signed-in session does not
            assert net.login(HOME, "users", alice.email, PASSWORD).status_code == 429
            assert alice.http.get("/api/transcriber/records").status_code == 200
            time.sleep(wait + 0.2)
            assert net.login(HOME, "users", alice.email, "wrong").status_code == 400
        assert retry_after(net.login(HOME, "users", alice.email, "wrong")) == 8
        # Another address's count is its own: her second address is not slowed.
        assert net.login("127.0.9.9", "users", alice.email, "wrong").status_code == 400
        time.sleep(8.2)
        # The right password clears the count: the free tries are back.
        assert net.login(HOME, "users", alice.email, PASSWORD).status_code == 200
        for _ in range(FREE):
            assert net.login(HOME, "users", alice.email, "wrong").status_code == 400
        assert net.login(HOME, "users", alice.email, "wrong").status_code == 429
        assert alerts(pb.superuser()) == []  # her own mistakes are no attack


def test_an_account_under_attack_keeps_new_addresses_out_and_an_unknown_identity_is_answered_alike(
    tmp_path: Path,
) -> None:
    with running_pocketbase(tmp_path) as pb, network(pb) as net:
        alice, owner = pb.new_sender(), pb.superuser()
        started = time.monotonic()
        hers = attack(net, "users", alice.email, group=3, tries=ATTACK_AT + FRESH + 3)
        hers_waited = time.monotonic() - started
        started = time.monotonic()
        nobodys = attack(net, "users", "nobody@example.com", group=4, tries=ATTACK_AT + FRESH + 3)
        nobodys_waited = time.monotonic() - started
        for answers in (hers, nobodys):
            assert [a.status_code for a in answers] == [400] * (ATTACK_AT + FRESH) + [429] * 3
        # Answered alike, word for word, the wait within a few seconds.
        for mine, theirs in zip(hers, nobodys, strict=True):
            assert (mine.json()["code"], mine.json()["message"].split(";")[0]) == (
                theirs.json()["code"],
                theirs.json()["message"].split(";")[0],
            )
        # Each new address waits for its lane's minute, which began with the attack's 21st try (a wrong password
        # of an existing account takes PocketBase longer to answer: it checks a hash).
        assert FRESH_WINDOW_S - hers_waited - 3 <= retry_after(hers[-1]) <= FRESH_WINDOW_S
        assert FRESH_WINDOW_S - nobodys_waited - 3 <= retry_after(nobodys[-1]) <= FRESH_WINDOW_S
        # A new address with the right password waits; her own address does not.
        assert net.login("127.3.9.9", "users", alice.email, PASSWORD).status_code == 429
        assert net.login(HOME, "users", alice.email, PASSWORD).status_code == 200
        # One row for her account, one for identities no account has.
        rows = {r["account"]: r for r in alerts(owner)}
        assert set(rows) == {alice.id, ""}
        assert rows[""]["identity"] == "nobody@example.com" and rows[""]["failures"] == ATTACK_AT + FRESH
        assert rows[alice.id]["failures"] == ATTACK_AT + FRESH and rows[alice.id]["refused"] == 4
        assert pb.service().http.get("/api/pipeline/logins").json() == {
            "failed_logins": 2 * (ATTACK_AT + FRESH),
            "refused_logins": 7,
            "accounts_under_attack": 2,
        }


def test_the_holders_addresses_outlive_a_restart_and_are_kept_hashed(tmp_path: Path) -> None:
    with running_pocketbase(tmp_path) as pb, network(pb) as net:
        alice, owner = pb.new_sender(), pb.superuser()
        assert net.login("127.0.7.7", "users", alice.email, PASSWORD).status_code == 200  # her second address
        rows = owner.http.get(
            "/api/collections/login_addresses/records", params={"filter": f'account = "{alice.id}"'}
        ).json()["items"]
        assert len(rows) == 2
        for row in rows:
            assert re.fullmatch(r"[0-9a-f]{64}", row["address"]) and row["collection"] == "users"
        assert "127.0.7.7" not in str(rows)
        pb.restart()
        assert [a.status_code for a in attack(net, "users", alice.email, group=5, tries=ATTACK_AT + FRESH + 1)] == [
            400
        ] * (ATTACK_AT + FRESH) + [429]
        assert net.login("127.0.7.7", "users", alice.email, PASSWORD).status_code == 200
        assert net.login(HOME, "users", alice.email, PASSWORD).status_code == 200
        assert net.login("127.0.8.8", "users", alice.email, PASSWORD).status_code == 429


def test_a_sender_changes_their_password_and_only_this_session_goes_on(tmp_path: Path) -> None:
    with running_pocketbase(tmp_path) as pb, network(pb) as net:
        alice = pb.new_sender()
        laptop = pb.caller("sender", "users", alice.email)  # another session of hers
        route = "/api/transcriber/password"
        bad = alice.http.post(route, json={"password": NEW_PASSWORD})
        assert (bad.status_code, bad.json()["code"]) == (400, "invalid_request")
        # A wrong old password is a failed login of this account from this address.
        for _ in range(FREE):
            wrong = alice.http.post(route, json={"old_password": "not-it", "password": NEW_PASSWORD})
            assert (wrong.status_code, wrong.json()["code"]) == (400, "wrong_password")
        waiting = alice.http.post(route, json={"old_password": PASSWORD, "password": NEW_PASSWORD})
        assert (waiting.status_code, waiting.json()["code"], retry_after(waiting)) == (429, "too_many_failed_logins", 1)
        assert net.login(HOME, "users", alice.email, PASSWORD).status_code == 429  # the same pair
        assert alice.http.get("/api/transcriber/records").status_code == 200  # the session is not limited
        time.sleep(1.2)
        short = alice.http.post(route, json={"old_password": PASSWORD, "password": "short"})
        assert (short.status_code, short.json()["code"], short.json()["data"]) == (
            400,
            "weak_password",
            {"min": 8, "max": 71, "max_bytes": 72, "bytes": 5, "chars": 5},
        )
        changed = alice.http.post(route, json={"old_password": PASSWORD, "password": NEW_PASSWORD})
        assert changed.status_code == 200, changed.text
        assert changed.json()["record"]["id"] == alice.id
        # This session goes on with the token it was handed; every other one ended.
        fresh = {"Authorization": changed.json()["token"]}
        assert httpx.get(f"{pb.url}/api/transcriber/records", headers=fresh).status_code == 200
        assert alice.http.get("/api/transcriber/records").status_code == 401
        assert laptop.http.get("/api/transcriber/records").status_code == 401
        assert net.login(HOME, "users", alice.email, PASSWORD).status_code == 400
        assert net.login(HOME, "users", alice.email, NEW_PASSWORD).status_code == 200
        # Senders only: the owner changes theirs in the panel, the service account never.
        assert pb.anonymous().post(route, json={"old_password": "x", "password": NEW_PASSWORD}).status_code == 401
        for other in (pb.superuser(), pb.service()):
            assert other.http.post(route, json={"old_password": "x", "password": NEW_PASSWORD}).status_code == 403


def test_a_password_reset_by_mail_links_to_the_page_and_frees_the_address_it_was_confirmed_from(
    tmp_path: Path,
) -> None:
    """PocketBase's own reset, its mail pointed at the sender's page; whoever holds the mailed token holds
    the account, so the address the reset was confirmed from is the holder's: an attack does not keep them out."""
    with running_pocketbase(tmp_path) as pb, network(pb) as net, mail_sink() as sink:
        options = "/api/transcriber/options"
        assert pb.anonymous().get(options).json()["password_reset"] is False  # no mail set up yet
        configure_mail(pb, sink)
        assert pb.anonymous().get(options).json()["password_reset"] is True
        alice = pb.new_sender()
        attack(net, "users", alice.email, group=6, tries=ATTACK_AT + FRESH)
        away = "127.6.9.9"  # where she is now: an address she never signed in from
        assert net.login(away, "users", alice.email, PASSWORD).status_code == 429
        asked = net.post(away, "/api/collections/users/request-password-reset", {"email": alice.email})
        assert asked.status_code == 204, asked.text
        mail = sink.wait_for(alice.email, "new password")
        link = link_in(mail, f"{pb.url}/#/reset/")
        token = link.rsplit("/", 1)[1]
        body = {"token": token, "password": NEW_PASSWORD, "passwordConfirm": NEW_PASSWORD}
        assert net.post(away, "/api/collections/users/confirm-password-reset", body).status_code == 204
        assert net.login(away, "users", alice.email, NEW_PASSWORD).status_code == 200
        assert alice.http.get("/api/transcriber/records").status_code == 401  # her sessions ended with the old password
        # The token served once.
        again = net.post(away, "/api/collections/users/confirm-password-reset", body)
        assert again.status_code == 400 and "token" in again.json()["data"]


def device_id(token: str) -> str:
    """The device a token names ("v1.ISSUED.ID.SIGNATURE")."""
    return token.split(".")[2]


def test_ten_addresses_thirty_wrong_passwords_then_the_holder_from_a_new_address_with_and_without_a_device_token(
    tmp_path: Path, figures: dict[str, str]
) -> None:
    """A small botnet kept the holder out of every new address for 15 minutes, renewable forever: her phone
    on a new network now gets in at once with its device token, and a device she never used within a minute."""
    with running_pocketbase(tmp_path) as pb, network(pb) as net:
        alice, bob = pb.new_sender(), pb.new_sender()
        phone = net.login("127.0.5.1", "users", alice.email, PASSWORD)  # her phone, signed in before
        assert phone.status_code == 200
        token = phone.headers[DEVICE]
        cookie = phone.headers["set-cookie"]
        assert token in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/api/" in cookie
        # Ten addresses, thirty wrong passwords each.
        strangers = [stranger(i, group=7) for i in range(10)]
        answers = [net.login(a, "users", alice.email, f"guess-{r}") for r in range(30) for a in strangers]
        assert Counter(a.status_code for a in answers) == {400: ATTACK_AT, 429: 300 - ATTACK_AT}

        # The phone on a network it never used: at once, its token renewed under the same device.
        away = net.login("127.8.0.1", "users", alice.email, PASSWORD, device=token)
        assert away.status_code == 200, away.text
        assert device_id(away.headers[DEVICE]) == device_id(token)
        # Its cookie does the same (the page's way): the browser sends it back.
        by_cookie = net.client("127.8.0.9").post(
            "/api/collections/users/auth-with-password",
            json={"identity": alice.email, "password": PASSWORD},
            headers={"Cookie": cookie.split(";")[0]},
        )
        assert by_cookie.status_code == 200, by_cookie.text
        # A token that is no token, or another account's, is trusted nowhere.
        bobs = net.login("127.0.5.2", "users", bob.email, PASSWORD).headers[DEVICE]
        forged = token[: token.rindex(".") + 1] + "0" * 64
        for other in (bobs, forged):
            refused = net.login("127.8.0.2", "users", alice.email, "guess-again", device=other)
            assert refused.status_code in (400, 429)
        # Strangers new to the account take the new devices' lane for this minute (each at most once).
        for i in range(10, 10 + FRESH):
            net.login(stranger(i, group=7), "users", alice.email, f"guess-new-{i}")
        started = time.monotonic()
        waits = net.login("127.8.0.3", "users", alice.email, PASSWORD)  # a laptop she never used
        assert (waits.status_code, waits.json()["code"]) == (429, "too_many_failed_logins")
        assert 0 < retry_after(waits) <= FRESH_WINDOW_S
        # The strangers go on meanwhile: their tries do not renew her wait.
        while time.monotonic() - started < retry_after(waits) + 0.5:
            for a in strangers:
                assert net.login(a, "users", alice.email, "guess-more").status_code == 429
            time.sleep(2)
        got_in = net.login("127.8.0.3", "users", alice.email, PASSWORD)
        took = time.monotonic() - started
        assert got_in.status_code == 200, got_in.text
        assert took <= FRESH_WINDOW_S + 3
    figures["holder during a 10-address attack"] = (
        f"with her device token: at once; a new device: {took:.0f} s (strangers refused meanwhile)"
    )


# A route of the test's own beside the project's hooks: fills PocketBase's shared store as a flood of
# made-up names would (each wrong login opens a count), in a second instead of 100,000 requests.
FILL = """
routerAdd("POST", "/api/test/fill/{n}", (e) => {
  const n = parseInt(e.request.pathValue("n"), 10);
  const store = $app.store();
  for (let i = 0; i < n; i++) store.set("transcriber.test.fill|" + i, "1");
  return e.json(200, { entries: store.length() });
});
"""


def test_the_store_filled_a_known_device_and_a_new_address_sign_in_and_the_flood_is_refused(tmp_path: Path) -> None:
    """200,000 entries in the guard's store refused every account's new addresses; now only the addresses
    that opened many counts are refused, and known devices and addresses never."""
    hooks = tmp_path / "hooks"
    shutil.copytree(Path(__file__).parents[2] / "pb_hooks", hooks)
    (hooks / "zz_fill.pb.js").write_text(FILL)
    with running_pocketbase(tmp_path, hooks_dir=hooks) as pb, network(pb) as net:
        alice, bob = pb.new_sender(), pb.new_sender()
        token = net.login("127.0.5.1", "users", alice.email, PASSWORD).headers[DEVICE]
        filled = pb.anonymous().post("/api/test/fill/200000")
        assert filled.status_code == 200 and filled.json()["entries"] >= 200_000
        # The flood's address: made-up names, each a new count, until it has opened too many.
        flood = [net.login("127.9.0.1", "users", f"made-up-{i}@example.com", "guess") for i in range(CROWD + 1)]
        assert [a.status_code for a in flood] == [400] * CROWD + [429]
        assert flood[-1].json()["code"] == "too_many_failed_logins"
        # Her phone on a new network, with its token; Bob on an address he never used, without one.
        assert net.login("127.9.0.2", "users", alice.email, PASSWORD, device=token).status_code == 200
        assert net.login("127.9.0.3", "users", bob.email, PASSWORD).status_code == 200
        assert net.login(HOME, "users", alice.email, PASSWORD).status_code == 200  # a known address


def test_the_owner_unlocks_an_account_from_the_panel_and_the_command_line(tmp_path: Path) -> None:
    with running_pocketbase(tmp_path) as pb, network(pb) as net:
        alice, owner = pb.new_sender(), pb.superuser()
        attack(net, "users", alice.email, group=8, tries=ATTACK_AT + FRESH + 1)
        assert net.login("127.8.1.1", "users", alice.email, PASSWORD).status_code == 429
        # The panel: a row of login_unlocks, applied at once.
        row = owner.http.post(
            "/api/collections/login_unlocks/records", json={"identity": alice.email, "collection": "users"}
        )
        assert row.status_code == 200, row.text
        applied = owner.http.get(f"/api/collections/login_unlocks/records/{row.json()['id']}").json()
        assert applied["applied"] and applied["outcome"].startswith("unlocked")
        assert net.login("127.8.1.1", "users", alice.email, PASSWORD).status_code == 200
        nobody = owner.http.post(
            "/api/collections/login_unlocks/records", json={"identity": "nobody@example.com", "collection": "users"}
        )
        assert nobody.status_code == 400 and "No account" in nobody.text

        # The command line: written beside the running server, which applies it at its next minute.
        attack(net, "users", alice.email, group=9, tries=ATTACK_AT + FRESH + 1)
        assert net.login("127.8.1.2", "users", alice.email, PASSWORD).status_code == 429
        said = process.unlock(pb.settings, alice.email)
        assert "within a minute" in said
        eventually_sync(
            lambda: net.login("127.8.1.2", "users", alice.email, PASSWORD).status_code == 200,
            within=75,
            every=2,  # PocketBase's own limiter allows an address 20 logins in 10 s
            what="the unlock applied",
        )
        with pytest.raises(RuntimeError, match="no account"):
            process.unlock(pb.settings, "nobody@example.com")


def test_the_command_line_keeps_its_device_token_and_presents_it(tmp_path: Path) -> None:
    with running_pocketbase(tmp_path) as pb:
        alice = pb.new_sender()
        devices = DeviceTokens(tmp_path / "state" / "devices.json")
        with Session(pb.url, alice.email, PASSWORD, Lines(io.StringIO()), devices) as session:
            session.sign_in()
        first = devices.get(pb.url, alice.email)
        assert first and (devices.path.stat().st_mode & 0o777) == 0o600
        with Session(pb.url, alice.email, PASSWORD, Lines(io.StringIO()), devices) as session:
            session.sign_in()
        second = devices.get(pb.url, alice.email)
        # Presented, the token is renewed for the same device (a client that presented none gets a new one).
        assert second and device_id(second) == device_id(first)
