#!/usr/bin/env python3
"""A relay that adds network latency, for the tests. The machine has no netem, so a test puts this
relay between a client and a loopback peer to get round trips that cost time. It adds D milliseconds of
one-way delay in each direction, so one round trip through it costs 2*D ms.

    delay_relay.py --delay-ms D [--listen-host H ...] [--tcp [LISTEN=]HOST:PORT ...]
                   [--udp [LISTEN=]HOST:PORT ...] [--log FILE]

Each --tcp / --udp (repeatable, at least one in all) gets its own listener relaying to its target
HOST:PORT. By default the listener takes an ephemeral port, the same one on every --listen-host
(repeatable; default 127.0.0.1): with `--listen-host 127.0.0.1 --listen-host ::1` a name whose answer
holds both 127.0.0.1 and ::1 reaches the relay whichever address a client tries first. A target
written LISTEN=HOST:PORT is listened for on LISTEN (HOST:PORT, e.g. 127.0.0.9:53 for a resolv.conf
nameserver, which has no port; port 0 is ephemeral) instead of on --listen-host.

Once every listener is bound the relay prints exactly one line to stdout and flushes it:

    ready tcp=P1,P2 udp=P3

with the ports in the order the targets were given; a key with no targets is left out (`ready tcp=P1`).
It then runs until SIGTERM or SIGINT and exits 0. Errors go to stderr. A test starts it, reads the
`ready` line to learn the ports, and stops it by sending SIGTERM to its PID.

--log FILE writes one line per event, as it arrives at the relay (before its delay), with the time in
milliseconds since the relay started (its first line, `0.0 start`): `T tcp#N open CLIENT -> TARGET`,
`T tcp#N c>s BYTES` (client to target), `T tcp#N s>c BYTES`, `T tcp#N c>s eof` (or `reset`; the same
for s>c), `T udp CLIENT > BYTES` (a query), `T udp CLIENT < BYTES` (an answer).
Reading it, every change of direction on a connection is half a round trip: the flights a protocol
needs can be counted, and a round trip it does not need stands out.

What is modelled, and how to count round trips (t = 0 when the client starts; s = the peer's own time):

TCP
  * Every chunk of bytes is held until (the time the relay read it + D), in each direction, in order.
    A half-close (EOF) travels the same way: it is forwarded D after it arrived, after the data before
    it. A reset or a failed write on one side closes the other side once the data before it is sent.
  * The client's connect() to the relay returns at once: the kernel completes the handshake on
    loopback and userspace cannot delay that. The relay opens the upstream connection D after it
    accepted the client (the client's SYN "arriving"), and upstream connects on loopback are instant.
  * So for a connect followed by a request:
        client connect() returns         t = 0       (a real link: 2D, the handshake RTT)
        the peer accepts, sees request   t = D       (a real link: 3D)
        the answer reaches the client    t = 2D + s  (a real link: 4D + s)
    i.e. a new connection plus one request/response costs ONE round trip (2D) through the relay,
    where a real link costs two (handshake + request). Each further request/response on an open
    connection costs one round trip, exactly as on a real link. If a peer speaks first (a banner),
    the client gets it at 2D + s. A refused upstream connect resets the client at 2D.
  * Backpressure: each direction queues at most QUEUE_LIMIT bytes; past that the relay stops reading
    until the writer (which awaits drain) catches up. Throughput is thus capped near QUEUE_LIMIT / D.

UDP
  * A datagram from a client is sent to the target D after it arrived, from an upstream socket of
    that client's own (so answers map back to it); each answer is sent back to the client D after
    it arrived. A query and its answer cost one round trip, 2D + s, exactly as on a real link.
  * At most MAX_UDP_CLIENTS client sockets exist (the least recently active is closed to make room);
    one idle for UDP_IDLE_SECONDS is closed. A datagram that would overflow a queue is dropped.
"""
import argparse
import asyncio
import collections
import logging
import signal
import sys

