"""Bad input of every kind: a clear 4xx at intake or a clean halt with a code in the
pipeline (an audio track of no samples: done and empty); never a 5xx; nothing orphaned."""

from __future__ import annotations

import io
import wave
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from sidecar.providers.instant import InstantProvider
from sidecar.serving.assembly import default_steps
from testkit.audio import write_audio, write_video_only
from testkit.media import wav_bytes
from testkit.pocketbase import COLLECTIONS, OWNER_ONLY, PocketBaseServer, running_pocketbase
from tests.support.sidecar import pool_running, running_sidecar
from tests.support.waiting import eventually

pytestmark = pytest.mark.slow


def zero_frame_wav() -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
    return buf.getvalue()


def raw_multipart(body: bytes, boundary: str = "b") -> dict[str, Any]:
    return {"content": body, "headers": {"Content-Type": f"multipart/form-data; boundary={boundary}"}}


# kind → how to send it; the expected answer class
INTAKE_ABUSE: dict[str, dict[str, Any]] = {
    "empty file": {"files": {"file": ("e.wav", b"")}},
    "renamed text": {"files": {"file": ("notes.mp3", b"Dear team,\nplease find attached\n" * 30)}},
    "random bytes": {"files": {"file": ("r.m4a", bytes(range(256)) * 20)}},
    "two files": {"files": [("file", ("a.wav", wav_bytes(0.1))), ("file", ("b.wav", wav_bytes(0.1)))]},
    "wrong field": {"files": {"audio": ("a.wav", wav_bytes(0.1))}},
    "title of 1 MB": {"files": {"file": ("a.wav", wav_bytes(0.1))}, "data": {"title": "x" * (1 << 20)}},
    "forged owner": {"files": {"file": ("a.wav", wav_bytes(0.1))}, "data": {"owner": "someoneelse1234"}},
    "forged stage": {"files": {"file": ("a.wav", wav_bytes(0.1))}, "data": {"state": "done"}},
    "forged halt": {"files": {"file": ("a.wav", wav_bytes(0.1))}, "data": {"halted_at": "2026-01-01"}},
    "json instead of multipart": {"json": {"file": "UklGRg==", "title": "x"}},
    "no file part": raw_multipart(b'--b\r\nContent-Disposition: form-data; name="title"\r\n\r\nt\r\n--b--\r\n'),
    "malformed multipart": raw_multipart(b"--b\r\nthis is not a part\r\n", boundary="b"),
    "huge (over the limit)": {"files": {"file": ("big.wav", wav_bytes(40))}},  # ~1.3 MB > 1 MB limit
}

# accepted at intake (the first bytes look right); only decoding can tell
PIPELINE_ABUSE: dict[str, tuple[str, Callable[[Path], bytes]]] = {
    "no audio stream": ("v.mp4", lambda tmp: write_video_only(tmp / "v.mp4").read_bytes()),
    "corrupt ogg": ("c.ogg", lambda tmp: b"OggS\x00\x02" + bytes(range(256)) * 40),
    "garbage behind an mp3 frame header": ("g.mp3", lambda tmp: b"\xff\xfb\x90\x64" + bytes(range(255, -1, -1)) * 40),
    "truncated m4a": ("m.m4a", lambda tmp: write_audio(tmp / "m.m4a", 2, codec="aac").read_bytes()[:600]),
}


# an audio track of no samples: nothing damaged, nothing to hear (L5): done, empty
EMPTY: dict[str, tuple[str, Callable[[Path], bytes]]] = {
    "truncated (header only)": ("t.wav", lambda tmp: wav_bytes(1.0)[:44]),
    "zero-length audio": ("z.wav", lambda tmp: zero_frame_wav()),
}


def storage_files(pb: PocketBaseServer) -> list[Path]:
    root = pb.settings.pocketbase.data_dir / "storage"
    # PocketBase keeps a ".attrs" sidecar file beside each stored file
    return [p for p in root.rglob("*") if p.is_file() and p.suffix != ".attrs"] if root.exists() else []


