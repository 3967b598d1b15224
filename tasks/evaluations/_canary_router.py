"""The canary's router: one address in front of two model versions (a grey release).

`python -m tasks.evaluations._canary_router PORT PRIMARY_URL CANARY_URL SHARE SEED` serves a minimal
ASGI app on 127.0.0.1 (uvicorn, one worker): POST /invocations goes to the canary's server with
probability SHARE (a seeded draw per request), otherwise to the primary's, and the upstream's answer
is passed back as it is. Per version the router keeps each answer's latency (from its forward to
the upstream's last byte) and whether it failed (no answer, or an HTTP status other than 200);
GET /stats gives them, GET /ping answers 200. The load never knows two versions are behind it.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Callable
from typing import Any

HEADERS = [(b"content-type", b"application/json")]
VERSIONS = ("primary", "canary")
UPSTREAM_TIMEOUT_S = 30.0


class Tally:
    """What the router saw of one version: answer latencies (ms), failures and the first error."""

    def __init__(self) -> None:
        self.requests = 0  # routed to this version, answered or not
        self.latencies_ms: list[float] = []  # of those answered (any HTTP status)
        self.failures = 0
        self.first_error = ""

    def to_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "latencies_ms": self.latencies_ms, "failures": self.failures,
                "first_error": self.first_error}


def router_app(upstreams: dict[str, str], share: float, seed: int) -> Callable[..., Any]:
    """The ASGI app: `upstreams` maps primary and canary to their base URLs."""
    import httpx  # the router's own process only

    draw = random.Random(seed)
    tallies = {version: Tally() for version in VERSIONS}
    clients: dict[str, httpx.AsyncClient] = {}

    async def forward(version: str, path: str, body: bytes) -> tuple[int, bytes]:
        client = clients.get(version)
        if client is None:  # made on the first request: the server runs without lifespan events
            client = clients[version] = httpx.AsyncClient(
                base_url=upstreams[version], timeout=UPSTREAM_TIMEOUT_S,
                limits=httpx.Limits(max_connections=256, max_keepalive_connections=64))
        tally = tallies[version]
        tally.requests += 1
        started = time.perf_counter()
        try:
            answer = await client.post(path, content=body, headers={"Content-Type": "application/json"})
        except httpx.HTTPError as exc:
            tally.failures += 1
            tally.first_error = tally.first_error or f"no answer: {exc!r}"[:300]
            return 502, json.dumps({"message": f"the {version} version did not answer: {exc!r}"}).encode()
        tally.latencies_ms.append((time.perf_counter() - started) * 1000)
        if answer.status_code != 200:
            tally.failures += 1
            tally.first_error = tally.first_error or f"HTTP {answer.status_code}: {answer.text[:300]}"
        return answer.status_code, answer.content

    async def app(scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] != "http":
            return
        method, path = scope["method"], scope["path"]
        status, data = 404, json.dumps({"message": f"no route {method} {path}"}).encode()
        if (method, path) == ("GET", "/ping"):
            status, data = 200, b"{}"
        elif (method, path) == ("GET", "/stats"):
            stats = {version: tally.to_dict() for version, tally in tallies.items()}
            status, data = 200, json.dumps(stats).encode()
        elif method == "POST":
            body, more = b"", True
            while more:
                message = await receive()
                body += message.get("body", b"")
                more = message.get("more_body", False)
            version = "canary" if draw.random() < share else "primary"
            status, data = await forward(version, path, body)
        await send({"type": "http.response.start", "status": status, "headers": HEADERS})
        await send({"type": "http.response.body", "body": data})

    return app


def main(argv: list[str]) -> int:
    import uvicorn  # the router's own process only

    port, primary, canary, share, seed = int(argv[1]), argv[2], argv[3], float(argv[4]), int(argv[5])
    app = router_app({"primary": primary, "canary": canary}, share, seed)
    uvicorn.run(app, host="127.0.0.1", port=port, lifespan="off", log_level="warning", access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
