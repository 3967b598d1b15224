"""A team across hosts: the cluster of ops/cluster.py (network namespaces control, cpu-a, cpu-b and
client, no folder shared, TLS with the cluster's CA, SeaweedFS as the S3 store), built once for
this module, a suite run from `client` across both worker hosts, `cpu-b` killed mid-job, and
`--retry-failed` after it comes back. Every namespace and process is removed after, also on failure.

Needs root (network namespaces, mounts) and PostgreSQL's server binaries; CI runs as root.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ops import cluster
from tasks import paths

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # bench/ is not an installed package
    sys.path.insert(0, str(REPO_ROOT))

from bench import bench_cluster  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.services]

SUITE = "cluster_test"
# The flaky test adapter holds a job in its fit while the hold file exists on the job's own host.
FLAKY = "tests/run_support/flaky_adapter.py"
HOLD = "hold"
MLFLOW_PART = "control/mlflow-server"
SUITE_YAML = """\
description: the cross-host test suite (two tiny frameworks, then the held one)
datasets: [penguins]
frameworks: [constant, hgb]
folds: 2
budget: test
"""


def _usable() -> str | None:
    if os.geteuid() != 0:
        return "the cluster needs root (network namespaces and mounts)"
    if shutil.which("ip") is None or shutil.which("unshare") is None:
        return "the cluster needs iproute2 and util-linux"
    if not list(cluster.POSTGRES_BIN.glob("*/bin/postgres")):
        return "the control host needs PostgreSQL's server binaries"
    return None


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[cluster.ClusterSettings]:
    reason = _usable()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the cross-host test: {reason}")
        pytest.skip(reason)
    project = paths.project_root()
    settings = cluster.ClusterSettings(
        root=tmp_path_factory.mktemp("cluster"), prefix="aet", subnet="10.213.9", project=project,
        extra_env={"AUTOML_EVAL_HEARTBEAT_S": "1", "AUTOML_EVAL_EXTRA_ADAPTERS": str(project / FLAKY),
                   "FLAKY_HOLD": str(project / HOLD), "PREFECT_LOGGING_LEVEL": "WARNING"})
    cluster.stop(settings)  # what a crashed earlier run may have left with these names
    try:
        cluster.up(settings)
        for host in cluster.HOSTS:  # the suite lies in every host's checkout, as if committed
            (settings.outside(host, "specs", "suites") / f"{SUITE}.yaml").write_text(SUITE_YAML)
        yield settings
    finally:
        cluster.down(settings)
        leftover = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert not any(settings.netns(h) in leftover for h in cluster.HOSTS), leftover


def _on(settings: cluster.ClusterSettings, host: str, script: str, timeout_s: float = 300) -> Any:
    """Run a Python script on a host with the team's settings; its last line is JSON."""
    creds = cluster.cluster_credentials(settings)
    done = cluster.run_on(settings, host, [sys.executable, "-c", textwrap.dedent(script)],
                          cluster.host_env(settings, creds, host), timeout_s=timeout_s)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _suite(settings: cluster.ClusterSettings, *args: str) -> subprocess.Popen[str]:
    creds = cluster.cluster_credentials(settings)
    command = [str(Path(sys.executable).parent / "automl-eval"), "run", SUITE, *args]
    return subprocess.Popen(cluster.host_argv(settings, "client", command),
                            env=cluster.host_env(settings, creds, "client"), cwd="/", text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


JOBS_OF_LAST_EXECUTION = """
    import json, mlflow
    client = mlflow.MlflowClient()
    experiment = client.get_experiment_by_name("{suite}")
    executions = [r for r in client.search_runs([experiment.experiment_id], order_by=["start_time DESC"])
                  if "job_key" not in r.data.tags]
    execution = executions[0].info.run_id
    jobs = client.search_runs([experiment.experiment_id], f"tags.execution_id = '{{execution}}'")
    rows = []
    for run in jobs:
        tags = run.data.tags
        if "job_key" not in tags:
            continue
        files = [a.path for a in client.list_artifacts(run.info.run_id)]
        rows.append({{"key": tags["job_key"], "status": tags.get("status"), "host": tags.get("host"),
                     "error": tags.get("error", ""), "run_id": run.info.run_id, "files": files}})
    print(json.dumps({{"execution": execution, "jobs": rows}}))
"""


def _jobs(settings: cluster.ClusterSettings) -> dict[str, Any]:
    return _on(settings, "client", JOBS_OF_LAST_EXECUTION.format(suite=SUITE))


def test_each_host_sees_only_its_own_folders_and_its_own_name(hosts: cluster.ClusterSettings) -> None:
    probe = f"""
        import json, os, socket
        from pathlib import Path
        project, root = Path({str(hosts.project)!r}), {str(hosts.root)!r}
        (project / ".team" / "probe").write_text(socket.gethostname())
        others = {{}}
        for host in {list(cluster.HOSTS)!r}:
            path = Path({str(hosts.root)!r}) / "hosts" / host / "checkout" / "pyproject.toml"
            others[host] = path.exists()
        listed = os.listdir(root) if os.path.isdir(root) else []
        print(json.dumps({{"name": socket.gethostname(), "cluster_folder": listed,
                          "others": others, "datasets": (project / "datasets").is_dir()}}))
    """
    for host in cluster.DATA_HOSTS:
        seen = _on(hosts, host, probe)
        assert seen["name"] == host
        assert seen["cluster_folder"] == [] and not any(seen["others"].values()), seen
        assert seen["datasets"], f"{host} pulled no datasets/"
        # Its write landed in its own folder only: not in the operator's checkout, not on another host.
        assert hosts.outside(host, ".team", "probe").read_text() == host
        for other in cluster.HOSTS:
            if other != host:
                probe_file = hosts.outside(other, ".team", "probe")
                assert not probe_file.exists() or probe_file.read_text() == other
    assert not (hosts.project / ".team" / "probe").exists()


def test_servers_listen_on_the_control_address_behind_tls_that_clients_verify(
        hosts: cluster.ClusterSettings) -> None:
    listening = subprocess.run(["ip", "netns", "exec", hosts.netns("control"), "ss", "-Hltn"],
                               capture_output=True, text=True).stdout
    sockets = {line.split()[3] for line in listening.splitlines()}
    for port in (hosts.prefect_port, hosts.mlflow_port, hosts.s3_port):
        assert f"{hosts.control}:{port}" in sockets, (port, sockets)
    # Nothing listens on every address: the store's own parts stay on control's loopback.
    assert all(s.rsplit(":", 1)[0] in (hosts.control, "127.0.0.1") for s in sockets), sockets
    url = f"https://{hosts.control}:{hosts.prefect_port}/api/health"
    with urllib.request.urlopen(url, context=ssl.create_default_context(cafile=str(hosts.ca_file)),
                                timeout=20) as answer:
        assert answer.status == 200
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(url, context=ssl.create_default_context(), timeout=20)  # not the cluster's CA
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(f"http://{hosts.control}:{hosts.prefect_port}/api/health", timeout=20)
    # The store refuses a wrong secret, and the team's key cannot reach MLflow's artifacts bucket.
    creds = cluster.cluster_credentials(hosts)
    wrong = dict(creds)
    key_name = "AUTOML_EVAL_S3_TEAM_SECRET"
    wrong[key_name] = "not-the-secret"
    with pytest.raises(Exception, match="SignatureDoesNotMatch|Forbidden|403"):
        cluster.s3_client(hosts, wrong).head_bucket(Bucket=cluster.RESULTS_BUCKET)
    with pytest.raises(Exception, match="Forbidden|403|AccessDenied"):
        cluster.s3_client(hosts, creds).head_bucket(Bucket=cluster.ARTIFACTS_BUCKET)
    # No secret in any host's logs.
    logs = "".join(p.read_text(errors="replace")
                   for p in hosts.root.glob("hosts/*/checkout/.team/logs/*.log"))
    assert logs
    for name, secret in creds.items():
        assert secret not in logs, name


def test_a_suite_from_client_runs_on_both_worker_hosts_and_reads_back_through_mlflow(
        hosts: cluster.ClusterSettings) -> None:
    suite = _suite(hosts, "--new")
    output, _ = suite.communicate(timeout=600)
    assert suite.returncode == 0, output[-3000:]
    recorded = _jobs(hosts)
    jobs = recorded["jobs"]
    assert len(jobs) == len({j["key"] for j in jobs}) == 4, jobs
    assert {j["status"] for j in jobs} == {"ok"}, jobs
    assert {j["host"] for j in jobs} == set(cluster.WORKER_HOSTS), "both worker hosts take jobs"
    # Each job's folder is on the host that ran it, and on no other.
    for job in jobs:
        for host in cluster.DATA_HOSTS:
            folders = list(hosts.outside(host, "runs").glob(f"**/{job['key']}")) if host != "client" else []
            assert bool(folders) == (host == job["host"]), (job["key"], host)
    # From client, every job's artifacts come back through the MLflow server's proxy (S3 behind it).
    first = jobs[0]
    assert first["files"], first
    fetched = _on(hosts, "client", f"""
        import json, mlflow, os
        path = mlflow.artifacts.download_artifacts(run_id={first['run_id']!r},
                                                   artifact_path={first['files'][0]!r})
        sizes = [os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs]
        print(json.dumps({{"bytes": sum(sizes) if os.path.isdir(path) else os.path.getsize(path)}}))
    """)
    assert fetched["bytes"] > 0
    server = cluster.s3_client(hosts, cluster.cluster_credentials(hosts), cluster.SERVER_S3_USER)
    objects = server.list_objects_v2(Bucket=cluster.ARTIFACTS_BUCKET, Prefix="mlflow/")
    assert objects.get("KeyCount", 0) > 0, "MLflow's artifacts are not in the store"


NIGHTLY_FROM_CLIENT = """
    import json
    from prefect.deployments import run_deployment
    run = run_deployment("automl-eval-nightly/nightly", parameters={{"suite": "{suite}", "team": "nightly"}},
                         timeout=600, poll_interval=3)
    print(json.dumps({{"state": run.state.type.value, "message": run.state.message or ""}}))
"""


def test_the_nightly_deployment_runs_on_its_flow_worker_and_both_worker_hosts(
        hosts: cluster.ClusterSettings) -> None:
    """`cluster up` registered the deployments from client and started their process worker there;
    a nightly triggered through the Prefect server runs its suite on that worker, and its jobs on
    both worker hosts, each recorded once."""
    ran = _on(hosts, "client", NIGHTLY_FROM_CLIENT.format(suite=SUITE), timeout_s=700)
    assert ran["state"] == "COMPLETED", ran
    jobs = _jobs(hosts)["jobs"]
    assert len(jobs) == len({j["key"] for j in jobs}) == 4, jobs
    assert {j["status"] for j in jobs} == {"ok"}, jobs
    assert {j["host"] for j in jobs} == set(cluster.WORKER_HOSTS), "both worker hosts take the nightly's jobs"


def _holder(hosts: cluster.ClusterSettings, suite: subprocess.Popen[str]) -> str:
    """The worker host to kill: one with a job process (more than its worker and fork server),
    once both jobs are out or a few seconds after the first (a worker may hold both)."""
    deadline, first_seen = time.monotonic() + 300, 0.0
    while time.monotonic() < deadline and suite.poll() is None:
        busy = [h for h in cluster.WORKER_HOSTS if len(cluster.host_pids(hosts, h)) > 2]
        if busy:
            first_seen = first_seen or time.monotonic()
            if len(busy) == 2 or time.monotonic() - first_seen > 5:
                time.sleep(1.0)  # mid-job: its worker has taken it and told the hosts so
                return "cpu-b" if "cpu-b" in busy else busy[0]
        time.sleep(0.3)
    pytest.fail(f"no worker host ever held a job: {suite.communicate(timeout=60)[0][-2000:]}")


LostJobs = tuple[str, dict[str, Any], list[Any], float]  # the struck host, jobs, those lost, seconds


def _lose_a_held_job(hosts: cluster.ClusterSettings, fault: Callable[[str], None],
                     mend: Callable[[str], None] | None = None) -> LostJobs:
    """A suite of two held jobs; `fault` strikes the host of one mid-job while the other goes on, and
    `mend` (if any) undoes it once the suite ended. The suite must end and record the struck host's
    jobs lost: (that host, the jobs recorded, those lost, seconds from the fault to the suite's end)."""
    for host in cluster.WORKER_HOSTS:
        hosts.outside(host, HOLD).touch()
    suite = _suite(hosts, "--new", "--frameworks", "flaky", "--folds", "2")
    victim = ""
    try:
        victim = _holder(hosts, suite)
        survivor = next(h for h in cluster.WORKER_HOSTS if h != victim)
        fault(victim)
        struck_at = time.monotonic()
        hosts.outside(survivor, HOLD).unlink()  # what the other host holds goes on
        output, _ = suite.communicate(timeout=300)
        noticed_s = time.monotonic() - struck_at
    finally:
        if victim and mend is not None:
            mend(victim)
        for host in cluster.WORKER_HOSTS:
            hosts.outside(host, HOLD).unlink(missing_ok=True)
        if suite.poll() is None:
            suite.kill()
    assert suite.returncode == 0, output[-3000:]
    first = _jobs(hosts)
    lost = [j for j in first["jobs"] if j["status"] == "failed"]
    assert lost and all("lost" in j["error"] and victim in j["error"] for j in lost), first
    return victim, first, lost, noticed_s


def _retry_failed_once(hosts: cluster.ClusterSettings, lost: list[Any]) -> dict[str, Any]:
    """`--retry-failed` runs exactly the lost jobs, and every job key ends with one run, `ok`."""
    rerun = _suite(hosts, "--retry-failed", "--frameworks", "flaky", "--folds", "2")
    output, _ = rerun.communicate(timeout=400)
    assert rerun.returncode == 0, output[-3000:]
    assert f"ran {len(lost)} now" in output, output[-2000:]
    after = _jobs(hosts)
    keys = [j["key"] for j in after["jobs"]]
    assert len(keys) == len(set(keys)) == 2, "a job key has two live runs"
    assert {j["status"] for j in after["jobs"]} == {"ok"}
    return after


def test_a_host_killed_mid_job_is_recorded_lost_then_retried_on_the_other_once(
        hosts: cluster.ClusterSettings) -> None:
    def kill(host: str) -> None:
        assert cluster.kill_host(hosts, host) >= 2  # every process of the host, its job's included

    victim, first, lost, noticed_s = _lose_a_held_job(hosts, kill)
    print(f"{victim} killed; the suite ended {noticed_s:.1f} s later")
    cluster.restart_worker(hosts, victim)  # the machine comes back
    after = _retry_failed_once(hosts, lost)
    assert after["execution"] == first["execution"]


@pytest.mark.heavy  # about a minute and a half: the held job, the retry, and the late one's end
def test_a_host_cut_off_mid_job_is_lost_and_its_late_end_records_nothing(
        hosts: cluster.ClusterSettings) -> None:
    """A worker host's link taken down mid-job (its cable pulled; its processes live on): the suite
    records the job lost within the heartbeat bound and ends. With the link back, the cut-off worker
    finishes that job and records nothing (the suite gave its task run up); `--retry-failed` then
    runs it once, and no job key ever has two runs."""
    victim, first, lost, noticed_s = _lose_a_held_job(
        hosts, lambda host: cluster.link(hosts, host, up=False),
        mend=lambda host: cluster.link(hosts, host, up=True))  # the cut-off job ends too, late
    print(f"{victim} cut off; the suite ended {noticed_s:.1f} s later")

    # The cut-off worker, its link back, ends the job it held: its job process goes, its record not.
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and len(cluster.host_pids(hosts, victim)) > 2:
        time.sleep(1)
    assert len(cluster.host_pids(hosts, victim)) <= 2, "the cut-off worker never ended its job"
    time.sleep(10)  # the time a late record would take to arrive
    late = _jobs(hosts)
    assert sorted((j["key"], j["status"]) for j in late["jobs"]) == sorted(
        (j["key"], j["status"]) for j in first["jobs"]), "the cut-off worker recorded its job after all"
    _retry_failed_once(hosts, lost)


def test_the_store_hanging_and_mlflow_restarting_mid_suite_lose_no_record(
        hosts: cluster.ClusterSettings) -> None:
    """The object store (its node and S3 gateway) frozen for 30 s, and the MLflow server stopped and
    started again within them, while both jobs finish: their results (Prefect's result storage) and
    records (MLflow, its artifacts through the server's proxy) wait or retry, each worker's breaker
    brings its records in once the server answers, and every job ends recorded once, `ok`, readable
    from client."""
    for host in cluster.WORKER_HOSTS:
        hosts.outside(host, HOLD).touch()
    suite = _suite(hosts, "--new", "--frameworks", "flaky", "--folds", "2")
    frozen_at = 0.0
    mlflow_stopped = False
    try:
        _holder(hosts, suite)
        assert cluster.pause_parts(hosts, cluster.STORE_PARTS, paused=True) >= 2
        frozen_at = time.monotonic()
        assert cluster.stop_part(hosts, MLFLOW_PART) >= 1
        mlflow_stopped = True
        for host in cluster.WORKER_HOSTS:  # both jobs end now, with the store and MLflow away
            hosts.outside(host, HOLD).unlink()
        time.sleep(max(0.0, 10 - (time.monotonic() - frozen_at)))
        cluster.restart_mlflow_server(hosts)
        mlflow_stopped = False
        time.sleep(max(0.0, 30 - (time.monotonic() - frozen_at)))
    finally:
        cluster.pause_parts(hosts, cluster.STORE_PARTS, paused=False)
        if mlflow_stopped:  # the test failed between the two: the later tests need the server
            cluster.restart_mlflow_server(hosts)
        for host in cluster.WORKER_HOSTS:
            hosts.outside(host, HOLD).unlink(missing_ok=True)
    output, _ = suite.communicate(timeout=400)
    ended_s = time.monotonic() - frozen_at
    assert suite.returncode == 0, output[-3000:]
    # A record that waited on a worker's disk goes in when that worker's probe sees the store again.
    deadline = time.monotonic() + 120
    while True:
        jobs = _jobs(hosts)["jobs"]
        if len(jobs) == 2 and {j["status"] for j in jobs} == {"ok"} or time.monotonic() > deadline:
            break
        time.sleep(3)
    lines = [line for host in cluster.WORKER_HOSTS
             for line in hosts.outside(host, ".team", "logs", "team-worker.log").read_text().splitlines()]
    waited = [line for line in lines if "wait" in line.lower() and "store" in line.lower()]
    print(f"store frozen 30 s, MLflow restarted within them; the suite ended {ended_s:.0f} s after the "
          f"freeze began; jobs: {[(j['host'], j['status'], j['files']) for j in jobs]}; worker lines on "
          f"waiting: {waited[-4:]}")
    # The restart was felt: a record found the server away and waited for the breaker's probe.
    assert any("unreachable" in line and "wait on disk" in line for line in lines), lines[-20:]
    assert len(jobs) == len({j["key"] for j in jobs}) == 2, jobs
    assert {j["status"] for j in jobs} == {"ok"}, jobs
    assert all("predictions.csv" in j["files"] for j in jobs), jobs  # the artifacts made it to the store


@pytest.mark.heavy  # about two minutes, most of them waiting out the store's bound
def test_a_store_hung_past_its_bound_fails_the_suite_in_one_sentence_and_a_rerun_completes(
        hosts: cluster.ClusterSettings) -> None:
    """The object store frozen for longer than its clients wait (50 to 80 s a call, the result-storage
    block's bound: ops/cluster.py, save_result_block): the suite cannot hand its first job's
    parameters to the store, says so in one sentence naming the store, and records nothing; with the
    store back, running the suite again resumes that execution and records each job once, `ok`."""
    # Both workers serving first: a worker starting while the store is frozen waits on its probe of the
    # store and never comes online (this test may be the first on a fresh cluster: make test-heavy).
    bench_cluster._wait_for_workers(hosts, set(cluster.WORKER_HOSTS))
    assert cluster.pause_parts(hosts, cluster.STORE_PARTS, paused=True) >= 2
    try:
        started = time.monotonic()
        suite = _suite(hosts, "--new", "--frameworks", "constant", "--folds", "2")
        output, _ = suite.communicate(timeout=400)
        failed_after_s = time.monotonic() - started
    finally:
        cluster.pause_parts(hosts, cluster.STORE_PARTS, paused=False)
    print(f"store frozen: the suite failed after {failed_after_s:.0f} s: {output.strip().splitlines()[-1:]}")
    assert suite.returncode != 0, output[-3000:]
    said = " ".join(output.split())  # the console wraps long lines
    assert "the team's object store (Prefect block" in said, output[-3000:]
    assert "did not take its parameters within its retries" in said, output[-3000:]
    assert "run the suite again" in said, output[-3000:]
    assert _jobs(hosts)["jobs"] == [], "a job was recorded although none ran"

    rerun = _suite(hosts, "--frameworks", "constant", "--folds", "2")  # resumes the execution
    output, _ = rerun.communicate(timeout=400)
    assert rerun.returncode == 0, output[-3000:]
    jobs = _jobs(hosts)["jobs"]
    assert len(jobs) == len({j["key"] for j in jobs}) == 2, jobs
    assert {j["status"] for j in jobs} == {"ok"}, jobs


def test_a_worker_whose_data_differs_from_the_pin_refuses_the_job_with_one_sentence(
        hosts: cluster.ClusterSettings) -> None:
    data = hosts.outside("cpu-a", "datasets", "penguins.csv")
    original = data.read_bytes()
    data.write_bytes(original + original.splitlines(keepends=True)[-1])  # one row more: another md5
    cluster.kill_host(hosts, "cpu-b")  # every job goes to cpu-a
    try:
        suite = _suite(hosts, "--new", "--frameworks", "constant", "--folds", "1")
        output, _ = suite.communicate(timeout=400)
    finally:
        data.write_bytes(original)
        cluster.restart_worker(hosts, "cpu-b")
    jobs = _jobs(hosts)["jobs"]
    assert jobs and all(j["status"] == "failed" for j in jobs), output[-2000:]
    for job in jobs:
        assert job["error"].startswith(
            "refused by worker cpu-a on cpu-a: its copy of dataset penguins hashes to"), job["error"]
        assert "automl-eval datasets pull" in job["error"]
    log = hosts.outside("cpu-a", ".team", "logs", "team-worker.log").read_text()
    assert "refused by worker cpu-a on cpu-a" in log


HEARTBEATS = """
    import json
    from dataclasses import asdict
    from prefect.client.orchestration import get_client
    from flows.team_worker import read_heartbeats
    with get_client(sync_client=True) as client:
        print(json.dumps([asdict(beat) for beat in read_heartbeats(client)]))
"""


def _code_of(hosts: cluster.ClusterSettings, name: str, wanted: Callable[[str], bool] = bool) -> str:
    """The code fingerprint the worker's heartbeat gives, once there is one that `wanted` accepts."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        beats = {beat["name"]: beat for beat in _on(hosts, "client", HEARTBEATS)}
        code = beats[name]["code"] if name in beats else ""
        if code and wanted(code):
            return str(code)
        time.sleep(1)
    pytest.fail(f"worker {name} sent no such heartbeat within 120 s")


def test_a_worker_with_other_code_or_a_wrong_credential_is_refused_with_one_sentence(
        hosts: cluster.ClusterSettings) -> None:
    # A wrong MLflow password: the worker refuses to start, in its log and in its heartbeat.
    env = cluster.host_env(hosts, cluster.cluster_credentials(hosts), "cpu-b")
    env.update(MLFLOW_TRACKING_PASSWORD="not-the-password", AUTOML_EVAL_WORKER_NAME="cpu-b-wrong")
    wrong = subprocess.run(cluster.host_argv(hosts, "cpu-b", [sys.executable, "-m", "flows.team_worker",
                                                              "--name", "cpu-b-wrong"]),
                           env=env, cwd="/", capture_output=True, text=True, timeout=300)
    said = wrong.stdout + wrong.stderr
    assert wrong.returncode == 2, said[-2000:]
    assert (f"worker cpu-b-wrong on cpu-b refuses to serve: the MLflow server https://{hosts.control}"
            in said and "refused this worker's credential" in said), said[-2000:]
    assert "not-the-password" not in said

    # Other code on cpu-a (an edit the suite's checkout does not have): it refuses each job it takes.
    same_code = _code_of(hosts, "cpu-a")
    changed = hosts.outside("cpu-a", "flows", "__init__.py")
    original = changed.read_text()
    changed.write_text(original + "# changed on this host only\n")
    try:
        cluster.kill_host(hosts, "cpu-b")  # every job goes to cpu-a
        cluster.kill_host(hosts, "cpu-a")
        cluster.restart_worker(hosts, "cpu-a")
        _code_of(hosts, "cpu-a", lambda code: code != same_code)
        suite = _suite(hosts, "--new", "--frameworks", "constant", "--folds", "1")
        output, _ = suite.communicate(timeout=400)
    finally:
        changed.write_text(original)
        cluster.kill_host(hosts, "cpu-a")
        cluster.restart_worker(hosts, "cpu-a")
        cluster.restart_worker(hosts, "cpu-b")
        _code_of(hosts, "cpu-a", lambda code: code == same_code)  # the later tests get the suite's code
    # The suite's own output names both workers it cannot count on.
    assert "worker cpu-a on cpu-a runs other code than this suite" in output, output[-3000:]
    assert "worker cpu-b-wrong on cpu-b refused to start" in output, output[-3000:]
    jobs = _jobs(hosts)["jobs"]
    assert jobs and all(j["status"] == "failed" for j in jobs), output[-2000:]
    for job in jobs:
        assert job["error"].startswith("refused by worker cpu-a on cpu-a: its code (tasks/ and flows/"), job
        assert "--retry-failed" in job["error"]
    log = hosts.outside("cpu-a", ".team", "logs", "team-worker.log").read_text()
    assert "refused by worker cpu-a on cpu-a: its code" in log


@pytest.mark.heavy  # the benchmark's smoke run, as every benchmark's (about a minute and a half)
def test_the_control_plane_benchmark_runs_on_this_cluster(hosts: cluster.ClusterSettings) -> None:
    """bench.bench_cluster's smoke run (its SMOKE_ELSEWHERE): its measurement on this cluster, two
    workers, two jobs, then its report over job runs written into control's MLflow database and read
    from client over HTTPS (1,000 runs here: the benchmark's shape at one seed). Figures are printed,
    never asserted; that each one is there is, and that the report read every run."""
    figures = bench_cluster.measure(hosts, jobs_count=2, worker_counts=(2,), overhead_jobs=1)
    figures.update(bench_cluster.report_over_http(hosts, 1000))
    for name in ("embedded_per_job_s", "across_hosts_per_job_s", "w2_jobs_per_min", "w2_dispatch_p50_s",
                 "w2_dispatch_p99_s", "w2_control_plane_cpu_s_per_job", "w2_prefect-server_cpu_s_per_job",
                 "w2_mlflow-server_cpu_s_per_job", "w2_postgres_cpu_s_per_job", "w2_seaweedfs_cpu_s_per_job",
                 "report_read_runs_s", "report_build_report_s", "report_total_s"):
        assert name in figures, name
    assert figures["report_runs"] == 1000
    print(figures)
