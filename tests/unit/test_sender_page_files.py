"""The sender's page as files: the vendored SDK is the published one, every module it imports is
there, both languages say everything, and the page ships wherever the hooks ship."""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = ROOT / "pb_public"


def test_the_vendored_sdk_is_the_published_one_named_in_the_script() -> None:
    script = (ROOT / "scripts" / "vendor-sdk").read_text()
    (digest,) = re.findall(r"^SHA256=([0-9a-f]{64})$", script, re.M)
    (version,) = re.findall(r"^VERSION=(\S+)$", script, re.M)
    sdk = (PUBLIC / "vendor" / "pocketbase.es.mjs").read_bytes()
    assert hashlib.sha256(sdk).hexdigest() == digest, f"pocketbase.es.mjs is not pocketbase@{version} as published"
    assert (PUBLIC / "vendor" / "pocketbase.LICENSE.md").read_text().startswith("The MIT License")
    checked = subprocess.run([ROOT / "scripts" / "vendor-sdk", "--check"], capture_output=True, text=True, check=False)
    assert checked.returncode == 0 and version in checked.stdout, checked.stderr


def test_every_module_the_page_imports_is_there() -> None:
    index = (PUBLIC / "index.html").read_text()
    referenced = re.findall(r'(?:src|href)="([^"#:]+)"', index)
    assert "js/main.js" in referenced and "app.css" in referenced
    for ref in referenced:
        assert (PUBLIC / ref).is_file(), ref
    for module in (PUBLIC / "js").glob("*.js"):
        for ref in re.findall(r'from "(\.{1,2}/[^"]+)"', module.read_text()):
            assert (module.parent / ref).resolve().is_file(), (module.name, ref)


def _imports(module: Path) -> dict[str, set[str]]:
    """The page's modules that ``module`` imports, each with the names it takes from it ("*" for all)."""
    out: dict[str, set[str]] = {}
    for names, ref in re.findall(r'^import (.+?) from "\./([\w.]+)";$', module.read_text(), re.M | re.S):
        taken = out.setdefault(ref, set())
        if names.startswith("* as "):
            taken.add("*")
        else:
            taken |= {name.strip() for name in names.strip("{} \n").split(",") if name.strip()}
    return out


def test_the_modules_import_one_way_and_only_what_is_exported() -> None:
    """Screens import what the shell shares, never each other in a circle (a module evaluated before one
    it imports would find that one's names unset); every name imported is one the module exports; and
    index.html asks for every module at once, so a screen's module is no extra round trip."""
    modules = {m.name: m for m in (PUBLIC / "js").glob("*.js")}
    graph = {name: _imports(path) for name, path in modules.items()}
    for name, imported in graph.items():
        for ref, names in imported.items():
            assert ref in modules, (name, ref)
            exported = set(
                re.findall(r"^export (?:async )?(?:function|const|let|class) (\w+)", modules[ref].read_text(), re.M)
            )
            assert names - {"*"} <= exported, (name, ref, sorted(names - exported - {"*"}))

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, " -> ".join((*path, name))
        for ref in graph[name]:
            visit(ref, (*path, name))

    visit("main.js", ())
    reached = {"main.js"} | {ref for imported in graph.values() for ref in imported}
    assert reached == set(modules), set(modules) - reached  # no module left behind
    preloaded = set(re.findall(r'<link rel="modulepreload" href="js/([\w.]+)">', (PUBLIC / "index.html").read_text()))
    assert preloaded == set(modules) - {"main.js"}


def _dicts() -> dict[str, dict[str, str]]:
    """The two dictionaries of js/i18n.js, read as the JSON-like literals they are."""
    source = (PUBLIC / "js" / "i18n.js").read_text()
    out = {}
    for name in ("en", "ru"):
        body = re.search(rf"^const {name} = \{{\n(.*?)^\}};", source, re.M | re.S)
        assert body, name
        out[name] = dict(re.findall(r'^\s+"([^"]+)": "((?:[^"\\]|\\.)*)",$', body.group(1), re.M))
    return out


def test_both_languages_say_everything_the_page_asks_for() -> None:
    dicts = _dicts()
    assert set(dicts["en"]) == set(dicts["ru"])
    assert len(dicts["en"]) > 90  # (the reader above missed none)
    page = "\n".join(module.read_text() for module in sorted((PUBLIC / "js").glob("*.js")))
    used = set(re.findall(r'\bt\("([a-z][A-Za-z_.]*[A-Za-z_])"\s*[,)]', page))
    assert used and not used - set(dicts["en"]), sorted(used - set(dicts["en"]))
    # The words for every activity and halt code the server can answer with.
    from sidecar.activity import Activity
    from sidecar.outcome import HaltCode

    for activity in Activity:
        assert f"activity.{activity}" in dicts["ru"], activity

    for code in HaltCode:
        assert f"halt.{code}" in dicts["ru"], code
    # The same placeholders in both languages.
    for key, words in dicts["en"].items():
        assert set(re.findall(r"\{\w+\}", words)) == set(re.findall(r"\{\w+\}", dicts["ru"][key])), key


def test_the_page_ships_with_the_package_and_the_image() -> None:
    assert '"pb_public" = "sidecar/_pb/pb_public"' in (ROOT / "pyproject.toml").read_text()
    assert "COPY pb_public ./pb_public" in (ROOT / "Dockerfile").read_text()
    # The image's own page (inside the installed package): compose neither mounts nor names another.
    compose = (ROOT / "docker-compose.yml").read_text()
    assert "pb_public" not in compose and "PUBLIC_DIR" not in compose
