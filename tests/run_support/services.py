"""What a test does when a service it needs is not on this machine."""

from __future__ import annotations

import os

import pytest


def missing_service(reason: str) -> None:
    """Skip on a developer's machine without the service; fail in CI (CI=true), where .ci/run
    provides it, so a service that did not start can never pass as a few skipped tests."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{reason}; CI must provide it", pytrace=False)
    pytest.skip(reason)
