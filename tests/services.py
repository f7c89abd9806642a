"""Real servers for the tests, started and stopped by the test set-up itself: PostgreSQL and a Spark cluster.

* :class:`PostgresServer`: the Debian ``postgresql`` package's server (installed with ``apt-get`` when
  missing and the tests run as root), ``initdb`` into a temporary directory, started on a free port of
  127.0.0.1 with password authentication over TCP, stopped and deleted at the end.  Run as root, the
  server runs as the ``postgres`` user (PostgreSQL refuses to run as root).
* :class:`SparkCluster`: a Spark standalone master and two workers, each a JVM of its own started
  with the pyspark installation's ``spark-class``, on free ports of 127.0.0.1; an application on
  ``spark://127.0.0.1:<port>`` gets one executor JVM per worker.

Both raise :class:`Unavailable` (the caller skips with its message) only when what they need cannot
be had: the server binary cannot be installed, or Java or pyspark is missing.  Any other failure to
start is an error, with the server's log in the message.

    python tests/services.py postgres   # start one, print its URL, stop it on Enter (for trying things)
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["PostgresServer", "SparkCluster", "Unavailable", "free_port", "stop_leftovers"]


class Unavailable(RuntimeError):
    """What a service needs cannot be installed or found here; the message says what."""


def free_port() -> int:
    """A TCP port of 127.0.0.1 that was free a moment ago (the caller retries if it is taken since)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---- PostgreSQL ---------------------------------------------------------------------------------
def _postgres_bindir() -> Path | None:
    """The directory holding initdb, pg_ctl and postgres: on the PATH, or Debian's /usr/lib/postgresql/N/bin."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(os.path.realpath(found)).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                        key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0)
    return Path(candidates[-1]).parent if candidates else None


def _install_postgres() -> str | None:
    """Install Debian's postgresql package; None on success, else why not."""
    if os.name != "posix" or os.geteuid() != 0:
        return "the PostgreSQL server is not installed and the tests do not run as root to install it"
    if shutil.which("apt-get") is None:
        return "the PostgreSQL server is not installed and there is no apt-get to install it"
    # the package would create and start a default cluster on port 5432; the tests start their own
    conf = Path("/etc/postgresql-common/createcluster.conf")
    if not conf.exists():
        conf.parent.mkdir(parents=True, exist_ok=True)
        conf.write_text("create_main_cluster = false\n")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    before = _online_clusters()
    cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "postgresql"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:  # an old package list: update once and retry
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, text=True, timeout=900)
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    for version, name in _online_clusters() - before:  # a default cluster the package started after all: stop it
        subprocess.run(["pg_ctlcluster", version, name, "stop"], capture_output=True, timeout=120)
    if done.returncode != 0:
        return f"apt-get install postgresql failed: {(done.stderr or done.stdout).strip().splitlines()[-1:]}"
    return None


def _online_clusters() -> set[tuple[str, str]]:
    """(version, name) of the Debian-managed clusters running now (none where pg_lsclusters is missing)."""
    if shutil.which("pg_lsclusters") is None:
        return set()
    out = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True, timeout=60).stdout
    return {(f[0], f[1]) for f in (line.split() for line in out.splitlines()) if len(f) > 3 and f[3] == "online"}


