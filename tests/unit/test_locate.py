"""Which server a command means when the settings name it (sidecar/serving/locate.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.serving.locate import ServerNotFound, check_reachable, locate, url_of
from sidecar.settings import load_settings
from testkit.pocketbase import free_port


def test_a_listen_address_is_reached_on_loopback_and_a_url_is_kept() -> None:
    assert url_of("0.0.0.0:8090") == "http://127.0.0.1:8090"
    assert url_of("127.0.0.1:9000") == "http://127.0.0.1:9000"
    assert url_of("http://pocketbase:8090/") == "http://pocketbase:8090"


def test_settings_that_name_only_where_serve_listens_are_where_commands_go(tmp_path: Path) -> None:
    """``[pocketbase] http`` alone moves ``serve``; the commands follow it (not the default 8090)."""
    port = free_port()
    cfg = tmp_path / "t.toml"
    cfg.write_text(f'[pocketbase]\nhttp = "0.0.0.0:{port}"\ndata_dir = "{tmp_path / "d"}"\n')
    where = locate(load_settings(cfg))
    assert where.url == f"http://127.0.0.1:{port}"
    assert where.data_dir == tmp_path / "d"
    assert "data_dir in the settings" in where.how
    with pytest.raises(ServerNotFound) as refused:
        check_reachable(where, timeout=2)
    message = str(refused.value)
    assert f"http://127.0.0.1:{port}" in message and "--server HOST:PORT" in message and "--data-dir" in message
