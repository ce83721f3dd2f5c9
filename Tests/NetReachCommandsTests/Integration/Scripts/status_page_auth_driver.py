#!/usr/bin/env python3
"""Opens `netreach serve`'s status page behind --web.config.file in headless Chromium, as a person
would: the browser is challenged for a password (DevTools' Fetch.authRequired, where a person
sees the prompt), first refuses it, then gives USER and PASSWORD; prints one JSON object of what
the page showed, for ServeWebConfigTests.

    status_page_auth_driver.py URL USER PASSWORD CA

The certificate is checked by Chromium against CA: its SPKI hash is the one certificate accepted
without a system store (--ignore-certificate-errors-spki-list), so a wrong server is still
refused.
"""
import base64
import hashlib
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chromium import Browser  # noqa: E402

URL, USER, PASSWORD, LEAF = sys.argv[1:5]


def spki_hash(pem_path):
    """base64(sha256(SubjectPublicKeyInfo)) of the certificate at pem_path, as Chromium wants it."""
    der = subprocess.run(["openssl", "x509", "-in", pem_path, "-pubkey", "-noout"],
                         check=True, capture_output=True).stdout
    spki = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=der,
                          check=True, capture_output=True).stdout
    return base64.b64encode(hashlib.sha256(spki).digest()).decode()


def answer_challenges(browser, respond, deadline):
    """Answers each auth challenge with `respond` and lets other paused requests go, until the
    page has loaded or `deadline`; how many challenges there were."""
    challenges = 0
    while time.monotonic() < deadline:
        event = browser.next_event(("Fetch.authRequired", "Fetch.requestPaused", "Page.loadEventFired"))
        params = event.get("params", {})
        if event["method"] == "Page.loadEventFired":
            return challenges
        if event["method"] == "Fetch.requestPaused":
            browser.page("Fetch.continueRequest", requestId=params["requestId"])
            continue
        challenges += 1
        browser.page("Fetch.continueWithAuth", requestId=params["requestId"], authChallengeResponse=respond)
    return challenges


browser = Browser(flags=["--ignore-certificate-errors-spki-list=" + spki_hash(LEAF)])
report = {}
try:
    browser.page("Page.enable")
    browser.page("Fetch.enable", handleAuthRequests=True)
    # 1. The person cancels the prompt: the page says it is not authorised, nothing of the paths.
    browser.send("Page.navigate", session=browser.session, url=URL)
    report["refusedChallenges"] = answer_challenges(
        browser, {"response": "CancelAuth"}, time.monotonic() + 30)
    report["refusedText"] = browser.evaluate("document.body ? document.body.innerText : ''") or ""
    # 2. The person types the password: the page loads, and its event stream (a request of its
    # own, which the browser sends with the same credentials) fills the table.
    browser.send("Page.navigate", session=browser.session, url=URL)
    report["challenges"] = answer_challenges(
        browser, {"response": "ProvideCredentials", "username": USER, "password": PASSWORD},
        time.monotonic() + 30)
    # From here no request is held or answered for the browser: what follows goes with what it
    # remembered of the password, as after a person's one prompt.
    browser.page("Fetch.disable")
    report["pathShown"] = browser.until("document.querySelectorAll('#paths tbody tr').length > 0", 30)
    report["streamOpen"] = browser.until("""
      (() => { if (!window.__probe) { window.__probe = new EventSource("/api/v1/events");
                 window.__probe.addEventListener("path", () => window.__heard = true); }
               return window.__heard === true; })()""", 30)
finally:
    browser.close()
print(json.dumps(report))
