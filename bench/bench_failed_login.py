"""Failed-login benchmark (issue #13): password guesses from one address against mqbridge (its default
throttle) and Debian's mosquitto 2.0.11, both reading one password file made by mosquitto_passwd.

For ``--seconds`` per broker, ``--workers`` threads each open a connection from 127.0.0.1, send a 3.1.1
CONNECT with user ``victim`` and a wrong password, read the CONNACK and close, as fast as they can. Counted:
attempts answered per second, the answers by return code, guesses the broker actually checked per
second (mosquitto has no throttle: every answered attempt; mqbridge: CONNACK 4, while 5 is a lockout
answered without checking) and the broker's CPU time (utime + stime from /proc) per attempt. Afterwards
one CONNECT with the right password from the same address says whether the owner still gets in.

    python bench/bench_failed_login.py                 # both brokers, 5 s each, 4 workers
    python bench/bench_failed_login.py -b mqbridge --seconds 10

Results: a table on stdout and bench/results/failed-login-latest.json.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

from probe_limits import Mqbridge  # noqa: E402
from run_broker_bench import MOSQUITTO, Broker, _raise_nofile, _wait_port  # noqa: E402

from bridge.mqtt import packets as P  # noqa: E402

USER, PASSWORD = "victim", "correct horse battery"
CLK_TCK = os.sysconf("SC_CLK_TCK")


class MosquittoPasswd(Broker):
    label = "mosquitto"

    def __init__(self, workdir: Path, passwd: Path) -> None:
        super().__init__(workdir)
        self.passwd = passwd

    def start(self) -> None:
        conf = self.dir / "mosquitto.conf"
        conf.write_text(f"listener {self.port} 127.0.0.1\nallow_anonymous false\npassword_file {self.passwd}\n"
                        f"user root\npersistence false\nlog_dest file {self.dir / 'broker.log'}\n"
                        "log_type error\nlog_type warning\n")
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(conf)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, preexec_fn=_raise_nofile)
        _wait_port(self.port, self.proc)


def mqbridge_passwd(workdir: Path, passwd: Path) -> Mqbridge:
    """This tree's ``mqbridge serve`` with its default limits, reading ``passwd``."""
    return Mqbridge(workdir, ROOT, "mqbridge", {}, broker={"password_file": str(passwd)})


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK   # utime, stime


def attempt(port: int, password: str, n: int) -> int:
    """One CONNECT as USER; the CONNACK return code (-1: closed without one)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(P.encode(P.Connect(P.MQTT_311, f"guess-{n}", True, 60, None, USER, password.encode())))
        data = b""
        while len(data) < 4:
            chunk = s.recv(4 - len(data))
            if not chunk:
                return -1
            data += chunk
        return data[3]


def run(broker: Broker, seconds: float, workers: int) -> dict[str, Any]:
    codes: Counter[int] = Counter()
    lock = threading.Lock()
    stop = time.monotonic() + seconds
    counter = iter(range(10**9))

    def work() -> None:
        mine: Counter[int] = Counter()
        while time.monotonic() < stop:
            n = next(counter)
            try:
                mine[attempt(broker.port, f"guess {n}", n)] += 1
            except OSError:
                mine[-2] += 1
        with lock:
            codes.update(mine)

    cpu0, t0 = cpu_seconds(broker.pid), time.monotonic()
    threads = [threading.Thread(target=work) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed, cpu = time.monotonic() - t0, cpu_seconds(broker.pid) - cpu0
    answered = sum(v for k, v in codes.items() if k >= 0)
    checked = codes[4] if broker.label == "mqbridge" else answered
    owner = attempt(broker.port, PASSWORD, 0)
    return {"broker": broker.label, "seconds": round(elapsed, 2), "attempts": sum(codes.values()),
            "answered_per_s": round(answered / elapsed), "codes": {str(k): v for k, v in sorted(codes.items())},
            "checked": checked, "checked_per_s": round(checked / elapsed, 1),
            "cpu_s": round(cpu, 2), "cpu_ms_per_attempt": round(1000 * cpu / max(1, sum(codes.values())), 3),
            "owner_right_password_after": owner}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-b", "--broker", action="append", choices=["mqbridge", "mosquitto"])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--output", type=Path, default=HERE / "results" / "failed-login-latest.json")
    args = ap.parse_args(argv)
    if shutil.which("mosquitto_passwd") is None:
        print("mosquitto_passwd (Debian's mosquitto) is needed for the password file", file=sys.stderr)
        return 2
    results = []
    with tempfile.TemporaryDirectory(prefix="failed-login-") as tmp:
        work = Path(tmp)
        passwd = work / "passwd"
        subprocess.run(["mosquitto_passwd", "-c", "-b", str(passwd), USER, PASSWORD], check=True,
                       capture_output=True)
        for name in args.broker or ["mqbridge", "mosquitto"]:
            d = work / name
            d.mkdir()
            broker: Broker = (mqbridge_passwd if name == "mqbridge" else MosquittoPasswd)(d, passwd)
            broker.start()   # type: ignore[attr-defined]
            try:
                results.append(run(broker, args.seconds, args.workers))
            finally:
                broker.stop()
    doc = {"time": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load": os.getloadavg()[0],
           "workers": args.workers, "results": results}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{'broker':10} {'attempts/s':>10} {'checked/s':>10} {'CPU ms/attempt':>15}  codes  owner after")
    for r in results:
        print(f"{r['broker']:10} {r['answered_per_s']:>10} {r['checked_per_s']:>10} {r['cpu_ms_per_attempt']:>15}  "
              f"{r['codes']}  {r['owner_right_password_after']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
