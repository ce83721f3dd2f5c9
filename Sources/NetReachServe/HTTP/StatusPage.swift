import NetReachConnectivity

/// `GET /`: a status page for people, served by the binary itself (no CDN, no build step). It
/// reads `/api/v1/events` with the browser's `EventSource` and shows every path (status, reason,
/// interfaces, gateways), the connectivity verdict with a portal's login link, and recent changes.
/// An "offline" overlay follows ``OfflineIndicatorPolicy``'s rules, with the library's own grace
/// period and minimum display time written into the page: it shows once the host's path to the
/// internet has been unsatisfied (or connectivity none or local) for the grace period, so a blip
/// shows nothing, and stays up at least the minimum time. The host's path is the server's own
/// namespace's (`namespace` empty), whichever event came first: another namespace, however long it
/// is down (one isolated by design, under `--all-namespaces`), is a row of its own and never the
/// overlay. Only when the server watches no namespace of its own (`--namespace` alone) does the
/// overlay follow the first namespace's path it hears of.
///
/// ```swift
/// let html = StatusPage.html(policy: OfflineIndicatorPolicy())
/// ```
package enum StatusPage {
    package static func html(policy: OfflineIndicatorPolicy = OfflineIndicatorPolicy()) -> String {
        template
            .replacing("@GRACE_MS@", with: String(milliseconds(policy.gracePeriod)))
            .replacing("@MINIMUM_MS@", with: String(milliseconds(policy.minimumDisplayTime)))
    }

    private static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }

    private static let template = #"""
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>netreach</title>
        <style>
          body { font: 15px/1.4 system-ui, sans-serif; margin: 0; color: #1d1d1f; background: #f5f5f7; }
          header, main { max-width: 60rem; margin: 0 auto; padding: 1rem 1.5rem; }
          h1 { font-size: 1.4rem; margin: 0.5rem 0; }
          h2 { font-size: 1.05rem; margin: 1.5rem 0 0.5rem; }
          table { border-collapse: collapse; width: 100%; background: #fff; }
          th, td { text-align: left; padding: 0.4rem 0.6rem; border-bottom: 1px solid #e5e5ea; vertical-align: top; }
          .satisfied { color: #1a7f37; font-weight: 600; }
          .unsatisfied, .requiresConnection { color: #c62828; font-weight: 600; }
          #stream { color: #6e6e73; font-size: 0.9rem; }
          #changes { font-family: ui-monospace, monospace; font-size: 0.85rem; padding-left: 1.2rem; }
          #overlay { position: fixed; inset: 0; background: rgba(29, 29, 31, 0.82); color: #fff;
                     display: flex; align-items: center; justify-content: center; text-align: center; }
          #overlay[hidden] { display: none; }
          #overlay strong { font-size: 2rem; display: block; }
        </style>
        </head>
        <body>
        <div id="overlay" hidden role="alert" data-offline="false">
          <div><strong>Offline</strong><span id="overlay-reason"></span></div>
        </div>
        <header>
          <h1>netreach</h1>
          <p id="stream">connecting…</p>
        </header>
        <main>
          <h2>Paths</h2>
          <table id="paths">
            <thead><tr><th>Namespace</th><th>Destination</th><th>Status</th><th>Interfaces</th><th>Gateways</th></tr></thead>
            <tbody></tbody>
          </table>
          <section id="internet" hidden>
            <h2>Internet</h2>
            <p id="connectivity"></p>
          </section>
          <h2>Recent changes</h2>
          <ol id="changes" reversed></ol>
        </main>
        <script>
        "use strict";
        // OfflineIndicatorPolicy, as the library sets it.
        const GRACE_MS = @GRACE_MS@, MINIMUM_MS = @MINIMUM_MS@;
        const paths = new Map();
        // The path the overlay follows: the internet path in the server's own namespace (OWN); a
        // named namespace's only while the server watches none of its own.
        const OWN = JSON.stringify(["", ""]);
        let primary = null;
        let connectivityLevel = null;
        const overlay = document.getElementById("overlay");
        // The indicator's state: hidden, pending (offline, within the grace period) or shown,
        // mirrored on the overlay's data-indicator attribute for whoever watches the page.
        let indicator = { state: "hidden", timer: null, shownAt: 0 };

        function enter(state) {
          indicator.state = state;
          overlay.dataset.indicator = state;
        }

        function text(value) { return value === null || value === undefined ? "" : String(value); }

        function isOffline() {
          const path = primary && paths.get(primary);
          if (path && path.status !== "satisfied") return true;
          return connectivityLevel === "none" || connectivityLevel === "local";
        }

        function updateIndicator() {
          const offline = isOffline();
          const now = performance.now();
          if (offline && indicator.state === "hidden") {
            enter("pending");
            indicator.timer = setTimeout(show, GRACE_MS);
          } else if (!offline && indicator.state === "pending") {
            clearTimeout(indicator.timer);
            enter("hidden");
          } else if (!offline && indicator.state === "shown") {
            clearTimeout(indicator.timer);
            indicator.timer = setTimeout(hide, Math.max(0, indicator.shownAt + MINIMUM_MS - now));
          } else if (offline && indicator.state === "shown") {
            clearTimeout(indicator.timer);   // a pending hide: still offline
          }
        }

        function show() {
          enter("shown");
          indicator.shownAt = performance.now();
          const path = primary && paths.get(primary);
          document.getElementById("overlay-reason").textContent =
            path && path.unsatisfiedReason ? " (" + path.unsatisfiedReason + ")" : "";
          overlay.hidden = false;
          overlay.dataset.offline = "true";
        }

        function hide() {
          enter("hidden");
          overlay.hidden = true;
          overlay.dataset.offline = "false";
        }

        function render() {
          const body = document.querySelector("#paths tbody");
          body.replaceChildren();
          for (const [key, path] of [...paths.entries()].sort()) {
            const [namespace, destination] = JSON.parse(key);
            const row = document.createElement("tr");
            row.dataset.key = key;
            const cells = [
              namespace || "(this one)",
              destination || "internet",
              path.status + (path.unsatisfiedReason ? " (" + path.unsatisfiedReason + ")" : ""),
              (path.availableInterfaces || []).map(i => i.name + " (" + i.type + ")").join(", "),
              (path.gateways || []).join(", "),
            ];
            cells.forEach((value, index) => {
              const cell = document.createElement("td");
              cell.textContent = value;
              if (index === 2) cell.className = path.status;
              row.appendChild(cell);
            });
            body.appendChild(row);
          }
        }

        function note(line) {
          const list = document.getElementById("changes");
          const item = document.createElement("li");
          item.textContent = new Date().toISOString().slice(11, 23) + " " + line;
          list.prepend(item);
          while (list.children.length > 20) list.lastChild.remove();
        }

        const events = new EventSource("/api/v1/events");
        events.onopen = () => { document.getElementById("stream").textContent = "live"; };
        events.onerror = () => { document.getElementById("stream").textContent = "reconnecting…"; };
        events.addEventListener("path", message => {
          const event = JSON.parse(message.data);
          const key = JSON.stringify([text(event.namespace), text(event.destination)]);
          const name = (event.destination || "internet") + (event.namespace ? " in " + event.namespace : "");
          if (event.path === null) {   // no longer watched (a reload, a namespace gone)
            paths.delete(key);
            if (primary === key) primary = null;
            render();
            note(name + ": no longer watched");
            updateIndicator();
            return;
          }
          if (key === OWN || (primary === null && !event.destination)) primary = key;
          paths.set(key, event.path);
          render();
          note(name + ": " + event.path.status +
               (event.path.unsatisfiedReason ? " (" + event.path.unsatisfiedReason + ")" : ""));
          updateIndicator();
        });
        events.addEventListener("connectivity", message => {
          const verdict = JSON.parse(message.data).connectivity.connectivity;
          connectivityLevel = verdict.level;
          const section = document.getElementById("internet");
          const paragraph = document.getElementById("connectivity");
          section.hidden = false;
          paragraph.replaceChildren("The internet: " + verdict.level);
          if (verdict.loginURL && /^https?:\/\//.test(verdict.loginURL)) {
            const link = document.createElement("a");
            link.href = verdict.loginURL;
            link.textContent = "sign in";
            paragraph.append(" — ", link);
          }
          note("internet: " + verdict.level);
          updateIndicator();
        });
        events.addEventListener("namespace", message => {
          const event = JSON.parse(message.data);
          note("namespace " + (event.namespace || "(this one)") +
               (event.watched === false ? " no longer watched" : event.available ? " observable" : " gone"));
        });
        events.addEventListener("shutdown", () => {
          document.getElementById("stream").textContent = "the server stopped";
          events.close();
        });
        </script>
        </body>
        </html>
        """#
}
