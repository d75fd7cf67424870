"""The Docker image's files agree with scripts/hbase and with each other, and its
health check speaks Thrift correctly (run against the session's HBase)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from .compose import compose_services
from .conftest import hbase_address

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"


def test_entrypoint_renders_every_placeholder_of_the_template() -> None:
    template = (ROOT / "scripts" / "hbase.d" / "hbase-site.xml.in").read_text()
    template = re.sub(r"<!--.*?-->", "", template, flags=re.DOTALL)
    entrypoint = (DOCKER / "entrypoint").read_text()
    placeholders = set(re.findall(r"@[A-Z0-9_]+@", template))
    assert placeholders, "the template has no placeholders"
    missing = {p for p in placeholders if f"s|{p}|" not in entrypoint}
    assert not missing, f"docker/entrypoint does not substitute {sorted(missing)}"


def test_compose_uses_the_tag_docker_build_makes() -> None:
    tag = subprocess.run(
        [str(DOCKER / "build"), "--print-tag"], capture_output=True, text=True, check=True
    ).stdout.strip()
    compose = (DOCKER / "docker-compose.yml").read_text()
    assert re.fullmatch(r"shdb-hbase:\d+\.\d+\.\d+", tag)
    assert f"image: ${{SHDB_HBASE_IMAGE:-{tag}}}" in compose


def test_cluster_compose_runs_every_role_of_the_tag_docker_build_makes() -> None:
    """docker/cluster-compose.yml: the image docker/build tags, host networking, and one
    service per JVM of scripts/hbase cluster, each mounting the shared dir at its path."""
    tag = subprocess.run(
        [str(DOCKER / "build"), "--print-tag"], capture_output=True, text=True, check=True
    ).stdout.strip()
    services = compose_services("cluster-compose.yml", {"SHDB_HBASE_CLUSTER_DIR": "/x/c"})
    commands = sorted(" ".join(s["command"]) for s in services.values())
    assert commands == [
        "cluster master",
        *(f"cluster regionserver {n}" for n in (1, 2, 3)),
        "cluster thrift",
        "cluster thrift2",
        "cluster zookeeper",
    ]
    for service in services.values():
        assert service["image"] == tag and service["network_mode"] == "host"
        assert service["volumes"] == ["/x/c:/x/c"]
        assert service["environment"] == {"SHDB_HBASE_CLUSTER_DIR": "/x/c"}
        assert service["container_name"].startswith("shdb-cluster-")


def test_image_carries_what_its_cluster_mode_runs() -> None:
    """The cluster mode is scripts/hbase cluster run (no second launcher in the image):
    docker/build puts scripts/hbase, cluster.sh and the cluster template in the image,
    and rebuilds it when one of them changes."""
    build = (DOCKER / "build").read_text()
    start = build.index("INPUTS=(")
    inputs = build[start : build.index(")", start)]
    context = build[build.index("CTX=$(mktemp") :]
    for name in ("$ROOT/scripts/hbase", "$ASSETS/cluster.sh", "$ASSETS/hbase-cluster-site.xml.in"):
        assert f'"{name}"' in inputs and f'"{name}"' in context, name
    entrypoint = (DOCKER / "entrypoint").read_text()
    assert 'exec "$SHDB/hbase" cluster run "$@"' in entrypoint
    assert "hbase-cluster-site.xml.in" not in entrypoint


def _fake_jdk(folder: Path) -> Path:
    """A JAVA_HOME whose java prints its arguments, one a line."""
    java = folder / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\n')
    java.chmod(0o755)
    return folder


@pytest.mark.parametrize(
    ("role", "main", "args"),
    [
        (["zookeeper"], "org.apache.hadoop.hbase.zookeeper.HQuorumPeer", []),
        (["master"], "org.apache.hadoop.hbase.master.HMaster", ["start"]),
        (
            ["regionserver", "2"],
            "org.apache.hadoop.hbase.regionserver.HRegionServer",
            ["-D", "hbase.regionserver.port=17130", "-D", "hbase.regionserver.info.port=17135"],
        ),
        (["thrift"], "org.apache.hadoop.hbase.thrift.ThriftServer", ["-p", "9790"]),
        (["thrift2"], "org.apache.hadoop.hbase.thrift2.ThriftServer", ["-p", "9791"]),
    ],
)
def test_cluster_run_execs_the_role_of_cluster_start(
    tmp_path: Path, role: list[str], main: str, args: list[str]
) -> None:
    """``scripts/hbase cluster run ROLE`` (each container of the image's cluster mode)
    renders the cluster template into the shared dir, with the observer when its jar is
    there, and becomes the JVM of that role (a java that prints its arguments here)."""
    home = tmp_path / "home"
    (home / "observer").mkdir(parents=True)
    (home / "observer" / "shdb-observer.jar").write_bytes(b"")
    shared = tmp_path / "shared"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SHDB_HBASE_")},
        "SHDB_HBASE_HOME": str(home),
        "SHDB_HBASE_CLUSTER_DIR": str(shared),
        "JAVA_HOME": str(_fake_jdk(tmp_path / "jdk")),
    }
    result = subprocess.run(
        [str(ROOT / "scripts" / "hbase"), "cluster", "run", *role],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    argv = result.stdout.splitlines()
    log = f"cluster-{'rs2' if role[0] == 'regionserver' else role[0].replace('zookeeper', 'zk')}"
    assert f"-Dshdb.hbase.role={log}" in argv and f"-Dhbase.log.file={log}.log" in argv
    after = argv[argv.index(main) :]
    assert all(a in after for a in args), after
    site = (shared / "conf" / "hbase-site.xml").read_text()
    assert "@" not in re.sub(r"<!--.*?-->", "", site, flags=re.DOTALL)
    assert f"file://{shared}/data/hbase" in site and "MultiRowGetObserver" in site
    assert "simhash_hbase.observer" in (shared / "conf" / "log4j2.properties").read_text()


@pytest.mark.skipif(
    shutil.which("unshare") is None or os.geteuid() != 0, reason="needs root's unshare"
)
def test_cluster_run_at_once_in_containers_renders_whole_conf(tmp_path: Path) -> None:
    """Compose starts the cluster's containers at once, each rendering the conf into the
    shared dir with its shell as pid 1 (here: a pid namespace each): every one starts."""
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SHDB_HBASE_")},
        "SHDB_HBASE_HOME": str(home),
        "SHDB_HBASE_CLUSTER_DIR": str(tmp_path / "shared"),
        "JAVA_HOME": str(_fake_jdk(tmp_path / "jdk")),
    }
    command = ["unshare", "--pid", "--fork", str(ROOT / "scripts" / "hbase"), "cluster", "run"]
    roles = [["master"], ["thrift"], ["thrift2"], *(["regionserver", str(n)] for n in (1, 2, 3))]
    for _ in range(3):
        runs = [
            subprocess.Popen(
                [*command, *role],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for role in roles
        ]
        errors = [run.communicate(timeout=120)[1] for run in runs]
        assert [run.returncode for run in runs] == [0] * len(runs), errors
    assert "</configuration>" in (tmp_path / "shared" / "conf" / "hbase-site.xml").read_text()


def test_cluster_run_names_the_roles_it_knows(tmp_path: Path) -> None:
    env = {**os.environ, "SHDB_HBASE_HOME": str(tmp_path), "SHDB_HBASE_CLUSTER_DIR": str(tmp_path)}
    result = subprocess.run(
        [str(ROOT / "scripts" / "hbase"), "cluster", "run", "gateway"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 1
    assert "zookeeper, master, regionserver N, thrift or thrift2 (not 'gateway')" in result.stderr


def _healthcheck(port: int, marker: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "SHDB_HBASE_THRIFT_PORT": str(port),
        "SHDB_HBASE_BIND": "127.0.0.1",
        "SHDB_HBASE_INIT_MARKER": str(marker),
    }
    return subprocess.run(
        [str(DOCKER / "healthcheck")], capture_output=True, text=True, env=env, timeout=60
    )


def _free_port_pair() -> int:
    """A port P with P and P+1 both closed (nothing listens there)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port + 1)) != 0:
                return port
    raise AssertionError("no free port pair found")


