#!/usr/bin/env python3
"""A DNS and vendor-style HTTPDNS endpoint written without any of swift-httpdns, that shows in its
answers which client subnet it was asked for. Nothing of ours is used: the DNS wire format is
parsed here with struct, AES is Python's `cryptography`, the signatures hashlib/hmac.

Answers for every name (A only; AAAA is empty):
  an EDNS Client Subnet option a.b.c.d/N (RFC 7871)    ->  a.b.c.N (IPv6: 192.0.2.N)
  a vendor query's ip=a.b.c.d                          ->  a.b.c.99
  neither                                              ->  192.0.2.1
Endpoints:
  UDP DNS                                   Do53, reading the ECS option of the query's OPT record
  GET /dns-query?dns=BASE64URL              RFC 8484 DoH, the same
  GET /d?dn=NAME[,NAME…][&ip=IP][&type=aaaa|addrs]  DNSPod, plain; with &id=ID&alg=aes, dn and ip
                                            AES-128-CBC (hex(IV) + hex(ciphertext)), the answer encrypted
                                            the same way. Several names: one line each, "name.:ip,60" (the
                                            Android SDK's ResponseParser form); type=addrs: "ip,60-0" (no
                                            IPv6, "0")
  GET /ACCOUNT/sign_d?host=&query=&ip=&t=&s=  Alibaba, s = md5("HOST-SECRET-T")
  GET /ACCOUNT/sign_resolve?host=a,b&…      Alibaba's signed batch, s = md5("a,b-SECRET-T"), answered
                                            {"dns":[{"host","ips","type":1,"ttl"}…]} (the Android SDK's form),
                                            with query=4,6 also an empty {"type":28} item per name
  GET /v2/d?id=&m=0&exp=&v=&dn=&q=&cip=&s=  Alibaba v2 plain mode, s = hex HMAC-SHA256 of the sorted
                                            k=v pairs, keyed with the hex-decoded secret. "mode" is sent as
                                            a string ("0"), the form the Android SDK's getString reads;
                                            with q=4,6 each answer's v6 is {"ips":[],"no_ip_code":"RRNotExist"}
  every HTTP answer carries a Date header from a clock SKEW seconds off, and signatures are judged by
  that clock: expired before it, refused more than 24 h after it (for clock-skew tests); each signed
  query is logged with its expiry minus that clock's now ("t-now=600" for a client on its time)

  GET /ACCOUNT/ss?region=&platform=&sdk_version=   Alibaba's scheduling: {"service_ip":[…],"service_ipv6":[…]}
                                            from SERVICE_IPS ("disable": {"service_status":"disable"});
                                            an entry IP:alt (or IP:PORT) adds "service_ip_port", port i for
                                            address i and 0 for one without, as the Android SDK reads it
  GET /conf?id=ID&alg=aes                   DNSPod's: "log:1|domain:0|ip:A;B|ttl:1" AES-sealed like /d
  The HTTP endpoints listen on 127.0.0.1, 127.0.0.2 and 127.0.0.3 at one port (service IPs to move
  between), and on 127.0.0.3 at a second port ("alt"); each request is also logged as
  "at=<address it came in on> <path>" ("at=alt <path>" on the second port).

  v2's encrypted modes with V2_AES_KEY_HEX: m=1 AES-CBC (16-byte IV, PKCS#7), m=2 AES-GCM (12-byte
  nonce, tag after the ciphertext); enc = hex(IV ‖ ciphertext) of {"dn","q"[,"cip"]}, signed over
  enc, exp, id, m, v; the answer's data = Base64(IV ‖ ciphertext) of {"cip","answers"}; up to 5 names

Usage: ecs_peer.py AES_KEY ALIBABA_ACCOUNT ALIBABA_SECRET_HEX [SKEW_SECONDS [V2_AES_KEY_HEX|- [SERVICE_IPS]]]
(SERVICE_IPS comma-separated; default 127.0.0.2)
Prints "udp=PORT http=PORT alt=PORT" once all listen, then serves until killed. Every query it gets is printed
on stderr as one line: "<form> <name> subnet=<what it saw>".
"""
import base64
import email.utils
import errno
import hashlib
import hmac
import http.server
import json
import os
import random
import signal
import socket
import socketserver
import struct
import sys
import threading
import time
import urllib.parse

from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

