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

import re
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
from sidecar.pocketbase.client import PocketBaseClient
from testkit.pocketbase import PASSWORD, Caller, PocketBaseServer, running_pocketbase
from tests.support.mail import configure_mail, link_in, mail_sink
from tests.support.waiting import eventually_sync

pytestmark = pytest.mark.slow

# lib/logins.js: free tries of a pair, then 1 s doubling; 20 failures from addresses an account does not know
# make an attack, which keeps every such address out until the 15-minute window ends.
FREE = 5
ATTACK_AT = 20
WINDOW_S = 15 * 60
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

    def login(self, address: str, collection: str, identity: str, password: str) -> httpx.Response:
        body = {"identity": identity, "password": password}
        return self.client(address).post(f"/api/collections/{collection}/auth-with-password", json=body)

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
        # A guess spread over 100 addresses: 20 passwords looked at, then every address it never signed in from waits.
        assert codes == {400: ATTACK_AT, 429: 1000 - ATTACK_AT}, codes
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
            "failures": ATTACK_AT,
            "addresses": ATTACK_AT,
            "refused": 1000 - ATTACK_AT + 1,
        }
        assert row["ongoing"] is True and row["first_seen"] <= row["last_seen"]
        line = attack_logged(owner, holder.id)
        assert line["level"] == 4 and line["data"]["collection"] == collection and line["data"]["alert"] == row["id"]
        assert "login attack on " + collection in pb.log()  # and on PocketBase's standard error (the journal)
        assert exported_metrics(pb) == {
            "transcriber_failed_logins_total": ATTACK_AT,
            "transcriber_accounts_under_attack": 1,
        }
        # The owner reads; nobody writes.
        url = f"/api/collections/login_alerts/records/{row['id']}"
        assert owner.http.patch(url, json={"failures": 0}).status_code == 400
        assert owner.http.delete(url).status_code == 400  # still going
    figures[f"stranger's 1,000 wrong passwords ({collection})"] = (
        f"{ATTACK_AT} looked at, {1000 - ATTACK_AT} refused, in {took:.1f} s; the holder signed in at once"
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
        hers = attack(net, "users", alice.email, group=3, tries=ATTACK_AT + 3)
        hers_waited = time.monotonic() - started
        started = time.monotonic()
        nobodys = attack(net, "users", "nobody@example.com", group=4, tries=ATTACK_AT + 3)
        nobodys_waited = time.monotonic() - started
        for answers in (hers, nobodys):
            assert [a.status_code for a in answers] == [400] * ATTACK_AT + [429] * 3
        # Answered alike, word for word, the wait within a few seconds.
        for mine, theirs in zip(hers, nobodys, strict=True):
            assert (mine.json()["code"], mine.json()["message"].split(";")[0]) == (
                theirs.json()["code"],
                theirs.json()["message"].split(";")[0],
            )
        # Each waits for its window's end, 15 minutes after its first wrong password (a wrong password of an
        # existing account takes PocketBase longer to answer: it checks a hash).
        assert abs(retry_after(hers[-1]) - (WINDOW_S - hers_waited)) <= 3
        assert abs(retry_after(nobodys[-1]) - (WINDOW_S - nobodys_waited)) <= 3
        # A new address with the right password waits; her own address does not.
        assert net.login("127.3.9.9", "users", alice.email, PASSWORD).status_code == 429
        assert net.login(HOME, "users", alice.email, PASSWORD).status_code == 200
        # One row for her account, one for identities no account has.
        rows = {r["account"]: r for r in alerts(owner)}
        assert set(rows) == {alice.id, ""}
        assert rows[""]["identity"] == "nobody@example.com" and rows[""]["failures"] == ATTACK_AT
        assert rows[alice.id]["failures"] == ATTACK_AT and rows[alice.id]["refused"] == 4
        assert pb.service().http.get("/api/pipeline/logins").json() == {
            "failed_logins": 2 * ATTACK_AT,
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
        assert [a.status_code for a in attack(net, "users", alice.email, group=5, tries=ATTACK_AT + 1)] == [
            400
        ] * ATTACK_AT + [429]
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
        attack(net, "users", alice.email, group=6)
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