CHUNK = 64 * 1024
QUEUE_LIMIT = 2 * 1024 * 1024  # bytes per direction per connection
MAX_UDP_CLIENTS = 1024
UDP_IDLE_SECONDS = 30.0
EOF = b""  # queue marker: forward a half-close
RESET = None  # queue marker: close the other side

log = logging.getLogger("delay_relay")


class EventLog:
    """The --log file: one line per event, stamped with the relay's clock (ms since it started)."""

    def __init__(self, path):
        self.file = open(path, "a", buffering=1) if path else None
        self.start = None

    def __call__(self, text):
        if self.file is None:
            return
        now = asyncio.get_running_loop().time()
        if self.start is None:
            self.start = now
        self.file.write(f"{(now - self.start) * 1000:10.1f} {text}\n")


events = EventLog(None)


class DelayQueue:
    """Items stamped (arrival + delay) on put; get() hands each back, in order, at its deadline."""

    def __init__(self, delay):
        self.delay = delay
        self.items = collections.deque()
        self.size = 0  # bytes queued or being written
        self.nonempty = asyncio.Event()
        self.space = asyncio.Event()
        self.space.set()

    def put(self, data):
        self.items.append((asyncio.get_running_loop().time() + self.delay, data))
        self.size += len(data or b"")
        self.nonempty.set()
        if self.size >= QUEUE_LIMIT:
            self.space.clear()

    async def get(self):
        while not self.items:
            self.nonempty.clear()
            await self.nonempty.wait()
        deadline, data = self.items.popleft()
        wait = deadline - asyncio.get_running_loop().time()
        if wait > 0:
            await asyncio.sleep(wait)
        return data

    def done(self, data):
        """The writer has handed `data` on; its bytes no longer count against the limit."""
        self.size -= len(data or b"")
        if self.size < QUEUE_LIMIT:
            self.space.set()


class Closed(Exception):
    """One direction ended abnormally: tear the whole connection down."""


# ---------------------------------------------------------------- TCP


async def tcp_read(reader, queue, tag):
    """Read one side as fast as the queue has room, stamping each chunk as it arrives."""
    while True:
        await queue.space.wait()
        try:
            data = await reader.read(CHUNK)
        except (ConnectionError, OSError):
            events(f"{tag} reset")
            queue.put(RESET)
            return
        events(f"{tag} {len(data) if data else 'eof'}")
        queue.put(data)
        if data == EOF:
            return


async def tcp_write(queue, writer):
    """Deliver queued chunks to the other side, each at its deadline; forward EOF or a reset."""
    while True:
        data = await queue.get()
        if data is RESET:
            raise Closed
        if data == EOF:
            try:
                if writer.can_write_eof():
                    writer.write_eof()
            except (ConnectionError, OSError):
                raise Closed
            return
        try:
            writer.write(data)
            await writer.drain()
        except (ConnectionError, OSError):
            raise Closed
        queue.done(data)


async def tcp_connection(client_r, client_w, target, delay, number):
    loop = asyncio.get_running_loop()
    accepted = loop.time()
    name = f"tcp#{number}"
    peer = client_w.get_extra_info("peername")
    events(f"{name} open {peer[0]}:{peer[1]} -> {target[0]}:{target[1]}")
    up, down = DelayQueue(delay), DelayQueue(delay)
    tasks = [asyncio.create_task(tcp_read(client_r, up, f"{name} c>s"))]
    upstream_w = None
    try:
        # The client's SYN takes D to reach the peer: open the upstream connection only then.
        await asyncio.sleep(max(0.0, accepted + delay - loop.time()))
        try:
            upstream_r, upstream_w = await asyncio.open_connection(*target)
        except OSError as e:
            log.error("tcp connect to %s:%d failed: %s", *target, e)
            await asyncio.sleep(delay)  # the refusal travels back to the client
            client_w.transport.abort()
            return
        tasks += [
            asyncio.create_task(tcp_write(up, upstream_w)),
            asyncio.create_task(tcp_read(upstream_r, down, f"{name} s>c")),
            asyncio.create_task(tcp_write(down, client_w)),
        ]
        # Ends when both directions have delivered their EOF, or at the first Closed.
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
            elif not task.cancelled() and not isinstance(task.exception(), (Closed, type(None))):
                log.error("tcp relay to %s:%d: %r", *target, task.exception())
        for writer in (client_w, upstream_w):
            if writer is not None:
                writer.close()  # sends what is still buffered, then closes


