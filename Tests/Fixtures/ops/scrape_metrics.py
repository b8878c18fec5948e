#!/usr/bin/env python3
"""Scrapes a Prometheus endpoint and parses it with the reference client's own parser
(prometheus_client, from PyPI): prints one JSON object {"name{label="value",...}": value, ...}.
A page the parser rejects is an error (exit 1), so the test fails on malformed exposition text.

Usage: scrape_metrics.py URL [CA_FILE]   (CA_FILE: the CA an https URL's certificate is checked against)
"""
import json
import ssl
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def main() -> int:
    context = ssl.create_default_context(cafile=sys.argv[2]) if len(sys.argv) > 2 else None
    with urllib.request.urlopen(sys.argv[1], timeout=10, context=context) as response:
        content_type = response.headers.get("content-type", "")
        text = response.read().decode("utf-8")
    if not content_type.startswith("text/plain"):
        print(f"unexpected content-type {content_type!r}", file=sys.stderr)
        return 1
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}"] = sample.value
    json.dump(samples, sys.stdout, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
