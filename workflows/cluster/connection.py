"""The bridge's connection to the Dask scheduler. The address is tried first, each step within a few
seconds, so that an address where no scheduler answers fails at once with one line saying what is there:
Dask's client waits without end on a port that accepts and stays silent, and retries a web server's
answer (read as a frame of exabytes) as long as it waits."""

from __future__ import annotations

import asyncio
import socket

from distributed import Client
from distributed.comm.addressing import parse_address, parse_host_port
from distributed.comm.registry import get_backend
from distributed.core import rpc
from distributed.security import Security

# How long the address may take to accept a connection, and then to answer in Dask's protocol: a
# scheduler answers in milliseconds, and Dask itself warns of an event loop unresponsive for 3 s.
ANSWER_SECONDS = 3.0
# How long the client may take to register with a scheduler that answered.
CLIENT_SECONDS = 30


class SchedulerUnreachable(Exception):
    """No Dask scheduler answers at the address; the message says what is there instead."""


def accepts(address: str) -> None:
    """A TCP or TLS address accepts a connection (other transports are left to Dask's own connect)."""
    try:
        scheme, location = parse_address(address)
        get_backend(scheme)
        host, port = parse_host_port(location) if scheme in ("tcp", "tls") else (None, None)
    except ValueError as error:
        raise SchedulerUnreachable(f"{address} is not a Dask scheduler address such as tcp://10.0.0.5:8786 ({error})") from None
    if host is None:
        return
    try:
        socket.create_connection((host, port), timeout=ANSWER_SECONDS).close()
    except ConnectionRefusedError:
        raise SchedulerUnreachable(
            f"nothing is listening at {address} (connection refused): is the Dask scheduler running, on this port?"
        ) from None
    except TimeoutError:
        raise SchedulerUnreachable(
            f"{address} accepts no connection within {ANSWER_SECONDS:g} s (no answer: a wrong host, or a firewall?)"
        ) from None
    except OSError as error:
        raise SchedulerUnreachable(f"{address} cannot be reached: {error.strerror or error}") from None


async def identity(address: str) -> object:
    async with rpc(address, timeout=ANSWER_SECONDS, connection_args=Security().get_connection_args("client")) as server:
        return await server.identity()


def identify(address: str) -> None:
    """What answers at the address is a Dask scheduler."""
    try:
        found = asyncio.run(asyncio.wait_for(identity(address), ANSWER_SECONDS))
    except TimeoutError:
        raise SchedulerUnreachable(
            f"{address} accepts connections but gives no answer in Dask's protocol within {ANSWER_SECONDS:g} s: "
            "no Dask scheduler is listening there"
        ) from None
    except Exception as error:  # garbage read as Dask's frames (MemoryError, decoding errors), a TLS refusal
        raise SchedulerUnreachable(
            f"{address} answers, but not in Dask's protocol ({type(error).__name__}): no Dask scheduler is listening there "
            "(another service, such as a dashboard's web port?)"
        ) from None
    kind = found.get("type") if isinstance(found, dict) else None
    if kind != "Scheduler":
        raise SchedulerUnreachable(f"{address} is a Dask {kind or 'server'}, not a scheduler: give the scheduler's address")


def connect(address: str) -> Client:
    accepts(address)
    identify(address)
    return Client(address, timeout=CLIENT_SECONDS, set_as_default=False)
