"""Agents for test/evaluation/cohort-sandbox.test.ts, run by examples/agents/.venv/bin/python inside the
sandbox of `cohort run --sandbox-agents` (this file is in the checkout: the sandbox hides /tmp).

    sandboxed-agent.py bridge            the example agent (pair_ridge.py) over WWREF_MCP_COMMAND (stdio, the server
                                         given no environment), then lingers
    sandboxed-agent.py hostile OUT MARK OTHER SOCKET  every attack below, said as one JSON line on stdout, then the example agent
    sandboxed-agent.py network PORT OTHER  (--sandbox-network none) the host's other ports, another episode's path,
                                         other addresses, a flood of connections: one JSON line, then the example agent
    sandboxed-agent.py wait MARK         leaves `sleep MARK` running and waits (killed with its cohort)
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import json
import os
import resource
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "agents"))
import pair_ridge  # noqa: E402
from mcp import StdioServerParameters  # noqa: E402


def attempt(action) -> str:
    """'done' when `action` succeeded, else the error's name."""
    try:
        action()
        return "done"
    except Exception as error:  # noqa: BLE001 - every failure is an outcome here
        return type(error).__name__


def write(path: Path) -> None:
    with open(path, "a") as f:
        f.write('{"forged": true}\n')


def listing(path: Path) -> list[str]:
    return sorted(os.listdir(path)) if path.is_dir() else []


def foreign_tokens() -> int:
    """How many processes' environments hold a WWREF_MCP_TOKEN other than this agent's."""
    own = os.environ["WWREF_MCP_TOKEN"]
    found = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for entry in env:
            if entry.startswith(b"WWREF_MCP_TOKEN=") and entry.split(b"=", 1)[1].decode(errors="replace") != own:
                found += 1
    return found


def umount(path: Path) -> str:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.umount2(str(path).encode(), 2) == 0:  # MNT_DETACH
        return "done"
    return os.strerror(ctypes.get_errno())


def running(child: subprocess.Popen, mark: str) -> bool:
    """Whether `child` became `sleep MARK` (setsid execs it) and runs, within 5 s."""
    for _ in range(50):
        if child.poll() is not None:
            return False
        if Path(f"/proc/{child.pid}/cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", mark.encode()]:
            return True
        time.sleep(0.1)
    return False


def connect(path: str) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(path)


