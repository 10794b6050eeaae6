"""What a process tree listens on: every listening TCP socket and every bound, unconnected UDP socket of this
process and its descendants (Ray's GCS, raylet, agents and workers all descend from the driver that
started them), read with psutil from /proc."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class Listener:
    pid: int
    process: str
    protocol: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.process} (pid {self.pid}) {self.protocol} {self.host}:{self.port}"

    def _address(self) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
        address = ipaddress.ip_address(self.host.split("%")[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            return address.ipv4_mapped  # ::ffff:127.0.0.1 is IPv4 loopback on a dual-stack socket
        return address

    @property
    def wildcard(self) -> bool:
        """On every interface (``0.0.0.0``, ``::``)."""
        return self._address().is_unspecified

    @property
    def loopback(self) -> bool:
        return self._address().is_loopback


def process_tree() -> list[psutil.Process]:
    """This process and all its descendants alive now."""
    me = psutil.Process()
    return [me, *me.children(recursive=True)]


def listeners(processes: list[psutil.Process]) -> list[Listener]:
    """Every listener of ``processes``; a process that exits meanwhile is left out."""
    found = []
    for process in processes:
        try:
            name = process.name()
            connections = process.net_connections(kind="inet")
        except psutil.NoSuchProcess:
            continue
        for c in connections:
            tcp = c.type == socket.SOCK_STREAM and c.status == psutil.CONN_LISTEN
            udp = c.type == socket.SOCK_DGRAM and not c.raddr
            if tcp or udp:
                found.append(Listener(process.pid, name, "tcp" if tcp else "udp", c.laddr.ip, c.laddr.port))
    return found


def named(found: list[Listener]) -> str:
    return "\n  ".join(str(listener) for listener in found) or "(none)"
