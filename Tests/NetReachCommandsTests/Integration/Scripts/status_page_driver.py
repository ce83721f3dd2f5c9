#!/usr/bin/env python3
"""Drives `netreach serve`'s status page in headless Chromium (the DevTools protocol over
--remote-debugging-pipe: no WebSocket library needed) while a lab namespace's default route
comes and goes, and prints one JSON object of what the page did, for StatusPageTests.

    status_page_driver.py URL LAB GATEWAY SCREENSHOT_DIR [ISOLATED]

With ISOLATED (a namespace with no route the server also watches; run this inside LAB, where the
server runs, so LAB's path is the server's own), the scenario is instead: the page must follow
LAB's path, not ISOLATED's, whichever it heard of first; then LAB's default route goes.

The page's own clock (performance.now) times the overlay against the events it received, so the
verdicts do not depend on how fast this machine is: "shown N ms after the unsatisfied event".
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chromium import Browser  # noqa: E402

URL, LAB, GATEWAY, SHOTS = sys.argv[1:5]
ISOLATED = sys.argv[5] if len(sys.argv) > 5 else None


def ip(*arguments):
    subprocess.run(["ip", "-n", LAB] + list(arguments), check=True)


# Instruments the page: when each path event arrived and when the overlay showed or hid, by the
# page's own clock.
PROBE = """
(() => {
  window.__log = [];
  const source = new EventSource("/api/v1/events");   // a second reader, for arrival times only
  source.addEventListener("path", m => {
    const e = JSON.parse(m.data);
    if (!e.destination) window.__log.push({kind: e.path.status, at: performance.now()});
  });
  const overlay = document.getElementById("overlay");
  // "pending": the page's own handler took the path event and started the grace period's timer.
  new MutationObserver(records => {
    const at = performance.now();
    for (const record of records) {
      if (record.attributeName === "hidden") window.__log.push({kind: overlay.hidden ? "hidden" : "shown", at});
      else if (overlay.dataset.indicator === "pending") window.__log.push({kind: "pending", at});
    }
  }).observe(overlay, {attributes: true, attributeFilter: ["hidden", "data-indicator"]});
  return true;
})()
"""

def row(namespace):
    """The status cell of the internet path's row for `namespace` ("" for the server's own)."""
    key = json.dumps([namespace, ""], separators=(",", ":"))
    return ("[...document.querySelectorAll('#paths tbody tr')].find(r => r.dataset.key === %s)"
            "?.children[2]" % json.dumps(key))


FIRST_HEARD = """
new Promise(resolve => {
  const source = new EventSource("/api/v1/events");
  source.addEventListener("path", m => {
    const e = JSON.parse(m.data);
    if (!e.destination) { source.close(); resolve(e.namespace || ""); }
  });
})
"""


def isolated_scenario(browser):
    """The host's own path satisfied, ISOLATED's not: no overlay; then the host's path goes."""
    report = {}
    browser.page("Page.navigate", url=URL)
    report["loaded"] = browser.until(
        "%s?.className === 'satisfied' && %s?.className === 'unsatisfied'" % (row(""), row(ISOLATED)), 30)
    # Which namespace's internet path a client hears of first (a new stream starts with the
    # current state, in the order the server first had each; the page's did the same).
    report["firstHeard"] = browser.evaluate(FIRST_HEARD, await_promise=True)
    report["isolatedRow"] = browser.evaluate("%s?.parentElement.textContent" % row(ISOLATED))
    # Pending would mean the isolated path is being followed: the overlay would show after the
    # grace period. Then past the grace period, by the page's own clock, it still has not.
    report["indicatorState"] = browser.evaluate("indicator.state")
    browser.evaluate("window.__since = performance.now()")
    browser.until("performance.now() - window.__since > GRACE_MS + 1000", 30)
    report["hiddenAfterGrace"] = browser.evaluate("document.getElementById('overlay').hidden")
    browser.screenshot("4-isolated-namespace.png")

    ip("route", "del", "default")
    report["outageShown"] = browser.until("!document.getElementById('overlay').hidden", 15)
    report["overlayText"] = browser.evaluate("document.getElementById('overlay').textContent")
    browser.screenshot("5-host-offline.png")
    ip("route", "add", "default", "via", GATEWAY)
    report["recoveryHidden"] = browser.until("document.getElementById('overlay').hidden", 15)
    return report


report = {}
browser = Browser(shots=SHOTS)
try:
    if ISOLATED:
        browser.page("Page.enable")
        print(json.dumps(isolated_scenario(browser)))
        sys.exit(0)
    browser.page("Page.enable")
    browser.page("Page.navigate", url=URL)
    report["loaded"] = browser.until("document.querySelector('#paths td.satisfied') !== null", 30)
    report["pathShown"] = browser.evaluate("document.querySelector('#paths tbody').textContent")
    browser.evaluate(PROBE)
    time.sleep(0.5)   # the probe's own stream starts with the current state
    browser.screenshot("1-satisfied.png")

    # A blip, 0.5 s: shorter than the grace period.
    browser.evaluate("window.__log = []")
    ip("route", "del", "default")
    time.sleep(0.5)
    ip("route", "add", "default", "via", GATEWAY)
    time.sleep(3.5)
    report["blip"] = browser.evaluate("window.__log")
    report["blipShowedOverlay"] = browser.evaluate("window.__log.some(e => e.kind === 'shown')")

    # An outage: the overlay comes after the grace period and stays until the route is back.
    browser.evaluate("window.__log = []")
    ip("route", "del", "default")
    report["outageShown"] = browser.until("!document.getElementById('overlay').hidden", 15)
    browser.screenshot("2-offline.png")
    report["overlayText"] = browser.evaluate("document.getElementById('overlay').textContent")
    ip("route", "add", "default", "via", GATEWAY)
    report["recoveryHidden"] = browser.until("document.getElementById('overlay').hidden", 15)
    time.sleep(0.3)
    browser.screenshot("3-recovered.png")
    report["outage"] = browser.evaluate("window.__log")
    report["grace"] = browser.evaluate("GRACE_MS")
    report["minimum"] = browser.evaluate("MINIMUM_MS")
    report["changes"] = browser.evaluate("document.getElementById('changes').children.length")
finally:
    browser.close()
print(json.dumps(report))
