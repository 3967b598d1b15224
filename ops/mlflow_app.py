"""The team's MLflow server app: MLflow's basic-auth app, its per-request admin check cached.

Behind basic auth, MLflow asks of every request whether its sender is an admin, and answers by
reading the user, with every permission they hold, from the auth database: a query or more per
request, 14 % of the MLflow server's CPU per job with 50 workers under py-spy (docs/benchmarks.md).
MLflow already caches the password check for `auth_cache_ttl_seconds` (basic_auth.ini, written by
ops/team_stack.py); `create_app` caches the admin flag for as long. A flag changed through MLflow's own
user routes takes effect at once in the server process that changed it (MLflow's cache hook clears
this one too) and within that time in the others, as a changed password does.

Its workers start one at a time: `mlflow server` makes the auth database's tables and admin user
before starting its workers for its own `basic-auth` app only; for another app each worker does it
itself, and two doing it at once on a new database stopped the server (seen once as the cluster came
up: the loser's error made gunicorn shut down).

Served as the `team-auth` MLflow app (pyproject's `mlflow.app` entry point):
`mlflow server --app-name team-auth ...`.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from flask import Flask
from mlflow.server import app as mlflow_app
from mlflow.server import auth
from werkzeug.datastructures import Authorization

_ADMIN_CHECK = "sender_is_admin"  # what MLflow's auth module calls for each request
_INVALIDATE = "_invalidate_user_auth_cache"  # what its user-changing routes call
_admin_flags: dict[str, tuple[float, bool]] = {}  # username -> (when read, is admin)
_lock = threading.Lock()  # gunicorn's threads share the cache


def _cached_admin_check(ttl_s: float) -> Callable[[], bool]:
    def sender_is_admin() -> bool:
        authorization = auth.authenticate_request()
        if not isinstance(authorization, Authorization):  # refused: MLflow answered it before any check
            return False
        username = str(authorization.username)
        now = time.monotonic()
        with _lock:
            known = _admin_flags.get(username)
        if known is not None and now - known[0] < ttl_s:
            return known[1]
        is_admin = bool(auth.store.get_user(username).is_admin)
        with _lock:
            _admin_flags[username] = (now, is_admin)
        return is_admin
    return sender_is_admin


def _also_forgetting(invalidate: Callable[[str], None]) -> Callable[[str], None]:
    def invalidate_user(username: str) -> None:
        invalidate(username)
        with _lock:
            _admin_flags.pop(username, None)
    return invalidate_user


@contextmanager
def _one_worker_at_a_time() -> Iterator[None]:
    """A lock beside the auth config (every worker of one server reads the same config)."""
    config = os.environ.get("MLFLOW_AUTH_CONFIG_PATH")
    folder = Path(config).parent if config else Path(tempfile.gettempdir())
    with (folder / "mlflow-auth-start.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def create_app(app: Flask = mlflow_app) -> Flask:
    """MLflow's basic-auth app, whose admin check reads the database once per user and TTL."""
    for name in (_ADMIN_CHECK, _INVALIDATE):
        if not callable(getattr(auth, name, None)):  # a release that renamed it: say so, do not guess
            raise RuntimeError(f"mlflow.server.auth no longer has {name}; update ops/mlflow_app.py "
                               "for this MLflow release.")
    with _one_worker_at_a_time():  # the auth database's tables and admin user, made once
        flask_app = auth.create_app(app)
    ttl_s = float(auth.auth_config.auth_cache_ttl_seconds)
    if ttl_s > 0:  # without MLflow's own cache, neither is this one kept
        setattr(auth, _ADMIN_CHECK, _cached_admin_check(ttl_s))
        setattr(auth, _INVALIDATE, _also_forgetting(getattr(auth, _INVALIDATE)))
    return flask_app