def hostile(out: Path, mark: str, other: Path, sock: str) -> dict:
    episode = out / "episodes" / os.environ["WWREF_EPISODE_ID"]
    said: dict = {"sees": {}, "writes": {}}
    # a process that leaves the agent's group: ended with the sandbox
    left = subprocess.Popen(["setsid", "sleep", mark], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # what an agent must not read: the cohort's folder, the checkout's outputs/ and the references
    said["sees"]["out"] = listing(out)
    said["sees"]["other"] = listing(other)  # another cohort's folder, hidden by --sandbox-hide
    said["sees"]["outputs"] = listing(ROOT / "outputs")
    said["sees"]["references"] = listing(ROOT / "outputs" / "references")
    said["sees"]["code"] = (ROOT / "workflows" / "evaluation" / "ridge.py").is_file()
    said["sees"]["processes"] = len([p for p in os.listdir("/proc") if p.isdigit()])
    said["foreign_tokens"] = foreign_tokens()
    # descriptors this process holds beyond its pipes and /dev: a way into a hidden folder
    fds = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{fd}")]
    said["fds"] = sorted({t for t in fds if not t.startswith(("pipe:", "/dev/", "socket:", "anon_inode:", "/proc/"))})
    for name, path in {
        "results": out / "results.jsonl",
        "cohort": out / "cohort.json",
        "events": episode / "events.jsonl",
        "controls": other / "controls" / "records.jsonl",  # the --controls folder, in the other cohort's
        "checkout": ROOT / "planted.txt",
    }.items():
        said["writes"][name] = attempt(lambda path=path: write(path))
        said["writes"][f"{name}-delete"] = attempt(lambda path=path: os.remove(path))
    said["writes"]["episode-rename"] = attempt(lambda: os.rename(episode, out / "gone"))
    said["writes"]["tmp"] = attempt(lambda: write(Path(os.environ["TMPDIR"]) / "mine"))
    said["socket"] = attempt(lambda: connect(sock))  # a Unix socket of the host's, in /run
    said["umount"] = umount(out)
    said["unshare"] = attempt(lambda: subprocess.run(["unshare", "-U", "true"], check=True, capture_output=True))
    said["left_running"] = running(left, mark)
    return said


def reach(host: str, port: int) -> str:
    """'done' when a TCP connection to HOST:PORT opens, else the error's errno name (or the exception's)."""
    try:
        with socket.create_connection((host, port), timeout=3):
            return "done"
    except OSError as error:
        return errno.errorcode.get(error.errno or 0, type(error).__name__)


def post(url: str) -> int | str:
    """The HTTP status of an MCP `tools/list` POSTed to URL with this episode's token (or the error's name)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).encode()
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "authorization": f"Bearer {os.environ['WWREF_MCP_TOKEN']}",
    }
    try:
        with urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError as error:
        return type(error).__name__


def listening() -> list[int]:
    """The TCP ports listening in this network namespace (/proc/net/tcp and tcp6, state 0A)."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if fields[3] == "0A":
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return sorted(ports)


def flood(port: int, count: int) -> dict:
    """Opens COUNT connections to 127.0.0.1:PORT and as many to the episode's socket at once, held 6 s (when: epoch seconds)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 2 * count + 256), hard))
    held, failed = [], 0
    for _ in range(count):
        try:
            held.append(socket.create_connection(("127.0.0.1", port), timeout=3))
        except OSError:
            failed += 1
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(3)
        try:
            s.connect("/run/wwref/mcp.sock")
            held.append(s)
        except OSError:
            failed += 1
            s.close()
    held_from = time.time()
    time.sleep(6)  # held while the sibling episode plays
    held_until = time.time()
    for s in held:
        s.close()
    return {"opened": len(held), "failed": failed, "held": [held_from, held_until]}


def network(port: int, other: str) -> dict:
    url = urllib.parse.urlsplit(os.environ["WWREF_MCP_URL"])
    said: dict = {"listening": listening(), "port": url.port}
    said["host_port"] = reach("127.0.0.1", port)  # a TCP server of the host's on its loopback
    said["other_episode"] = post(f"http://127.0.0.1:{url.port}/episodes/{other}/mcp")
    said["own_episode"] = post(os.environ["WWREF_MCP_URL"])
    said["outside"] = [reach(host, 80) for host in ("192.0.2.1", "1.1.1.1")]
    said["venv"] = listing(ROOT / ".venv")
    said["flood"] = flood(url.port, 3000)
    said["own_after"] = post(os.environ["WWREF_MCP_URL"])
    return said


def main() -> None:
    mode = sys.argv[1]
    if mode == "bridge":
        command = json.loads(os.environ["WWREF_MCP_COMMAND"])
        # no env given: the SDK passes its server only HOME, PATH and a few more; the URL is in the argv,
        # the token in a file of the sandbox's (never in an argv)
        pair_ridge.endpoint = lambda: StdioServerParameters(command=command[0], args=command[1:])
        token = os.environ["WWREF_MCP_TOKEN"]
        file = command[command.index("--token-file") + 1]
        said = {"stdio": command[2:], "token_in_argv": any(token in a for a in command), "file": Path(file).read_text().strip() == token}
        print(json.dumps(said), flush=True)
    elif mode == "hostile":
        print(json.dumps(hostile(Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4]), sys.argv[5])), flush=True)
    elif mode == "network":
        print(json.dumps(network(int(sys.argv[2]), sys.argv[3])), flush=True)
    elif mode == "wait":
        subprocess.Popen(["setsid", "sleep", sys.argv[2]])
        print("waiting", flush=True)
        time.sleep(600)
    asyncio.run(pair_ridge.main())
    if mode == "bridge":
        time.sleep(60)  # submitted, and goes on: stopped when the grace period is over


if __name__ == "__main__":
    main()