AES_KEY, ACCOUNT, SECRET = sys.argv[1].encode(), sys.argv[2], bytes.fromhex(sys.argv[3])
SKEW = int(sys.argv[4]) if len(sys.argv) > 4 else 0
V2_KEY = bytes.fromhex(sys.argv[5]) if len(sys.argv) > 5 and sys.argv[5] != "-" else None
SERVICE_IPS = sys.argv[6] if len(sys.argv) > 6 else "127.0.0.2"


LOG = threading.Lock()


def log(line):
    with LOG:  # one whole line at a time: queries come in on several threads
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def answer_for(ecs=None, ip=None):
    if ecs:
        address, prefix = ecs
        if ":" in address:
            return f"192.0.2.{prefix}"  # an IPv6 subnet: its prefix length in a documentation address
        return ".".join(address.split(".")[:3] + [str(prefix)])
    if ip:
        return ".".join(ip.split(".")[:3] + ["99"])
    return "192.0.2.1"


# --- DNS wire format ---

def read_name(msg, at):
    labels = []
    while True:
        length = msg[at]
        at += 1
        if length == 0:
            return ".".join(labels), at
        labels.append(msg[at:at + length].decode())
        at += length


def parse_query(msg):
    """The question and the ECS option (address, prefix) if the OPT record has one."""
    qdcount, ancount, nscount, arcount = struct.unpack("!4H", msg[4:12])
    name, at = read_name(msg, 12)
    qtype, _ = struct.unpack("!2H", msg[at:at + 4])
    question_end = at + 4
    at = question_end
    ecs = None
    for _ in range(ancount + nscount + arcount):
        _, at = read_name(msg, at)
        rtype, _, _, rdlength = struct.unpack("!HHIH", msg[at:at + 10])
        at += 10
        rdata = msg[at:at + rdlength]
        at += rdlength
        if rtype != 41:
            continue
        o = 0
        while o + 4 <= len(rdata):
            code, length = struct.unpack("!2H", rdata[o:o + 4])
            value = rdata[o + 4:o + 4 + length]
            o += 4 + length
            if code == 8:
                family, source, _scope = struct.unpack("!HBB", value[:4])
                raw = value[4:]
                if family == 1:
                    ecs = (socket.inet_ntop(socket.AF_INET, raw.ljust(4, b"\0")), source)
                else:
                    ecs = (socket.inet_ntop(socket.AF_INET6, raw.ljust(16, b"\0")), source)
    return name, qtype, msg[12:question_end], ecs


def dns_answer(msg, form):
    name, qtype, question, ecs = parse_query(msg)
    log(f"{form} {name} subnet={'%s/%d' % ecs if ecs else 'none'}")
    header = msg[:2] + struct.pack("!5H", 0x8180, 1, 1 if qtype == 1 else 0, 0, 0)
    body = question
    if qtype == 1:
        body += struct.pack("!HHHIH", 0xC00C, 1, 1, 60, 4) + socket.inet_aton(answer_for(ecs=ecs))
    return header + body


class UDP(socketserver.BaseRequestHandler):
    def handle(self):
        data, sock = self.request
        sock.sendto(dns_answer(data, "do53"), self.client_address)


# --- the vendors' forms ---

def split_entry(entry):
    """A SERVICE_IPS entry: IP, IP:PORT, [IPv6]:PORT or a bare IPv6 address; PORT may be "alt"."""
    if entry.startswith("["):
        address, _, port = entry[1:].partition("]:")
        return address, port
    if entry.count(":") == 1:
        address, _, port = entry.partition(":")
        return address, port
    return entry, ""


def aes_open(text):
    raw = bytes.fromhex(text)
    decryptor = Cipher(algorithms.AES(AES_KEY), modes.CBC(raw[:16])).decryptor()
    padded = decryptor.update(raw[16:]) + decryptor.finalize()
    unpadder = padding.PKCS7(128).unpadder()
    return (unpadder.update(padded) + unpadder.finalize()).decode()


def aes_seal(text):
    iv = os.urandom(16)
    padder = padding.PKCS7(128).padder()
    padded = padder.update(text.encode()) + padder.finalize()
    encryptor = Cipher(algorithms.AES(AES_KEY), modes.CBC(iv)).encryptor()
    return (iv + encryptor.update(padded) + encryptor.finalize()).hex()


def v2_open(mode, raw):
    if mode == 2:
        return AESGCM(V2_KEY).decrypt(raw[:12], raw[12:], None)
    decryptor = Cipher(algorithms.AES(V2_KEY), modes.CBC(raw[:16])).decryptor()
    padded = decryptor.update(raw[16:]) + decryptor.finalize()
    unpadder = padding.PKCS7(128).unpadder()
    return unpadder.update(padded) + unpadder.finalize()