class PostgresServer:
    """A PostgreSQL server of its own for one test session (see the module docstring).

    ``url(dbname)`` is a URL with the administrator's password; ``create_database()`` makes a fresh
    empty database and returns its URL; ``restart(mode)`` stops and starts the server (``immediate``:
    no shutdown checkpoint, so the restart runs crash recovery from the write-ahead log);
    ``stop()`` stops it and deletes its directory.
    """

    USER = "dpkit_admin"

    def __init__(self, bindir: Path, root: Path, port: int, password: str, run_as: str | None) -> None:
        self.bindir, self.root, self.port, self.password, self.run_as = bindir, root, port, password, run_as
        self.data, self.log = root / "data", root / "server.log"
        self._databases = 0

    @classmethod
    def start(cls) -> PostgresServer:
        bindir = _postgres_bindir()
        if bindir is None:
            why = _install_postgres()
            bindir = _postgres_bindir()
            if bindir is None:
                raise Unavailable(why or "apt-get installed postgresql but no pg_ctl was found")
        run_as = None
        if os.name == "posix" and os.geteuid() == 0:  # postgres refuses to run as root
            import pwd

            try:
                pwd.getpwnam("postgres")
            except KeyError:
                raise Unavailable("running as root and there is no 'postgres' user to run the server as") from None
            run_as = "postgres"
        root = Path(tempfile.mkdtemp(prefix="dpkit-pg-"))
        try:
            if run_as:
                shutil.chown(root, user=run_as)
            password = secrets.token_hex(16)
            pwfile = root / "pw"
            pwfile.write_text(password + "\n")
            if run_as:
                shutil.chown(pwfile, user=run_as)
            cls._run(run_as, [str(bindir / "initdb"), "-D", str(root / "data"), "-U", cls.USER, "-E", "UTF8",
                              "--locale=C", "--auth-local=trust", "--auth-host=scram-sha-256",
                              f"--pwfile={pwfile}", "--no-sync", "--no-instructions"], root)
            pwfile.unlink()
            for attempt in range(3):  # a free port may be taken by someone else before the server binds it
                server = cls(bindir, root, free_port(), password, run_as)
                try:
                    server._pg_ctl("start", "-o", f"-p {server.port} -k {root} -c listen_addresses=127.0.0.1"
                                   " -c max_connections=150 -c shared_buffers=32MB")
                    return server
                except RuntimeError:
                    if attempt == 2:
                        raise
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise
        raise AssertionError("unreachable")

    @staticmethod
    def _run(run_as: str | None, cmd: list[str], cwd: Path, timeout: float = 120.0) -> str:
        done = subprocess.run(cmd, cwd=cwd, user=run_as, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{Path(cmd[0]).name} failed ({done.returncode}): {done.stderr.strip() or done.stdout}")
        return done.stdout

    def _pg_ctl(self, action: str, *extra: str) -> None:
        try:
            self._run(self.run_as, [str(self.bindir / "pg_ctl"), action, "-D", str(self.data), "-l", str(self.log),
                                    "-w", "-t", "120", *extra], self.root, timeout=180)
        except RuntimeError as exc:
            log = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
            raise RuntimeError(f"{exc}\nserver log:\n{log}") from None

    def url(self, dbname: str = "postgres", *, user: str | None = None, password: str | None = None) -> str:
        return (f"postgresql://{user or self.USER}:{self.password if password is None else password}"
                f"@127.0.0.1:{self.port}/{dbname}")

    def connect(self, dbname: str = "postgres") -> Any:
        """An autocommit psycopg connection as the administrator (close it)."""
        import psycopg

        return psycopg.connect(self.url(dbname), autocommit=True)

    def create_database(self, prefix: str = "t") -> str:
        self._databases += 1
        name = f"{prefix}_{os.getpid()}_{self._databases}"
        with self.connect() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def restart(self, mode: str = "immediate") -> None:
        self._pg_ctl("restart", "-m", mode)

    def stop(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._pg_ctl("stop", "-m", "immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


# ---- Spark standalone ---------------------------------------------------------------------------
class SparkCluster:
    """A Spark standalone master and ``workers`` workers, separate JVMs on 127.0.0.1 (see the module docstring).

    ``master_url`` is ``spark://127.0.0.1:<port>``; ``stop()`` ends every JVM it started (and their
    executors, which the workers own) and deletes its directory.
    """

    def __init__(self, root: Path, master_url: str, procs: list[subprocess.Popen[bytes]], logs: list[Path]) -> None:
        self.root, self.master_url, self.procs, self.logs = root, master_url, procs, logs

    @staticmethod
    def spark_home() -> Path:
        try:
            import pyspark
        except ImportError:
            raise Unavailable("pyspark is not installed") from None
        if shutil.which("java") is None:
            raise Unavailable("Spark needs Java 17 on the PATH")
        return Path(pyspark.__file__).parent

    @classmethod
    def start(cls, workers: int = 2, cores: int = 1, memory: str = "1g", timeout: float = 180.0,
              root: Path | None = None) -> SparkCluster:
        """Start the daemons of the pyspark this interpreter imports; ``root`` (made if missing) holds their logs."""
        home = cls.spark_home()
        root = Path(tempfile.mkdtemp(prefix="dpkit-spark-")) if root is None else Path(root)
        root.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, SPARK_HOME=str(home), SPARK_DAEMON_MEMORY="256m", SPARK_LOG_DIR=str(root),
                   SPARK_WORKER_DIR=str(root / "work"), PYSPARK_PYTHON=sys.executable,
                   SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1",
                   # the marker lets stop_leftovers find the daemons if this process dies without stop()
                   SPARK_DAEMON_JAVA_OPTS=f"-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Ddpkit.cluster={root}")
        spark_class = str(home / "bin" / "spark-class")
        procs: list[subprocess.Popen[bytes]] = []
        logs: list[Path] = []

        def launch(name: str, *args: str) -> Path:
            log = root / f"{name}.log"
            with open(log, "wb") as out:
                procs.append(subprocess.Popen([spark_class, *args], env=env, stdout=out, stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL, start_new_session=True))
            logs.append(log)
            return log

        cluster = None
        try:
            port = free_port()
            master_log = launch("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                "--port", str(port), "--webui-port", str(free_port()))
            master_url = f"spark://127.0.0.1:{port}"
            cluster = cls(root, master_url, procs, logs)
            cluster._wait_for(master_log, "I have been elected leader", timeout)
            worker_logs = [launch(f"worker{i}", "org.apache.spark.deploy.worker.Worker", master_url,
                                  "--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                                  "--webui-port", str(free_port()), "--work-dir", str(root / f"work{i}"))
                           for i in range(workers)]
            for log in worker_logs:
                cluster._wait_for(log, "Successfully registered with master", timeout)
            return cluster
        except BaseException:
            if cluster is not None:
                cluster.stop()
            else:
                for p in procs:
                    _end(p)
                shutil.rmtree(root, ignore_errors=True)
            raise

    def _wait_for(self, log: Path, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            content = log.read_text(errors="replace") if log.exists() else ""
            if text in content:
                return
            for p, plog in zip(self.procs, self.logs):
                if p.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited ({p.returncode}); its log:\n"
                                       f"{plog.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)
        raise RuntimeError(
            f"no {text!r} in {log.name} within {timeout:g} s:\n{log.read_text(errors='replace')[-3000:]}"
        )

    def stop(self) -> None:
        for p in reversed(self.procs):  # workers first: they end their executors
            _end(p)
        shutil.rmtree(self.root, ignore_errors=True)


def stop_leftovers(root: Path) -> list[int]:
    """SIGKILL the daemons a :class:`SparkCluster` with this ``root`` left running (its process was killed
    before ``stop()``), found by the marker on their command line; their pids."""
    marker = f"-Ddpkit.cluster={root}".encode() + b"\0"
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "cmdline").read_bytes():
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
        except (OSError, ProcessLookupError):
            continue
    shutil.rmtree(root, ignore_errors=True)
    return killed


def _end(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group the daemon leads (spark-class execs java in it), SIGKILL if it lingers."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=20)
    except ProcessLookupError:
        proc.wait(timeout=20)


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "postgres"
    service: Any = PostgresServer.start() if what == "postgres" else SparkCluster.start()
    print(service.url() if what == "postgres" else service.master_url, flush=True)
    try:
        input("running; press Enter to stop\n")
    finally:
        service.stop()
