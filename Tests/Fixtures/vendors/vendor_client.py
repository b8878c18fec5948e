#!/usr/bin/env python3
"""An independent client of the commercial HTTPDNS forms, to check `httpdns serve` speaks them as the
vendors' SDKs do. Nothing of ours is used: the ciphers are OpenSSL's (`openssl enc`), the
signature is Python's hashlib, the HTTP is Python's http.client.

Usage: vendor_client.py FORM BASE_URL ID SECRET_FILE NAME [CA_FILE]
  FORM  aes | des | token      Tencent Cloud DNSPod /d (prints the decrypted answer text)
        alibaba                Alibaba Cloud EMAS /ID/sign_d (prints the JSON answer)
        alibaba-v2             Alibaba Cloud EMAS /v2/d, plain mode, HMAC-SHA256 (prints the JSON answer)
        alibaba-v2-cip         the same with cip=203.0.113.7 inside the signature (the Android SDK's signer
                               lists cip)
        alibaba-v2-unsigned    /v2/d with no exp and no s, as an app without a secret sends it
        alibaba-ss             /ID/ss signed as the C SDK signs it (hdns_sign.c): n = 12 hex characters,
                               t = now, s = md5("n-SECRET-t") (prints the JSON list)
        dnspod-conf            DNSPod /conf?token=TOKEN with no id, as the Android SDK's ConfigFromServer
                               sends it over HTTPS (prints the text)
Exit 0 with the answer on stdout; 1 with the HTTP status and body on stderr.
"""
import hashlib
import hmac
import http.client
import os
import ssl
import subprocess
import sys
import time
import urllib.parse


def openssl(args, data):
    return subprocess.run(["openssl", "enc", *args], input=data, capture_output=True, check=True).stdout


DES = ["-des-ecb", "-provider", "legacy", "-provider", "default"]


def get(base, target, ca):
    url = urllib.parse.urlsplit(base)
    if url.scheme == "https":
        context = ssl.create_default_context(cafile=ca)
        conn = http.client.HTTPSConnection(url.hostname, url.port, context=context, timeout=10)
    else:
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=10)
    conn.request("GET", target)
    response = conn.getresponse()
    return response.status, response.read()


def main():
    form, base, account, secret_file, name = sys.argv[1:6]
    ca = sys.argv[6] if len(sys.argv) > 6 else None
    secret = open(secret_file, "rb").read().strip()
    if form == "alibaba-ss":
        nonce, now = os.urandom(6).hex(), int(time.time())
        signature = hashlib.md5(f"{nonce}-".encode() + secret + f"-{now}".encode()).hexdigest()
        query = urllib.parse.urlencode(
            {"region": "global", "platform": "linux", "sdk_version": "2.4.0", "n": nonce, "t": now, "s": signature}
        )
        status, body = get(base, f"/{account}/ss?{query}", ca)
        if status != 200:
            sys.exit(f"HTTP {status} {body.decode(errors='replace')}")
        print(body.decode())
        return
    if form == "dnspod-conf":
        status, body = get(base, "/conf?" + urllib.parse.urlencode({"token": secret.decode()}), ca)
        if status != 200 or not body:
            sys.exit(f"HTTP {status} with {'an empty' if not body else 'a'} body")
        print(body.decode())
        return
    if form.startswith("alibaba-v2"):
        try:
            key = bytes.fromhex(secret.decode())
        except ValueError:
            key = secret  # not hex: a wrong key on purpose, the signature will not match
        params = {"id": account, "m": "0", "exp": str(int(time.time()) + 600), "v": "1.0", "dn": name, "q": "4,6"}
        if form == "alibaba-v2-cip":
            params["cip"] = "203.0.113.7"
        if form == "alibaba-v2-unsigned":
            del params["exp"]
        else:
            signed = "&".join(f"{k}={params[k]}" for k in sorted(params))
            params["s"] = hmac.new(key, signed.encode(), hashlib.sha256).hexdigest()
        status, body = get(base, "/v2/d?" + urllib.parse.urlencode(params), ca)
        if status != 200:
            sys.exit(f"HTTP {status} {body.decode(errors='replace')}")
        print(body.decode())
        return
    if form == "alibaba":
        expiry = int(time.time()) + 600
        signature = hashlib.md5(f"{name}-".encode() + secret + f"-{expiry}".encode()).hexdigest()
        query = urllib.parse.urlencode({"host": name, "query": "4,6", "t": expiry, "s": signature})
        status, body = get(base, f"/{account}/sign_d?{query}", ca)
        if status != 200:
            sys.exit(f"HTTP {status} {body.decode(errors='replace')}")
        print(body.decode())
        return
    params = {"clientip": "1", "ttl": "1", "id": account, "type": "addrs"}
    if form == "aes":
        iv = os.urandom(16)
        sealed = openssl(["-aes-128-cbc", "-K", secret.hex(), "-iv", iv.hex()], name.encode())
        params.update(dn=iv.hex() + sealed.hex(), alg="aes")
    elif form == "des":
        params.update(dn=openssl([*DES, "-K", secret[:8].hex()], name.encode()).hex(), alg="des")
    else:
        params.update(dn=name, token=secret.decode())
    status, body = get(base, "/d?" + urllib.parse.urlencode(params), ca)
    if status != 200 or not body:
        sys.exit(f"HTTP {status} with {'an empty' if not body else 'a'} body")
    text = body.decode().strip()
    if form == "aes":
        raw = bytes.fromhex(text)
        text = openssl(["-d", "-aes-128-cbc", "-K", secret.hex(), "-iv", raw[:16].hex()], raw[16:]).decode()
    elif form == "des":
        text = openssl(["-d", *DES, "-K", secret[:8].hex()], bytes.fromhex(text)).decode()
    print(text)


main()