def v2_seal(mode, data):
    if mode == 2:
        nonce = os.urandom(12)
        return nonce + AESGCM(V2_KEY).encrypt(nonce, data, None)
    iv = os.urandom(16)
    padder = padding.PKCS7(128).padder()
    padded = padder.update(data) + padder.finalize()
    encryptor = Cipher(algorithms.AES(V2_KEY), modes.CBC(iv)).encryptor()
    return iv + encryptor.update(padded) + encryptor.finalize()


class HTTP(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, status, body, content_type="text/plain"):
        body = body if isinstance(body, bytes) else body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def date_time_string(self, timestamp=None):
        return email.utils.formatdate(time.time() + SKEW, usegmt=True)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        now = int(time.time()) + SKEW
        where = "alt" if self.server is alt else self.server.server_address[0]
        log(f"at={where} {url.path}")
        if url.path == f"/{ACCOUNT}/ss":
            if SERVICE_IPS == "disable":
                return self.reply(200, '{"service_status":"disable"}', "application/json")
            entries = []  # (address, port or 0)
            for entry in SERVICE_IPS.split(","):
                address, port = split_entry(entry)
                entries.append((address, alt.server_address[1] if port == "alt" else int(port or 0)))
            v4 = [e for e in entries if ":" not in e[0]]
            v6 = [e for e in entries if ":" in e[0]]
            body = {"service_ip": [a for a, _ in v4], "service_ipv6": [a for a, _ in v6], "service_status": "enable"}
            if any(p for _, p in entries):
                body["service_ip_port"] = [p for _, p in v4]
                body["service_ipv6_port"] = [p for _, p in v6]
            log(f"alibaba-ss region={q.get('region')} platform={q.get('platform')}")
            return self.reply(200, json.dumps(body), "application/json")
        if url.path == "/conf":
            if q.get("alg") != "aes" or q.get("id") != "1001":
                return self.reply(200, "")
            log("dnspod-conf")
            return self.reply(200, aes_seal(f"log:1|domain:0|ip:{SERVICE_IPS.replace(',', ';')}|ttl:1"))
        if url.path == "/dns-query":
            wire = base64.urlsafe_b64decode(q["dns"] + "=" * (-len(q["dns"]) % 4))
            return self.reply(200, dns_answer(wire, "doh"), "application/dns-message")
        if url.path == "/d":
            encrypted = q.get("alg") == "aes"
            names = aes_open(q["dn"]) if encrypted else q["dn"]
            ip = q.get("ip")
            if ip and encrypted:
                ip = aes_open(ip)
            kind = q.get("type", "a")
            log(f"dnspod{'-aes' if encrypted else ''} {names} type={kind} subnet={ip or 'none'}")
            family = {"a": f"{answer_for(ip=ip)},60", "aaaa": "0", "addrs": f"{answer_for(ip=ip)},60-0"}[kind]
            listed = names.split(",")
            text = "\n".join(f"{n}.:{family}" if len(listed) > 1 else family for n in listed)
            return self.reply(200, aes_seal(text) if encrypted else text)
        if url.path == f"/{ACCOUNT}/sign_d":
            host, t = q["host"], q["t"]
            expected = hashlib.md5(f"{host}-".encode() + SECRET.hex().encode() + f"-{t}".encode()).hexdigest()
            log(f"alibaba-signed {host} t-now={int(t) - now}")
            if not hmac.compare_digest(expected, q["s"]) or int(t) > now + 86400:
                return self.reply(403, '{"code":"InvalidSignature"}', "application/json")
            if int(t) < now:
                return self.reply(403, '{"code":"SignatureExpired"}', "application/json")
            log(f"alibaba {host} subnet={q.get('ip', 'none')}")
            body = {"host": host, "ips": [answer_for(ip=q.get("ip"))], "ipsv6": [], "ttl": 60, "origin_ttl": 60}
            return self.reply(200, json.dumps(body), "application/json")
        if url.path == f"/{ACCOUNT}/sign_resolve":
            hosts, t = q["host"], q["t"]
            expected = hashlib.md5(f"{hosts}-".encode() + SECRET.hex().encode() + f"-{t}".encode()).hexdigest()
            if not hmac.compare_digest(expected, q["s"]) or not now <= int(t) <= now + 86400:
                return self.reply(403, '{"code":"InvalidSignature"}', "application/json")
            names = hosts.split(",")
            if len(names) > 5:
                return self.reply(400, '{"code":"TooManyHosts"}', "application/json")
            log(f"alibaba-batch {hosts} query={q.get('query', '4')} subnet={q.get('ip', 'none')}")
            items = [{"host": h, "ips": [answer_for(ip=q.get("ip"))], "type": 1, "ttl": 60} for h in names]
            if "6" in q.get("query", "4"):
                items += [{"host": h, "ips": [], "type": 28, "ttl": 60} for h in names]
            return self.reply(200, json.dumps({"dns": items}), "application/json")
        if url.path == "/v2/d":
            signed = "&".join(f"{k}={q[k]}" for k in sorted(q) if k != "s")
            expected = hmac.new(SECRET, signed.encode(), hashlib.sha256).hexdigest()
            log(f"alibaba-v2-signed {q.get('dn')} t-now={int(q['exp']) - now}")
            if q.get("id") != ACCOUNT or not hmac.compare_digest(expected, q.get("s", "")) \
                    or int(q["exp"]) > now + 86400:
                return self.reply(403, '{"code":"InvalidSignature"}', "application/json")
            if int(q["exp"]) < now:
                return self.reply(403, '{"code":"SignatureExpired"}', "application/json")
            mode = int(q.get("m", "0"))
            fields = q if mode == 0 else json.loads(v2_open(mode, bytes.fromhex(q["enc"])))
            names = fields["dn"].split(",")
            if len(names) > 5:
                return self.reply(400, '{"code":"TooManyHosts"}', "application/json")
            log(f"alibaba-v2 m={mode} {fields['dn']} q={fields.get('q', '4')} subnet={fields.get('cip', 'none')}")
            families = fields.get("q", "4").split(",")
            answers = [{"dn": dn} for dn in names]
            for answer in answers:
                if "4" in families:
                    answer["v4"] = {"ips": [answer_for(ip=fields.get("cip"))], "ttl": 60}
                if "6" in families:
                    answer["v6"] = {"ips": [], "ttl": 60, "no_ip_code": "RRNotExist"}
            data = {"cip": "127.0.0.1", "answers": answers}
            if mode:
                data = base64.b64encode(v2_seal(mode, json.dumps(data).encode())).decode()
            body = {"code": "success", "mode": str(mode), "data": data}
            return self.reply(200, json.dumps(body), "application/json")
        self.reply(404, "not found")


