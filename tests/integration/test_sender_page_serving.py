"""How PocketBase serves the sender's page: its headers, revalidation that survives an upgrade, and no
page where an API address is mistyped."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import httpx
import pytest

import sidecar
from testkit.pocketbase import PocketBaseServer, running_pocketbase

ROOT = Path(__file__).resolve().parents[2]
# What a wheel gives every file it installs, whatever the release.
WHEEL_TIME = 1580601600  # 2020-02-02


def test_the_page_is_served_with_its_headers(pb: PocketBaseServer) -> None:
    http = pb.anonymous()
    index = http.get("/")
    assert index.status_code == 200 and index.headers["Content-Type"].startswith("text/html")
    assert '<script type="module" src="js/main.js">' in index.text
    policy = index.headers["Content-Security-Policy"]
    assert "default-src 'self'" in policy and "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert index.headers["X-Content-Type-Options"] == "nosniff"
    assert index.headers["Referrer-Policy"] == "no-referrer"
    assert index.headers["Cache-Control"] == "no-cache"
    # Every module of the page, under the same policy, revalidated the same way.
    for path in sorted((ROOT / "pb_public" / "js").glob("*.js")):
        module = http.get(f"/js/{path.name}")
        assert module.status_code == 200 and "javascript" in module.headers["Content-Type"], path.name
        assert module.headers["Content-Security-Policy"] == policy and module.headers["Cache-Control"] == "no-cache"
        again = http.get(f"/js/{path.name}", headers={"If-None-Match": module.headers["ETag"]})
        assert again.status_code == 304, path.name
    sdk = http.get("/vendor/pocketbase.es.mjs")
    assert sdk.status_code == 200 and "javascript" in sdk.headers["Content-Type"]
    # The API keeps its own headers: the page's policy is for the page.
    assert "Content-Security-Policy" not in http.get("/api/health").headers


def test_a_mistyped_address_is_not_answered_with_the_page(pb: PocketBaseServer) -> None:
    http = pb.anonymous()
    for path in ("/api/transcriber/recordz", "/api/collections/usage_daily/records/a/b", "/nothing-here.js"):
        resp = http.get(path)
        assert resp.status_code == 404, path
        assert resp.json()["code"] == "not_found", path


def test_an_upgrade_is_not_answered_from_the_old_releases_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    public = tmp_path / "pb_public"
    shutil.copytree(ROOT / "pb_public", public)
    for path in public.rglob("*"):
        os.utime(path, (WHEEL_TIME, WHEEL_TIME))
    monkeypatch.setenv("TRANSCRIBER_POCKETBASE__PUBLIC_DIR", str(public))
    monkeypatch.setattr(sidecar, "__version__", "1.0.0")
    with running_pocketbase(tmp_path / "one") as pb:
        first = httpx.get(f"{pb.url}/js/main.js")
    assert first.status_code == 200
    validators = {"If-None-Match": first.headers["ETag"], "If-Modified-Since": first.headers["Last-Modified"]}
    # The next release: other files, the same times (the wheel's). The browser asks with what it has.
    (public / "js" / "main.js").write_text((public / "js" / "main.js").read_text() + "\n// 1.0.1\n")
    os.utime(public / "js" / "main.js", (WHEEL_TIME, WHEEL_TIME))
    monkeypatch.setattr(sidecar, "__version__", "1.0.1")
    with running_pocketbase(tmp_path / "two") as pb:
        upgraded = httpx.get(f"{pb.url}/js/main.js", headers=validators)
        assert upgraded.status_code == 200 and upgraded.text.endswith("// 1.0.1\n")
        assert httpx.get(f"{pb.url}/js/main.js", headers={"If-None-Match": upgraded.headers["ETag"]}).status_code == 304
