"""A network namespace with a veth pair to the host, and iptables faults inside it.

Traffic only ever goes between the host side of the veth (10.213.N.1, where PostgreSQL listens)
and the namespace side (10.213.N.2, where one replica runs): both addresses exist only on this
private link. The faults are iptables rules *inside* the namespace (the host's tables are never
touched), so deleting the namespace removes every trace. This kernel has no `tc netem`: packet
loss is `-m statistic --mode random`, a partition is a DROP of everything, and "COMMIT lost in
flight" is a DROP of the packet carrying the simple-query message `Q ... COMMIT` (NUL-terminated).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

__all__ = ["NetNamespace", "require_network_tools"]

# 'Q', int32 length 11, "COMMIT", NUL: psycopg sends conn.commit() as this simple query.
COMMIT_PACKET_HEX = "|510000000b|COMMIT|00|"


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=30)


def require_network_tools() -> None:
    """Fail (never skip) with what to install when root, iproute2 or iptables is missing."""
    problems = []
    if os.geteuid() != 0:
        problems.append("the network scenario must run as root (network namespaces, iptables)")
    problems += [
        f"`{tool}` not found: install {package}"
        for tool, package in (("ip", "iproute2"), ("iptables", "iptables"))
        if shutil.which(tool) is None
    ]
    if problems:
        raise AssertionError("chaos network scenario cannot run: " + "; ".join(problems))


class NetNamespace:
    """`ip netns` + veth pair; `prefix` runs a command inside; iptables faults with counters."""

    def __init__(self, tag: int) -> None:
        subnet = 10 + (os.getpid() + tag) % 240
        self.name = f"ql3chaos{os.getpid()}x{tag}"
        self.host_if = f"q3h{os.getpid() % 100_000}{tag}"[:15]
        self.ns_if = f"q3n{os.getpid() % 100_000}{tag}"[:15]
        self.host_ip = f"10.213.{subnet}.1"
        self.ns_ip = f"10.213.{subnet}.2"
        self.created = False

    @property
    def prefix(self) -> tuple[str, ...]:
        """Argv prefix that runs a command inside the namespace."""
        return ("ip", "netns", "exec", self.name)

    def create(self) -> NetNamespace:
        """Create the namespace and the link; fail with the tool's message if the kernel refuses."""
        require_network_tools()
        steps = [
            ("ip", "netns", "add", self.name),
            ("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if),
            ("ip", "link", "set", self.ns_if, "netns", self.name),
            ("ip", "addr", "add", f"{self.host_ip}/30", "dev", self.host_if),
            ("ip", "link", "set", self.host_if, "up"),
            (*self.prefix, "ip", "addr", "add", f"{self.ns_ip}/30", "dev", self.ns_if),
            (*self.prefix, "ip", "link", "set", self.ns_if, "up"),
            (*self.prefix, "ip", "link", "set", "lo", "up"),
        ]
        self.created = True
        for step in steps:
            result = _run(*step, check=False)
            if result.returncode != 0:
                self.destroy()
                msg = f"chaos: `{' '.join(step)}` failed: {result.stderr.strip()}"
                raise AssertionError(msg)
        return self

    def destroy(self) -> None:
        """Delete the namespace (its veth end and rules go with it) and the host side."""
        if not self.created:
            return
        _run("ip", "netns", "del", self.name, check=False)
        _run("ip", "link", "del", self.host_if, check=False)
        self.created = False

    # -- faults ---------------------------------------------------------------------------------

    def iptables(self, *args: str) -> str:
        """Run iptables inside the namespace and return its output."""
        result = _run(*self.prefix, "iptables", "-w", *args, check=False)
        if result.returncode != 0:
            msg = f"chaos: iptables {' '.join(args)} failed: {result.stderr.strip()}"
            raise AssertionError(msg)
        return result.stdout

    def add_loss(self, probability: float) -> None:
        """Drop each packet to and from PostgreSQL with `probability`."""
        p = f"{probability:.2f}"
        self.iptables("-A", "OUTPUT", "-d", self.host_ip, "-m", "statistic", "--mode", "random",
                      "--probability", p, "-j", "DROP")  # fmt: skip
        self.iptables("-A", "INPUT", "-s", self.host_ip, "-m", "statistic", "--mode", "random",
                      "--probability", p, "-j", "DROP")  # fmt: skip

    def drop_commits(self) -> None:
        """Drop every packet carrying a simple-query COMMIT (retransmissions included)."""
        self.iptables("-I", "OUTPUT", "1", "-d", self.host_ip, "-p", "tcp", "-m", "string",
                      "--hex-string", COMMIT_PACKET_HEX, "--algo", "bm", "-j", "DROP")  # fmt: skip

    def partition(self) -> None:
        """Drop everything between the namespace and PostgreSQL, both ways."""
        self.iptables("-I", "OUTPUT", "1", "-d", self.host_ip, "-j", "DROP")
        self.iptables("-I", "INPUT", "1", "-s", self.host_ip, "-j", "DROP")

    def heal(self) -> None:
        """Remove every rule; check that none is left."""
        self.iptables("-F", "INPUT")
        self.iptables("-F", "OUTPUT")
        assert self.dropped() == 0, "drop counters left after heal"
        assert "DROP" not in self.iptables("-S"), "rules left after heal"

    def dropped(self) -> int:
        """Packets dropped so far by the current rules (INPUT + OUTPUT)."""
        total = 0
        for chain in ("INPUT", "OUTPUT"):
            for line in self.iptables("-L", chain, "-v", "-n", "-x").splitlines():
                fields = line.split()
                if len(fields) > 2 and fields[2] == "DROP" and fields[0].isdigit():  # noqa: PLR2004
                    total += int(fields[0])
        return total

    def dropped_commits(self) -> int:
        """Packets dropped by the COMMIT rule."""
        for line in self.iptables("-L", "OUTPUT", "-v", "-n", "-x").splitlines():
            if "STRING match" in line:
                return int(line.split()[0])
        return 0

    def can_reach(self, port: int) -> bool:
        """Tell whether a TCP connection from inside the namespace reaches PostgreSQL."""
        probe = (
            "import socket,sys\n"
            "try:\n"
            f"    socket.create_connection(({self.host_ip!r}, {port}), timeout=2).close()\n"
            "except OSError:\n"
            "    sys.exit(1)\n"
        )
        return _run(*self.prefix, sys.executable, "-c", probe, check=False).returncode == 0