def test_bad_input_gets_a_clear_answer_or_a_clean_halt_and_leaves_no_orphans(
    tmp_path: Path, figures: dict[str, str]
) -> None:
    with running_pocketbase(tmp_path / "pb", max_upload_mb=1) as pb:
        sender, su = pb.new_sender(), pb.superuser()
        refused: dict[str, int] = {}
        for kind, request in INTAKE_ABUSE.items():
            resp = sender.http.post("/api/transcriber/records", **request)
            assert 400 <= resp.status_code < 500, (kind, resp.status_code, resp.text[:200])
            body = resp.json()
            assert isinstance(body.get("message"), str) and len(body["message"]) > 5, kind
            refused[kind] = resp.status_code
        assert su.http.get("/api/collections/audio_records/records").json()["totalItems"] == 0
        assert su.http.get("/api/collections/files/records").json()["totalItems"] == 0
        assert storage_files(pb) == []

        # odd but acceptable: a unicode, path-like name; control characters in the title
        odd = sender.http.post(
            "/api/transcriber/records",
            files={"file": ("../../../etc/пароль 🎙\\x.wav", wav_bytes(0.3))},
            data={"title": "line1\nline2\t<script>alert(1)</script>"},
        )
        assert odd.status_code == 201
        assert odd.json()["title"] == "line1\nline2\t<script>alert(1)</script>"

        accepted: dict[str, str] = {}
        for kind, (name, make) in PIPELINE_ABUSE.items():
            accepted[sender.upload(make(tmp_path), name=name)] = kind
        empty: dict[str, str] = {}
        for kind, (name, make) in EMPTY.items():
            empty[sender.upload(make(tmp_path), name=name)] = kind

        # path-like ids and other people's ids at the poll
        for bad_id in ["../../api/collections/users/records", "%2e%2e%2f", "x" * 300, "' OR 1=1 --"]:
            resp = sender.http.get(f"/api/transcriber/records/{bad_id}")
            assert resp.status_code in (400, 404), (bad_id, resp.status_code)

        async def drain() -> None:
            async with running_sidecar(pb, default_steps(), provider=InstantProvider(), workers=2) as pool:
                async with pool_running(pool):
                    await eventually(
                        lambda: all(
                            r["state"] == "done" or r["halted_at"]
                            for r in su.http.get("/api/collections/audio_records/records").json()["items"]
                        ),
                        within=60,
                    )

        anyio.run(drain)
        halted: dict[str, str] = {}
        for rid, kind in accepted.items():
            rec = su.record(rid)
            assert rec["halt_code"] == "unsupported_media", (kind, rec["state"], rec["halt_reason"])
            assert rec["attempts"] == 1, kind  # halted at once, no retries spent
            assert "/tmp" not in rec["halt_reason"] and "transcriber-" not in rec["halt_reason"]
            poll = sender.poll(rid)
            assert poll["halted"] and poll["halt_code"] == "unsupported_media"
            halted[kind] = rec["halt_reason"]
        for rid, kind in empty.items():
            poll = sender.poll(rid)
            assert (poll["status"], poll["halted"], poll["text"]) == ("done", False, ""), (kind, poll)
            events = su.http.get(
                "/api/collections/record_events/records", params={"filter": f'record="{rid}"', "perPage": 100}
            ).json()["items"]
            notes = [e["outcome_text"] for e in events]
            assert "no speech found: the transcript is empty" in notes, (kind, notes)
            assert any("the audio track holds no samples" in n for n in notes), (kind, notes)
        assert su.http.get(f"/api/collections/audio_records/records/{odd.json()['id']}").json()["state"] == "done"

        # every stored file belongs to a row
        rows = su.http.get("/api/collections/files/records", params={"perPage": 500}).json()["items"]
        attempts = su.http.get("/api/collections/recognition_attempts/records", params={"perPage": 500}).json()["items"]
        texts = su.http.get("/api/collections/texts/records", params={"perPage": 500}).json()["items"]
        names = {r["blob"] for r in rows if r["blob"]} | {a["raw_response"] for a in attempts if a["raw_response"]}
        names |= {t["document"] for t in texts if t.get("document")}  # the literary text's Word document
        assert {p.name for p in storage_files(pb)} == names

        log = pb.log()
        assert " 500 " not in log and "panic" not in log.lower()
    kinds = len(INTAKE_ABUSE) + 1 + len(PIPELINE_ABUSE) + len(EMPTY) + 4
    figures["bad inputs"] = (
        f"{kinds} kinds: {len(INTAKE_ABUSE)} refused at intake with 4xx ({sorted(set(refused.values()))}), "
        f"{len(PIPELINE_ABUSE)} halted unsupported_media on the first try, {len(EMPTY)} without samples done and "
        "empty, 4 hostile poll ids 404, 1 odd name accepted"
    )


CALLERS = ["anonymous", "sender", "other_sender", "service", "superuser"]
SERVICE_READS = {"audio_records", "files", "recognition_attempts"}


