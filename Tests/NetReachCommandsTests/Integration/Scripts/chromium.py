"""Headless Chromium driven over the DevTools protocol on --remote-debugging-pipe (no WebSocket
library needed), for the drivers that test serve's status page in a real browser.

    from chromium import Browser
    browser = Browser(shots="/tmp/shots")
    browser.page("Page.navigate", url="http://127.0.0.1:9817/")
"""
import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time


class Browser:
    def __init__(self, shots=None, flags=()):
        self.shots = shots
        self.profile = tempfile.mkdtemp(prefix="netreach-chromium-")
        to_browser_read, self.to_browser = os.pipe()
        self.from_browser, from_browser_write = os.pipe()
        # The pipe's descriptors must be 3 (commands) and 4 (answers) in the child. Through high
        # numbers first, so neither move overwrites the other; 3 and 4 are then kept open by
        # pass_fds (the child closes every other descriptor after this runs).
        def arrange():
            high_read = fcntl.fcntl(to_browser_read, fcntl.F_DUPFD, 10)
            high_write = fcntl.fcntl(from_browser_write, fcntl.F_DUPFD, 10)
            os.dup2(high_read, 3)
            os.dup2(high_write, 4)
        self.process = subprocess.Popen(
            ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--remote-debugging-pipe", "--user-data-dir=" + self.profile,
             "--window-size=1000,700"] + list(flags) + ["about:blank"],
            preexec_fn=arrange, pass_fds=(3, 4),
            # Its singleton socket's directory goes in TMPDIR: inside the profile, removed with it.
            env=dict(os.environ, TMPDIR=self.profile),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_read)
        os.close(from_browser_write)
        self.buffer = b""
        self.next_id = 0
        # Events that arrived while an answer was awaited, for next_event().
        self.events = []
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.call("Target.attachToTarget", targetId=page["targetId"], flatten=True)["sessionId"]

    def send(self, method, session=None, **params):
        """Sends a command without waiting for its answer (one that may wait on events this
        program must answer first, as Page.navigate waits on a request held by Fetch); its id."""
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        return self.next_id

    def receive(self):
        """The next message from the browser (an answer or an event); events are also kept for
        next_event()."""
        while b"\0" not in self.buffer:
            chunk = os.read(self.from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed its pipe")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        message = json.loads(raw)
        if "method" in message:
            # Kept for next_event(); a driver that never asks for them keeps only the latest.
            self.events = self.events[-999:] + [message]
        return message

    def call(self, method, session=None, **params):
        sent = self.send(method, session, **params)
        while True:
            answer = self.receive()
            if answer.get("id") == sent:
                if "error" in answer:
                    raise RuntimeError("%s: %s" % (method, answer["error"]))
                return answer.get("result", {})

    def page(self, method, **params):
        return self.call(method, session=self.session, **params)

    def evaluate(self, expression, await_promise=False):
        result = self.page("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=await_promise)
        return result["result"].get("value")

    def screenshot(self, name):
        data = self.page("Page.captureScreenshot", format="png")["data"]
        with open(os.path.join(self.shots, name), "wb") as out:
            out.write(base64.b64decode(data))

    def close(self):
        self.process.kill()
        self.process.wait()
        # Chromium's profile is some 30 directories; every run used to leave one in /tmp.
        shutil.rmtree(self.profile, ignore_errors=True)

    def next_event(self, methods):
        """The next event named `methods` (a name, or a tuple of names), those already received
        first; blocks until one comes."""
        names = (methods,) if isinstance(methods, str) else methods
        while True:
            for index, event in enumerate(self.events):
                if event["method"] in names:
                    return self.events.pop(index)
            self.receive()

    def until(self, expression, timeout):
        """Whether `expression` became true in the page within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.evaluate(expression):
                return True
            time.sleep(0.05)
        return False