# ---------------------------------------------------------------- UDP


class UdpUpstream(asyncio.DatagramProtocol):
    def __init__(self, session):
        self.session = session

    def datagram_received(self, data, addr):
        self.session.received_from_target(data)

    def error_received(self, exc):
        pass  # e.g. ICMP port unreachable: like a real link, the client just sees no answer


class UdpSession:
    """One client address: its own upstream socket and a delay queue each way."""

    def __init__(self, relay, client):
        self.relay, self.client = relay, client
        self.up, self.down = DelayQueue(relay.delay), DelayQueue(relay.delay)
        self.last = asyncio.get_running_loop().time()
        self.task = asyncio.create_task(self.run())

    def received_from_client(self, data):
        self.last = asyncio.get_running_loop().time()
        events(f"udp {self.client[0]}:{self.client[1]} > {len(data)}")
        if self.up.size + len(data) <= QUEUE_LIMIT:
            self.up.put(data)

    def received_from_target(self, data):
        self.last = asyncio.get_running_loop().time()
        events(f"udp {self.client[0]}:{self.client[1]} < {len(data)}")
        if self.down.size + len(data) <= QUEUE_LIMIT:
            self.down.put(data)

    async def run(self):
        loop = asyncio.get_running_loop()
        transport = None
        try:
            transport, _ = await loop.create_datagram_endpoint(
                lambda: UdpUpstream(self), remote_addr=self.relay.target
            )
            await asyncio.gather(
                self.pump(self.up, transport.sendto),
                self.pump(self.down, lambda d: self.relay.transport.sendto(d, self.client)),
            )
        except OSError as e:
            log.error("udp socket to %s:%d failed: %s", *self.relay.target, e)
        finally:
            if transport is not None:
                transport.close()
            if self.relay.sessions.get(self.client) is self:
                del self.relay.sessions[self.client]

    async def pump(self, queue, send):
        while True:
            data = await queue.get()
            send(data)
            queue.done(data)

    def close(self):
        self.task.cancel()


class UdpRelay(asyncio.DatagramProtocol):
    def __init__(self, target, delay):
        self.target, self.delay = target, delay
        self.sessions = {}  # client address -> UdpSession
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport

    def datagram_received(self, data, addr):
        session = self.sessions.get(addr)
        if session is None:
            if len(self.sessions) >= MAX_UDP_CLIENTS:
                self.sessions.pop(min(self.sessions, key=lambda a: self.sessions[a].last)).close()
            session = self.sessions[addr] = UdpSession(self, addr)
        session.received_from_client(data)

    async def reap_idle(self):
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(UDP_IDLE_SECONDS / 3)
            cutoff = loop.time() - UDP_IDLE_SECONDS
            for addr, session in list(self.sessions.items()):
                if session.last < cutoff:
                    self.sessions.pop(addr).close()


# ---------------------------------------------------------------- main


def host_port(text):
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def relay_spec(text):
    """`HOST:PORT` (listen on --listen-host) or `LISTEN_HOST:LISTEN_PORT=HOST:PORT`: (listen, target)."""
    listen, sep, target = text.rpartition("=")
    return (host_port(listen) if sep else None), host_port(target)


