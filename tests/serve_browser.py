#!/usr/bin/env python3
"""serve_browser.py — drives headless Chromium through the DevTools protocol
over --remote-debugging-pipe (NUL-separated JSON on fds 3/4: no websocket
library needed) against the `projmt serve` page: loads it, types a sentence
key by key, waits for the translation and the heatmap, checks the DOM,
switches to a head tab and saves a screenshot.

usage: serve_browser.py URL SCREENSHOT.png "SENTENCE" "EXPECTED TRANSLATION" [CHROMIUM]
Prints one JSON line with what the DOM showed; exit 0 when every check held,
1 otherwise (each failure printed as "FAIL: ...").
Waits are bounded in polls (a hang fails), never timed as assertions."""
import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


class Browser:
    def __init__(self, chromium, profile):
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        # The child's ends move above fd 10 first, so that dup2 onto 3 and 4
        # always copies (a pipe already on fd 3 would keep its close-on-exec).
        to_child_r = self._above_ten(to_child_r)
        from_child_w = self._above_ten(from_child_w)

        def wire_pipes():  # chromium reads commands on fd 3, answers on fd 4
            os.dup2(to_child_r, 3)
            os.dup2(from_child_w, 4)

        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--hide-scrollbars", "--window-size=1280,900", f"--user-data-dir={profile}",
                 "--remote-debugging-pipe", "about:blank"]
        self.proc = subprocess.Popen([chromium] + flags, preexec_fn=wire_pipes, close_fds=False,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        self.buffer = b""
        self.next_id = 0
        self.session = None

    @staticmethod
    def _above_ten(fd):
        moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(fd)
        return moved

    def send(self, method, params=None, session=True):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self.to_child, json.dumps(message).encode() + b"\0")
        while True:  # events arrive in between; keep the answer to this id
            while b"\0" not in self.buffer:
                chunk = os.read(self.from_child, 1 << 16)
                if not chunk:
                    raise RuntimeError("chromium closed the DevTools pipe")
                self.buffer += chunk
            raw, self.buffer = self.buffer.split(b"\0", 1)
            answer = json.loads(raw)
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})

    def evaluate(self, expression):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"page error: {result['exceptionDetails']}")
        return result["result"].get("value")

    def poll(self, expression, tries=600, pause=0.1):
        for _ in range(tries):
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(pause)
        return None

    def close(self):
        try:
            self.send("Browser.close", session=False)
        except (RuntimeError, OSError):
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


STATE_JS = """JSON.stringify({
  translation: document.getElementById('translation').textContent,
  rows: Number(document.getElementById('heatmap').dataset.rows || 0),
  cols: Number(document.getElementById('heatmap').dataset.cols || 0),
  cells: document.querySelectorAll('#heatmap td.cell').length,
  head: document.getElementById('heatmap').dataset.head || '',
  tabs: [...document.querySelectorAll('#head-tabs button')].map(b => b.textContent),
  facts: document.getElementById('facts').textContent,
  status: document.getElementById('status').textContent,
  external: [...document.querySelectorAll('[src],link[href]')].length})"""


def main():
    url, screenshot, sentence, expected = sys.argv[1:5]
    chromium = sys.argv[5] if len(sys.argv) > 5 else "chromium"
    profile = tempfile.mkdtemp(prefix="projmt-chromium-")
    browser = Browser(chromium, profile)
    failures = []
    try:
        target = browser.send("Target.createTarget", {"url": "about:blank"}, session=False)
        browser.session = browser.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True},
                                       session=False)["sessionId"]
        browser.send("Emulation.setDeviceMetricsOverride",
                     {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False})
        browser.send("Page.navigate", {"url": url})
        if not browser.poll("document.readyState === 'complete' && "
                            "document.getElementById('beam') !== null && "
                            "document.getElementById('beam').options.length > 0"):
            failures.append("the page did not load its model facts")
        browser.evaluate("document.getElementById('source').focus()")
        for ch in sentence:  # one key at a time: the page debounces the input events
            browser.send("Input.insertText", {"text": ch})
        done = browser.poll("document.getElementById('translation').textContent.length > 0 && "
                            "document.querySelectorAll('#heatmap td.cell').length > 0 && "
                            "!document.getElementById('status').textContent.startsWith('translating')")
        if not done:
            failures.append("no translation and heatmap appeared")
        state = json.loads(browser.evaluate(STATE_JS))
        if state["translation"] != expected:
            failures.append(f"translation {state['translation']!r} != expected {expected!r}")
        if state["rows"] < 1 or state["cols"] < 2 or state["cells"] != state["rows"] * state["cols"]:
            failures.append(f"heatmap shape: {state['rows']} x {state['cols']} with {state['cells']} cells")
        if state["tabs"][:2] != ["mean", "head 1"] or state["head"] != "mean":
            failures.append(f"head tabs {state['tabs']} (active {state['head']})")
        if "parameters" not in state["facts"] or "decoder cross" not in state["facts"]:
            failures.append(f"model facts missing: {state['facts']!r}")
        if state["external"]:
            failures.append(f"{state['external']} elements load external resources")
        # A head tab shows that head's weights.
        browser.evaluate("[...document.querySelectorAll('#head-tabs button')].find(b => b.textContent === 'head 2')"
                         "?.click()")
        head = browser.evaluate("document.getElementById('heatmap').dataset.head")
        if head != "head 2":
            failures.append(f"clicking 'head 2' shows {head!r}")
        browser.evaluate("[...document.querySelectorAll('#head-tabs button')].find(b => b.textContent === 'mean')"
                         "?.click()")
        shot = browser.send("Page.captureScreenshot", {"format": "png"})
        with open(screenshot, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        state["screenshot_bytes"] = os.path.getsize(screenshot)
        print(json.dumps(state, ensure_ascii=False))
    except (RuntimeError, OSError, KeyError, ValueError) as e:
        failures.append(str(e))
    finally:
        browser.close()
        shutil.rmtree(profile, ignore_errors=True)
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
