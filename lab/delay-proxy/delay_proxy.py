#!/usr/bin/env python3
"""Userspace TCP proxy that adds a fixed latency in each direction.

One asyncio process serves any number of mappings. Every chunk read from one side
is held until (time read + delay) and then written to the other side, in order, so
a round trip through the proxy costs about 2 x delay more than a direct one.
Half-closes (EOF) are delayed and forwarded the same way.

  delay_proxy.py --delay-ms 25 --map 127.0.0.1:42001=10.213.0.6:22 [--map ...]
  delay_proxy.py --delay-ms 25 --listen 127.0.0.1:42001 --to 10.213.0.6:22
  delay_proxy.py --delay-ms 25 --map-file MAP     (one LISTEN=TARGET per line, # comments)

LISTEN may be a bare port (bound on 127.0.0.1). Only standard library.
"""

import argparse
import asyncio
import os
import signal
import socket
import sys

CHUNK = 65536
QUEUE_CHUNKS = 64  # per direction; bounds memory and applies back-pressure


def parse_addr(text, default_host=None):
    text = text.strip()
    if default_host is not None and text.isdigit():
        return default_host, int(text)
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"bad address {text!r} (want HOST:PORT)")
    return host.strip("[]"), int(port)


def parse_mapping(text):
    listen, sep, target = text.partition("=")
    if not sep:
        raise ValueError(f"bad mapping {text!r} (want LISTEN=HOST:PORT)")
    return parse_addr(listen, "127.0.0.1"), parse_addr(target)


def nodelay(writer):
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass


async def pipe(reader, writer, delay, loop):
    """Forward reader -> writer, each chunk (and EOF) delayed by `delay` seconds."""
    queue = asyncio.Queue(QUEUE_CHUNKS)

    async def read_side():
        try:
            while True:
                data = await reader.read(CHUNK)
                await queue.put((loop.time() + delay, data))
                if not data:
                    return
        except (ConnectionError, OSError):
            await queue.put((loop.time(), None))

    async def write_side():
        while True:
            due, data = await queue.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if data is None:  # read error: abort the connection
                writer.transport.abort()
                return
            if not data:  # EOF: half-close, after the same delay
                if writer.can_write_eof():
                    try:
                        writer.write_eof()
                    except (ConnectionError, OSError):
                        pass
                return
            writer.write(data)
            await writer.drain()

    rd = asyncio.ensure_future(read_side())
    try:
        await write_side()
    finally:
        rd.cancel()


async def handle(client_reader, client_writer, target, delay, loop):
    try:
        up_reader, up_writer = await asyncio.open_connection(*target)
    except OSError as e:
        print(f"delay-proxy: connect {target[0]}:{target[1]}: {e}", file=sys.stderr)
        client_writer.transport.abort()
        return
    nodelay(client_writer)
    nodelay(up_writer)
    tasks = [
        asyncio.ensure_future(pipe(client_reader, up_writer, delay, loop)),
        asyncio.ensure_future(pipe(up_reader, client_writer, delay, loop)),
    ]
    try:
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for t in done:
            if t.exception() is not None:
                for p in pending:
                    p.cancel()
                break
        else:
            await asyncio.gather(*pending, return_exceptions=True)
    except Exception:
        pass
    finally:
        for t in tasks:
            t.cancel()
        for w in (client_writer, up_writer):
            try:
                w.close()
            except Exception:
                pass


async def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--delay-ms", type=float, required=True, help="latency added in each direction")
    ap.add_argument("--map", action="append", default=[], metavar="LISTEN=HOST:PORT")
    ap.add_argument("--map-file", metavar="FILE")
    ap.add_argument("--listen", metavar="HOST:PORT")
    ap.add_argument("--to", metavar="HOST:PORT")
    ap.add_argument("--ready-file", metavar="FILE", help="created once every listener is bound")
    args = ap.parse_args()

    try:
        mappings = [parse_mapping(m) for m in args.map]
        if args.map_file:
            with open(args.map_file) as f:
                for line in f:
                    line = line.split("#", 1)[0].strip()
                    if line:
                        mappings.append(parse_mapping(line))
        if args.listen or args.to:
            if not (args.listen and args.to):
                raise ValueError("--listen and --to go together")
            mappings.append((parse_addr(args.listen, "127.0.0.1"), parse_addr(args.to)))
    except (ValueError, OSError) as e:
        ap.error(str(e))
    if not mappings:
        ap.error("no mappings given")

    loop = asyncio.get_running_loop()
    delay = max(0.0, args.delay_ms / 1000.0)
    servers = []
    for (lhost, lport), target in mappings:
        def factory(target=target):
            return lambda r, w: handle(r, w, target, delay, loop)
        servers.append(await asyncio.start_server(factory(), lhost, lport, reuse_address=True, backlog=512))

    if args.ready_file:
        tmp = args.ready_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{os.getpid()}\n")
        os.replace(tmp, args.ready_file)
    print(f"delay-proxy: {len(servers)} listeners, +{args.delay_ms:g} ms each way", file=sys.stderr, flush=True)

    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for s in servers:
        s.close()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