async def bind_everywhere(bind, hosts, port):
    """Calls `bind(host, port)` for every host with one port for all: `port`, or when it is 0 the one
    the OS gives the first host, tried again (a few times) when it is taken on another host. Returns
    the port and what the binds returned."""
    for _ in range(20 if port == 0 else 1):
        bound, chosen = [], port
        try:
            for host in hosts:
                thing, got = await bind(host, chosen)
                bound.append(thing)
                chosen = got
            return chosen, bound
        except OSError as e:
            for thing in bound:
                thing.close()
            if port != 0:
                raise OSError(e.errno, f"cannot listen on {host}:{port}: {e.strerror}") from None
    raise OSError(f"no port free on all of {', '.join(hosts)}")


async def main(args):
    global events
    events = EventLog(args.log)
    events("start")
    loop = asyncio.get_running_loop()
    delay = args.delay_ms / 1000.0
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    connections = set()  # our own references: a task must be referenced to survive
    numbers = iter(range(1, 1 << 62))

    def accept(reader, writer, target):
        task = asyncio.create_task(tcp_connection(reader, writer, target, delay, next(numbers)))
        connections.add(task)
        task.add_done_callback(connections.discard)

    tcp_ports, udp_ports, servers, transports, reapers = [], [], [], [], []
    for listen, target in args.tcp:
        async def bind_tcp(host, port, t=target):
            server = await asyncio.start_server(
                lambda r, w: accept(r, w, t), host, port, backlog=1024
            )
            return server, server.sockets[0].getsockname()[1]

        hosts, port = ([listen[0]], listen[1]) if listen else (args.listen_host, 0)
        port, bound = await bind_everywhere(bind_tcp, hosts, port)
        servers += bound
        tcp_ports.append(port)
    for listen, target in args.udp:
        async def bind_udp(host, port, t=target):
            transport, _ = await loop.create_datagram_endpoint(
                lambda: UdpRelay(t, delay), local_addr=(host, port)
            )
            return transport, transport.get_extra_info("sockname")[1]

        hosts, port = ([listen[0]], listen[1]) if listen else (args.listen_host, 0)
        port, bound = await bind_everywhere(bind_udp, hosts, port)
        transports += bound
        reapers += [asyncio.create_task(t.get_protocol().reap_idle()) for t in bound]
        udp_ports.append(port)

    fields = [f"{key}={','.join(map(str, ports))}"
              for key, ports in (("tcp", tcp_ports), ("udp", udp_ports)) if ports]
    print("ready " + " ".join(fields), flush=True)

    await stop.wait()
    for server in servers:
        server.close()
    for transport in transports:
        transport.close()
    # asyncio.run() cancels every remaining task (connections, sessions, reapers) on return.


def parse_args():
    parser = argparse.ArgumentParser(description="Relay TCP/UDP with D ms of one-way delay each way.")
    parser.add_argument("--delay-ms", type=float, required=True, help="one-way delay D in ms")
    parser.add_argument("--listen-host", action="append", default=[], metavar="HOST",
                        help="address to listen on, repeatable (one port on all); default 127.0.0.1")
    parser.add_argument("--tcp", type=relay_spec, action="append", default=[], metavar="[LISTEN=]HOST:PORT")
    parser.add_argument("--udp", type=relay_spec, action="append", default=[], metavar="[LISTEN=]HOST:PORT")
    parser.add_argument("--log", metavar="FILE", help="append one line per event to FILE")
    args = parser.parse_args()
    args.listen_host = args.listen_host or ["127.0.0.1"]
    if not args.tcp and not args.udp:
        parser.error("give at least one --tcp or --udp target")
    if args.delay_ms < 0:
        parser.error("--delay-ms must be >= 0")
    return args


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, format="delay_relay: %(message)s")
    try:
        asyncio.run(main(parse_args()))
    except OSError as e:  # a listener could not be bound
        log.error("%s", e)
        sys.exit(1)
    sys.exit(0)
