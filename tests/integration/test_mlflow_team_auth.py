"""ops/mlflow_app.py on a real MLflow server (`mlflow server --app-name team-auth`, SQLite stores):
basic auth as MLflow's own app enforces it, with the per-request admin check cached, and an admin
flag changed through MLflow's route honoured at once by the server that changed it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

ADMIN, ADMIN_PASSWORD = "admin", "admin-password-for-the-test"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> object:
    folder = tmp_path_factory.mktemp("team-auth")
    config = folder / "basic_auth.ini"
    config.write_text("[mlflow]\ndefault_permission = READ\n"
                      f"database_uri = sqlite:///{folder / 'auth.db'}\n"
                      f"admin_username = {ADMIN}\nadmin_password = {ADMIN_PASSWORD}\n"
                      "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
                      "auth_cache_ttl_seconds = 600\n")
    port = _free_port()
    env = {**os.environ, "MLFLOW_AUTH_CONFIG_PATH": str(config),
           "MLFLOW_FLASK_SERVER_SECRET_KEY": "a-secret-for-the-test",
           "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    mlflow = str(Path(sys.executable).parent / "mlflow")
    log = (folder / "server.log").open("wb")
    process = subprocess.Popen([mlflow, "server", "--app-name", "team-auth", "--host", "127.0.0.1",
                                "--port", str(port), "--workers", "1",
                                "--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}",
                                "--artifacts-destination", str(folder / "artifacts")],
                               env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert process.poll() is None, (folder / "server.log").read_text()[-2000:]
            try:
                if requests.get(f"{url}/health", timeout=2).ok:
                    break
            except requests.ConnectionError:
                time.sleep(0.5)
        else:
            pytest.fail("the MLflow server did not answer within 120 s")
        yield url
    finally:
        os.killpg(process.pid, 15)
        process.wait(timeout=30)
        log.close()


def _create_user(url: str, by: tuple[str, str], username: str) -> requests.Response:
    return requests.post(f"{url}/api/2.0/mlflow/users/create", auth=by, timeout=30,
                         json={"username": username, "password": f"{username}-password-1234"})


def test_auth_is_enforced_and_admin_checks_answer_as_mlflow_does(server: str) -> None:
    assert requests.get(f"{server}/api/2.0/mlflow/experiments/search?max_results=1", timeout=30).status_code \
        == 401
    assert _create_user(server, (ADMIN, ADMIN_PASSWORD), "alice").ok
    alice = ("alice", "alice-password-1234")
    for _ in range(2):  # the second answer comes from the cache: it must be the same refusal
        assert _create_user(server, alice, "mallory").status_code == 403
    assert requests.get(f"{server}/api/2.0/mlflow/experiments/search?max_results=1", auth=alice,
                        timeout=30).ok


def test_an_admin_flag_changed_through_mlflow_is_honoured_at_once(server: str) -> None:
    assert _create_user(server, (ADMIN, ADMIN_PASSWORD), "bob").ok
    bob = ("bob", "bob-password-1234")
    assert _create_user(server, bob, "carol").status_code == 403  # not an admin: cached as such
    promoted = requests.patch(f"{server}/api/2.0/mlflow/users/update-admin", auth=(ADMIN, ADMIN_PASSWORD),
                              json={"username": "bob", "is_admin": True}, timeout=30)
    assert promoted.ok
    assert _create_user(server, bob, "carol").ok  # one worker process: the change cleared its cache