def test_authorization_matrix(pb: PocketBaseServer, figures: dict[str, str]) -> None:
    """Every collection and route × every kind of caller × every operation."""
    owner, other, svc, su = pb.new_sender(), pb.new_sender(), pb.service(), pb.superuser()
    rid = owner.upload(wav_bytes(0.2))
    # a row in every collection, so that every read is a real test
    tok = svc.claim(rid, now=1 << 42, leases={"uploaded": 1000})["token"]
    pipe = f"/api/pipeline/records/{rid}"
    assert svc.http.post(f"{pipe}/attempts", json={"token": tok, "provider": "offline"}).status_code == 200
    assert svc.http.put(f"{pipe}/texts/transcript", json={"token": tok, "content": "secret words"}).status_code == 200
    assert su.http.post("/api/collections/topics/records", json={"owner": owner.id, "name": "work"}).status_code == 200
    # (the hooks write a status row while its sender listens; the owner of the service may too)
    status = {"id": rid, "owner": owner.id, "poll": {"id": rid}}
    assert su.http.post("/api/collections/record_status/records", json=status).status_code == 200
    http: dict[str, httpx.Client] = {
        "anonymous": pb.anonymous(),
        "sender": owner.http,
        "other_sender": other.http,
        "service": svc.http,
        "superuser": su.http,
    }
    any_id = {
        c: (su.http.get(f"/api/collections/{c}/records").json()["items"] or [{"id": "nothere123456789"}])[0]["id"]
        for c in COLLECTIONS
        if c not in OWNER_ONLY  # empty here: test_usage.py, test_sender_data.py and test_rules.py cover them
    }
    any_id["audio_records"] = rid
    cells = 0
    for c in (c for c in COLLECTIONS if c not in OWNER_ONLY):
        base = f"/api/collections/{c}/records"
        before = su.http.get(base).json()
        for who in CALLERS:
            h = http[who]
            reads = [h.get(base), h.get(f"{base}/{any_id[c]}")]
            cells += 5
            may_read = who == "superuser" or (who == "service" and c in SERVICE_READS)
            for r in reads:
                items_visible = r.status_code == 200 and (r.json().get("items") or "id" in r.json())
                assert bool(items_visible) == may_read, (c, who, r.status_code, r.text[:100])
            if who == "superuser":
                # the owner may edit through the panel, but even the owner cannot delete a recording
                if c == "audio_records":
                    assert h.delete(f"{base}/{rid}").status_code == 400
                continue
            writes = [
                h.post(
                    base,
                    json={"record": rid, "owner": owner.id, "state": "uploaded", "name": "x", "kind": "transcript"},
                ),
                h.patch(f"{base}/{any_id[c]}", json={"title": "x", "name": "y", "content": "z"}),
                h.delete(f"{base}/{any_id[c]}"),
            ]
            for w in writes:
                assert w.status_code in (400, 401, 403, 404), (c, who, w.request.method, w.status_code)
        assert su.http.get(base).json() == before  # nothing created, changed or deleted
    routes = [
        ("POST", "/api/pipeline/claim", {"now": 1, "leases": {"uploaded": 1}}),
        (
            "POST",
            f"/api/pipeline/records/{rid}/settle",
            {"outcome": "advanced", "token": "x", "now": 1, "to": "normalized"},
        ),
        (
            "POST",
            f"/api/pipeline/records/{rid}/settle",
            {"outcome": "halted", "token": "x", "now": 1, "code": "stalled", "reason": "r"},
        ),
        ("PUT", f"/api/pipeline/records/{rid}/texts/transcript", {"token": "x", "content": "c"}),
        ("GET", f"/api/transcriber/records/{rid}", None),
        ("GET", f"/api/transcriber/records/{rid}/transcript", None),
        ("GET", f"/api/transcriber/records/{rid}/audio", None),
        ("POST", f"/api/transcriber/records/{rid}/resume", None),
        ("PATCH", f"/api/transcriber/records/{rid}", {"title": ""}),
    ]
    # What the owner of the recording gets from each sender route (the others: 404 for another sender).
    own = {"audio": 200, "resume": 409, "transcript": 404}
    for method, path, body in routes:
        for who in CALLERS:
            resp = http[who].request(method, path, json=body)
            cells += 1
            if path.startswith("/api/pipeline"):
                expected = {"anonymous": 401, "service": 409 if "records/" in path else 204}.get(who, 403)
            else:
                expected = {
                    "anonymous": 401,
                    "sender": 200 if path.endswith(rid) else own[path.rsplit("/", 1)[1]],
                    "other_sender": 404,
                }.get(who, 403)
            assert resp.status_code == expected, (method, path, who, resp.status_code, resp.text[:100])
    assert su.record(rid)["title"] == ""
    figures["authorization matrix"] = (
        f"{cells} cells ({len(any_id)} collections x 5 callers x 5 operations + 9 routes x 5 callers): "
        "no unauthorized read or write"
    )