@pytest.mark.hbase
def test_healthcheck_passes_only_when_both_gateways_answer(tmp_path: Path) -> None:
    port = int(hbase_address().rsplit(":", 1)[1])
    marker = tmp_path / "initialised"
    result = _healthcheck(port, marker)
    assert result.returncode == 1 and "not initialised" in result.stdout
    marker.touch()
    result = _healthcheck(port, marker)
    assert result.returncode == 0, result.stdout + result.stderr
    closed = _healthcheck(_free_port_pair(), marker)
    assert closed.returncode == 1 and "thrift1" in closed.stdout


@pytest.mark.parametrize("role", ["zookeeper", "master", "regionserver", "thrift", "thrift2"])
def test_healthcheck_of_the_cluster_mode(tmp_path: Path, role: str) -> None:
    """A container of the cluster mode: a gateway is unhealthy while its port does not
    answer Thrift (nothing listens here); the other roles are healthy while they run."""
    role_file = tmp_path / "role"
    role_file.write_text(f"{role}\n")
    port = _free_port_pair()
    env = {
        **os.environ,
        "SHDB_HBASE_CLUSTER_ROLE_FILE": str(role_file),
        "SHDB_HBASE_CLUSTER_THRIFT_PORT": str(port),
        "SHDB_HBASE_INIT_MARKER": str(tmp_path / "never"),
    }
    result = subprocess.run(
        [str(DOCKER / "healthcheck")], capture_output=True, text=True, env=env, timeout=60
    )
    if role.startswith("thrift"):
        assert result.returncode == 1 and "does not answer" in result.stdout
    else:
        assert result.returncode == 0 and f"ok: cluster {role}" in result.stdout


def test_healthcheck_fails_on_an_open_port_that_is_not_thrift(tmp_path: Path) -> None:
    """A listening socket is not enough: the check needs a Thrift reply."""
    marker = tmp_path / "initialised"
    marker.touch()
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = int(server.getsockname()[1])
        stop = threading.Event()

        def answer_garbage() -> None:
            server.settimeout(0.2)
            while not stop.is_set():
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    continue
                with conn:
                    conn.recv(256)
                    conn.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\n" + bytes(64))

        thread = threading.Thread(target=answer_garbage)
        thread.start()
        try:
            result = _healthcheck(port, marker)
        finally:
            stop.set()
            thread.join()
    assert result.returncode == 1 and "thrift1" in result.stdout
