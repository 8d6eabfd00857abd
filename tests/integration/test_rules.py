"""ST2–ST5: who can reach what, and what the schema refuses."""

from __future__ import annotations

import re

import pytest

from testkit.media import wav_bytes
from testkit.pocketbase import COLLECTIONS, Caller, PocketBaseServer, now_ms
from tests.unit.test_js_lint import configured_globals


@pytest.fixture
def record_id(sender: Caller) -> str:
    return sender.upload(wav_bytes(0.2))


def _some_id(su: Caller, collection: str) -> str:
    items = su.http.get(f"/api/collections/{collection}/records", params={"perPage": 1}).json()["items"]
    return str(items[0]["id"]) if items else "missingid123456"


@pytest.mark.parametrize("collection", COLLECTIONS)
def test_senders_reach_no_collection(
    pb: PocketBaseServer, sender: Caller, superuser: Caller, record_id: str, collection: str
) -> None:
    rid = record_id if collection == "audio_records" else _some_id(superuser, collection)
    base = f"/api/collections/{collection}/records"
    before = superuser.http.get(base).json()
    listed = sender.http.get(base)
    assert listed.status_code in (200, 403) and listed.json().get("items", []) == []
    assert sender.http.get(f"{base}/{rid}").status_code in (403, 404)
    assert sender.http.post(base, json={"owner": sender.id, "state": "uploaded", "title": "x"}).status_code in (
        400,
        403,
    )
    # (400: the usage views are read-only for everyone)
    assert sender.http.patch(f"{base}/{rid}", json={"title": "hijack"}).status_code in (400, 403, 404)
    assert sender.http.delete(f"{base}/{rid}").status_code in (400, 403, 404)
    assert superuser.http.get(base).json() == before  # nothing created, changed or deleted


def test_service_user_cannot_change_owner_fields(
    pb: PocketBaseServer, sender: Caller, other_sender: Caller, service: Caller, superuser: Caller, record_id: str
) -> None:
    base = f"/api/collections/audio_records/records/{record_id}"
    before = superuser.http.get(base).json()
    for field, value in [("owner", other_sender.id), ("title", "x"), ("brief", "y"), ("topics", [])]:
        resp = service.http.patch(base, json={field: value})
        assert resp.status_code in (403, 404), (field, resp.status_code)
    assert (
        service.http.post(
            "/api/collections/audio_records/records", json={"owner": sender.id, "state": "uploaded"}
        ).status_code
        == 403
    )
    assert (
        service.http.post(
            "/api/collections/texts/records", json={"record": record_id, "kind": "transcript"}
        ).status_code
        == 403
    )
    assert superuser.http.get(base).json() == before
    # ... while it can read what the pipeline needs
    assert service.http.get(base).status_code == 200


def test_records_are_never_deleted(pb: PocketBaseServer, sender: Caller, superuser: Caller, record_id: str) -> None:
    base = f"/api/collections/audio_records/records/{record_id}"
    assert sender.http.delete(base).status_code in (403, 404)
    resp = superuser.http.delete(base)
    assert resp.status_code == 400
    assert "never deleted" in resp.json()["message"]
    assert superuser.http.get(base).status_code == 200


HISTORY = ["record_events", "recognition_attempts", "files"]


def test_the_pipelines_rows_are_read_only_in_the_panel_but_a_transcript_can_be_corrected(
    pb: PocketBaseServer, service: Caller, superuser: Caller, record_id: str
) -> None:
    token = service.claim(record_id, now=1 << 42)["token"]
    pipe = f"/api/pipeline/records/{record_id}"
    assert service.http.post(f"{pipe}/attempts", json={"token": token, "provider": "offline"}).status_code == 200
    assert service.http.put(f"{pipe}/texts/transcript", json={"token": token, "content": "helo"}).status_code == 200
    rows = {
        c: superuser.http.get(f"/api/collections/{c}/records", params={"filter": f'record="{record_id}"'}).json()[
            "items"
        ]
        for c in [*HISTORY, "texts"]
    }
    assert all(rows.values()), {c: len(r) for c, r in rows.items()}
    for c, items in rows.items():
        base = f"/api/collections/{c}/records"
        created = superuser.http.post(base, json={"record": record_id, "kind": "transcript", "stage": "done"})
        assert created.status_code == 400 and "pipeline only" in created.json()["message"], (c, created.text)
        deleted = superuser.http.delete(f"{base}/{items[0]['id']}")
        assert deleted.status_code == 400 and "cannot be deleted" in deleted.json()["message"], (c, deleted.text)
        if c in HISTORY:
            edited = superuser.http.patch(f"{base}/{items[0]['id']}", json={"outcome_text": "x", "name": "x"})
            assert edited.status_code == 400 and "cannot be edited" in edited.json()["message"], (c, edited.text)
        after = superuser.http.get(base, params={"filter": f'record="{record_id}"'}).json()["items"]
        assert after == items  # nothing created, changed or deleted
    text = rows["texts"][0]
    corrected = superuser.http.patch(f"/api/collections/texts/records/{text['id']}", json={"content": "hello"})
    assert corrected.status_code == 200 and corrected.json()["content"] == "hello"


def test_owner_of_records_cannot_be_deleted_either(
    pb: PocketBaseServer, sender: Caller, superuser: Caller, record_id: str
) -> None:
    assert superuser.http.delete(f"/api/collections/users/records/{sender.id}").status_code == 400
    assert superuser.http.get(f"/api/collections/audio_records/records/{record_id}").status_code == 200


def test_pipeline_routes_are_for_the_service_user_only(pb: PocketBaseServer, sender: Caller, superuser: Caller) -> None:
    body = {"now": now_ms(), "leases": {"uploaded": 1000}}
    assert pb.anonymous().post("/api/pipeline/claim", json=body).status_code == 401
    assert sender.try_claim().status_code == 403
    assert superuser.try_claim().status_code == 403


def test_the_linters_globals_are_what_pocketbase_declares(pb: PocketBaseServer) -> None:
    """.oxlintrc.json names PocketBase's JS globals: each one the types.d.ts that PocketBase writes declares
    (plus the VM's CommonJS ``require``/``module`` and ``console``), and every one of those."""
    types = (pb.settings.pocketbase.data_dir / "types.d.ts").read_text()
    declared = set(re.findall(r"(?:^|\*/)declare (?:var|function|const|let|class|namespace) ([$\w]+)", types, re.M))
    assert configured_globals() == declared | {"require", "module", "console"}
