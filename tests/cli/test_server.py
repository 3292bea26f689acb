import pytest

from cctk.cli.server import redact, server_command, ui_command, with_password
from cctk.core.errors import CctkError


def test_server_binds_loopback_with_proxied_artifacts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mlruns_config").mkdir()
    (tmp_path / "mlruns_config" / "server.toml").write_text(
        'tracking_uri = "http://127.0.0.1:5000"\n[server]\nport = 5000\n'
        'backend_store_uri = "sqlite:///mlruns/server.db"\nartifacts_destination = "mlruns/a"\n'
    )
    command = server_command("server")
    assert command[command.index("--host") + 1] == "127.0.0.1"
    assert "--serve-artifacts" in command
    assert (tmp_path / "mlruns").is_dir()


def test_password_reaches_the_server_only(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CCTK_PG_PASSWORD", "s3cr/et")
    command = server_command("postgres")
    backend = command[command.index("--backend-store-uri") + 1]
    assert backend == "postgresql+psycopg2://cctk:s3cr%2Fet@127.0.0.1:5432/cctk"
    assert "s3cr" not in " ".join(redact(command))


def test_with_password_keeps_uri_without_env(monkeypatch):
    monkeypatch.delenv("CCTK_PG_PASSWORD", raising=False)
    assert with_password("postgresql://u@h:1/d", "CCTK_PG_PASSWORD") == "postgresql://u@h:1/d"


def test_ui_on_embedded_and_not_on_a_server(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # the store's folder is made where the command runs
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    command = ui_command("embedded")
    assert "sqlite:///mlruns/mlflow.db" in command and command[command.index("--host") + 1] == "127.0.0.1"
    with pytest.raises(CctkError, match="is a server"):
        ui_command("server")
    with pytest.raises(CctkError, match="has no \\[server\\] table"):
        server_command("embedded")