class ThreadingUDP(socketserver.ThreadingMixIn, socketserver.UDPServer):
    daemon_threads = True


class ThreadingHTTP(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


# A test process may start us with SIGTERM blocked or ignored (both survive exec: Foundation's Process
# spawns from threads that block signals): take it back, and leave when the process that started us is
# gone (a test killed by a timeout stops nothing itself).
signal.signal(signal.SIGTERM, signal.SIG_DFL)
signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
parent = os.getppid()


def watch_parent():
    while os.getppid() == parent:
        time.sleep(1)
    os._exit(0)


threading.Thread(target=watch_parent, daemon=True).start()
udp = ThreadingUDP(("127.0.0.1", 0), UDP)


def web_and_replicas():
    """The HTTP endpoint on a free port of 127.0.0.1, and the same port on two more loopback addresses:
    the service IPs the scheduling answers point to. The kernel chooses a port free on 127.0.0.1 only;
    another test's listener may hold it on 127.0.0.2 or .3 (the parallel suite runs several of us). After
    a taken port, ports of the ephemeral range are tried at random: in a network namespace with a small
    range, the kernel's own choice came back to the taken ports 8 times of 8."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low, high = (int(n) for n in f.read().split())
    for attempt in range(200):
        servers = []
        try:
            port = 0 if attempt == 0 else random.randint(low, high)
            servers.append(ThreadingHTTP(("127.0.0.1", port), HTTP))
            for address in ("127.0.0.2", "127.0.0.3"):
                servers.append(ThreadingHTTP((address, servers[0].server_address[1]), HTTP))
            return servers[0], servers[1:]
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                raise
            for server in servers:
                server.server_close()
    sys.exit("ecs_peer: no port free on 127.0.0.1, 127.0.0.2 and 127.0.0.3 in 200 tries")


web, replicas = web_and_replicas()
# And one at its own port: the service IP with a port of its own (service_ip_port).
alt = ThreadingHTTP(("127.0.0.3", 0), HTTP)
for server in (udp, web, *replicas, alt):
    threading.Thread(target=server.serve_forever, daemon=True).start()
print(f"udp={udp.server_address[1]} http={web.server_address[1]} alt={alt.server_address[1]}", flush=True)
threading.Event().wait()
