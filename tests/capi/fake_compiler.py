#!/usr/bin/python3
"""A stand-in for tinymlir-compiler that misbehaves the way a real compiler process could,
for lazy_compiler.sh. It speaks core/driver/compiler_protocol.h on descriptor 3; what it does
is FAKE_COMPILER_MODE:
  crash-at-start  prints a line and dies of SIGSEGV before saying hello;
  crash-compiling prints a line, says hello, reads the first request, prints another line and
                  aborts (only the second line is the request's output);
  garbage-reply   says hello, reads the first request, answers with bytes that are no reply,
                  and waits (libtinymlir.so must end it).
"""
import os
import signal
import socket
import struct
import sys
import time

HELLO, SYMBOLS, REPLY = 1, 2, 5


def send(sock, kind, body):
    sock.sendall(struct.pack("<QQ", kind, len(body)) + body)


def receive(sock):
    def exactly(n):
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                sys.exit(0)
            data += chunk
        return data
    kind, length = struct.unpack("<QQ", exactly(16))
    return kind, exactly(length)


mode = os.environ.get("FAKE_COMPILER_MODE", "")
if mode == "crash-at-start":
    print("fake compiler: about to crash at start", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGSEGV)
if mode == "crash-compiling":
    print("fake compiler: output from before the request", file=sys.stderr, flush=True)
sock = socket.socket(fileno=3)
send(sock, HELLO, struct.pack("<qQ", 0, 0))  # status OK, empty message
assert receive(sock)[0] == SYMBOLS
receive(sock)
if mode == "crash-compiling":
    print("LLVM ERROR: fake compiler ran out of registers", file=sys.stderr, flush=True)
    os.abort()
send(sock, REPLY, b"\x01\x02\x03")
time.sleep(600)
