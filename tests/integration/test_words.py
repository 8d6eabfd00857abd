"""Words a sender teaches recognition, against a real PocketBase: the sender's route, the owner's
field, and what a recognition claim reads (its own sender's words and topics, no one else's)."""

from __future__ import annotations

import pytest

from sidecar.storage.model import MAX_WORDS, taught_words
from testkit.pocketbase import Caller, PocketBaseServer


def _words_under_claim(service: Caller, rid: str, token: str) -> list[str]:
    resp = service.http.post(f"/api/pipeline/records/{rid}/words", json={"token": token})
    assert resp.status_code == 200, resp.text
    return list(resp.json()["words"])


def test_a_claim_reads_its_own_senders_words_and_topics(pb: PocketBaseServer) -> None:
    alice, bob = pb.new_sender(), pb.new_sender()
    said = alice.http.put("/api/transcriber/words", json={"words": "Кшесинская\nTigradon, Quillorin; tigradon\n\n"})
    assert said.status_code == 200, said.text
    assert said.json()["list"] == ["Кшесинская", "Tigradon", "Quillorin"]
    assert bob.http.put("/api/transcriber/words", json={"words": "Bob's secret project"}).status_code == 200
    owner = pb.superuser()
    made = owner.http.post("/api/collections/topics/records", json={"owner": alice.id, "name": "Billing"})
    assert made.status_code == 200, made.text
    rid = alice.upload()
    service = pb.service()
    claimed = service.claim(rid)
    assert _words_under_claim(service, rid, claimed["token"]) == ["Кшесинская", "Tigradon", "Quillorin", "Billing"]
    # Only under the claim: a stale token is fenced out.
    stale = service.http.post(f"/api/pipeline/records/{rid}/words", json={"token": "not-the-token"})
    assert stale.status_code == 409, stale.text
    # The owner edits them in the panel; the next read has the edit.
    edited = owner.http.patch(f"/api/collections/users/records/{alice.id}", json={"words": "Вельмора"})
    assert edited.status_code == 200, edited.text
    assert _words_under_claim(service, rid, claimed["token"]) == ["Вельмора", "Billing"]
    assert alice.http.get("/api/transcriber/words").json()["list"] == ["Вельмора"]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"words": 5}, "invalid_words"),
        ({}, "invalid_words"),
        ({"words": "a", "owner": "x"}, "unknown_field"),
        ({"words": "a\u0000b"}, "invalid_words"),
        ({"words": "ж" * 4001}, "words_too_long"),
    ],
)
def test_bad_words_are_refused_and_change_nothing(pb: PocketBaseServer, body: dict[str, object], code: str) -> None:
    sender = pb.new_sender()
    assert sender.http.put("/api/transcriber/words", json={"words": "Tigradon"}).status_code == 200
    resp = sender.http.put("/api/transcriber/words", json=body)
    assert resp.status_code == 400, resp.text
    assert resp.json()["code"] == code
    assert sender.http.get("/api/transcriber/words").json()["list"] == ["Tigradon"]


def test_the_words_route_needs_a_sender(pb: PocketBaseServer) -> None:
    assert pb.anonymous().get("/api/transcriber/words").status_code == 401
    assert pb.anonymous().put("/api/transcriber/words", json={"words": "x"}).status_code == 401


def test_the_sidecar_reads_words_as_the_server_does(pb: PocketBaseServer) -> None:
    """The in-memory twin's parse (sidecar.storage.model.taught_words) against the route's, on text
    with every separator, spaces, case repeats, overlong and Unicode words, and more than the limit."""
    sender = pb.new_sender()
    text = (
        "  Ярослава   Кшесинская ,, TIGRADON;tigradon\n"
        + "x" * 61
        + "\n🙂 emoji\n"
        + "\n".join(f"term{i}" for i in range(MAX_WORDS + 5))
    )
    stored = sender.http.put("/api/transcriber/words", json={"words": text}).json()
    assert stored["list"][:4] == ["Ярослава Кшесинская", "TIGRADON", "🙂 emoji", "term0"]
    rid = sender.upload()
    service = pb.service()
    under_claim = _words_under_claim(service, rid, service.claim(rid)["token"])
    assert under_claim == taught_words([text])
    assert len(under_claim) == MAX_WORDS
