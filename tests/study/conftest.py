"""``corpus`` (test_prepare's), built once a session; ``slurm_cluster``: a single-node Slurm of its own (munged,
slurmctld, slurmd; free ports, own munge socket, CPUs=2), stopped at the end; where it cannot start, its tests are
skipped (failed under CI=true)."""
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import free_port
from study.test_prepare import corpus  # noqa: F401

PROGRAMS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scancel", "srun")
DAEMON_FOLDERS = ("/usr/sbin", "/sbin")
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 15


def _cannot_start(reason: str):
    message = f"a single-node Slurm cannot start here: {reason}"
    if os.environ.get("CI") == "true":
        pytest.fail(message + " (CI=true: the Slurm tests must run; .ci/run installs Slurm and munge)")
    pytest.skip(message)


def _program(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(DAEMON_FOLDERS))


def _tail(path: Path, lines: int = 15) -> str:
    if not path.exists():
        return f"(no {path.name})"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


SLURM_CONF = """\
ClusterName=fsyntaxtest
SlurmctldHost={host}
SlurmctldPort={controller_port}
SlurmdPort={node_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/logs/slurmctld.log
SlurmdLogFile={root}/logs/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
InactiveLimit=0
# scancel sends SIGTERM, which submitit's job ignores, then SIGKILL after KillWait (30 s by default)
KillWait=2
NodeName={host} CPUs=2 RealMemory={memory_mb} State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


class SingleNodeSlurm:
    """The daemons of a cluster under ``root``; ``start`` raises RuntimeError with the logs' tail."""

    def __init__(self, root: Path):
        self.root = root
        self.conf = root / "slurm.conf"
        self.munge = root / "munge"
        self.logs = root / "logs"
        self.processes: list[tuple[str, subprocess.Popen]] = []

    @property
    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def _run(self, *command: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(command, env={**os.environ, **self.env}, capture_output=True, text=True,
                              timeout=timeout)

    def _spawn(self, name: str, command: list[str], **user) -> None:
        log = (self.logs / f"{name}.out").open("w")
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env={**os.environ, **self.env}, **user)
        log.close()
        self.processes.append((name, process))

    def _wait(self, what: str, ready, log: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready():
            for name, process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(f"{name} ended (exit {process.returncode}) before {what}:\n"
                                       f"{_tail(self.logs / f'{name}.out')}\n{_tail(self.logs / log)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no {what} after {START_TIMEOUT_S} s:\n{_tail(self.logs / log)}")
            time.sleep(0.5)

    def start(self) -> None:
        munge_user = pwd.getpwnam("munge")
        for folder in ("state", "spool", "logs", "munge"):
            (self.root / folder).mkdir()
        os.chown(self.munge, munge_user.pw_uid, munge_user.pw_gid)
        self.munge.chmod(0o755)
        as_munge = {"user": munge_user.pw_uid, "group": munge_user.pw_gid, "extra_groups": []}
        key = self.munge / "munge.key"
        made = subprocess.run([_program("mungekey"), "--create", f"--keyfile={key}"], capture_output=True,
                              text=True, **as_munge)
        if made.returncode != 0:
            raise RuntimeError(f"mungekey --create failed: {made.stderr.strip()}")
        socket_path = self.munge / "munge.socket"
        host = socket.gethostname().split(".")[0]
        self.conf.write_text(SLURM_CONF.format(
            host=host, root=self.root, munge_socket=socket_path, controller_port=free_port(),
            node_port=free_port(), memory_mb=os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") >> 20))
        self._spawn("munged", [_program("munged"), "--foreground", f"--socket={socket_path}", f"--key-file={key}",
                               f"--pid-file={self.munge / 'munged.pid'}", f"--log-file={self.munge / 'munged.log'}",
                               f"--seed-file={self.munge / 'munged.seed'}"], **as_munge)
        self._wait("munged's socket", socket_path.exists, "munged.out")
        self._spawn("slurmctld", [_program("slurmctld"), "-D", "-f", str(self.conf)])
        self._wait("answer from slurmctld", lambda: self._run("sinfo", "-h").returncode == 0, "slurmctld.log")
        self._spawn("slurmd", [_program("slurmd"), "-D", "-f", str(self.conf)])
        self._wait(f"idle node {host}", lambda: self._run("sinfo", "-h", "-N", "-o", "%T").stdout.strip() == "idle",
                   "slurmd.log")

    def stop(self) -> None:
        """Cancels the cluster's jobs (their steps would outlive slurmd), then stops the daemons it started."""
        if any(name == "slurmctld" for name, _ in self.processes):
            user = pwd.getpwuid(os.getuid()).pw_name
            self._run("scancel", f"--user={user}")
            deadline = time.monotonic() + STOP_TIMEOUT_S
            while time.monotonic() < deadline and self._run("squeue", "-h", "-o", "%i").stdout.strip():
                time.sleep(0.5)
        for name, process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self.processes = []


@pytest.fixture(scope="session")
def slurm_cluster():
    """{"SLURM_CONF": ...} of a running cluster, also set in os.environ."""
    missing = [name for name in PROGRAMS if _program(name) is None]
    if missing:
        _cannot_start(f"{', '.join(missing)} not installed (apt-get install slurmctld slurmd slurm-client munge)")
    if os.geteuid() != 0:
        _cannot_start("the daemons run as root here (SlurmUser=root), and this is not root")
    try:
        pwd.getpwnam("munge")
    except KeyError:
        _cannot_start("no user 'munge' (made by Debian's munge package)")
    try:
        import submitit  # noqa: F401
    except ImportError:
        _cannot_start("submitit is not installed (pip install -e '.[slurm]')")
    # munged runs as another user: not pytest's tmp_path (0700)
    root = Path(tempfile.mkdtemp(prefix="slurm-test-"))
    root.chmod(0o755)
    cluster = SingleNodeSlurm(root)
    saved = os.environ.get("SLURM_CONF")
    try:
        try:
            cluster.start()
        except (RuntimeError, OSError, subprocess.SubprocessError) as error:
            _cannot_start(str(error))
        os.environ.update(cluster.env)
        yield cluster.env
    finally:
        cluster.stop()
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved
        shutil.rmtree(root, ignore_errors=True)
