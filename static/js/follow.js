// Live follow on a conversation page: what an agent writes shows up without a reload.
//
// Twice a second (while the tab is visible and Live is on) the page asks the
// conversation's state (`…/state`: rows, latest checkpoint, ledger version) with
// If-None-Match; nearly every answer is an empty 304, and no server thread is held
// between polls. When the state moved:
// - new rows: each `.rows[data-follow-url]` container asks its own page fragment for the
//   rows after the last one it shows (`?after=N`, or `?active_after=N`), once the reader
//   has reached the end of what is loaded; a row already on the page is never added
//   twice. A reader at the end stays pinned to it; a reader elsewhere gets an "N new
//   rows" button that goes to the newest row (loading the end of the record if needed).
// - a new checkpoint: both views are read again around the row at the top of the screen
//   (the fold line, the rows the model no longer sees, the active view all change), and
//   the header's figures with them.
// - the ledger: its panel is read again, and its marks in the record come with the rows
//   (`follow=1`: a mark recorded after the row it follows was already shown).
// The Live button shows the state (on, paused, fetching, stale) and turns it on and off.
(function () {
  "use strict";

  var DEFAULT_INTERVAL = 500;
  var USAGE_EVERY = 10000; // the totals and chart are re-read at most this often

  function containers() {
    return Array.prototype.slice.call(document.querySelectorAll(".rows[data-follow-url]"));
  }

  // The last position the container covers: its last row, or the end of the last chunk
  // of rows it holds or unloaded (static/js/far-rows.js), whichever is further.
  function lastPosition(container) {
    var last = Number(container.dataset.followStart || -1);
    var rows = container.querySelectorAll("article.msg[data-position]");
    if (rows.length) last = Math.max(last, Number(rows[rows.length - 1].dataset.position));
    container.querySelectorAll(":scope > [data-until]").forEach(function (chunk) {
      last = Math.max(last, Number(chunk.dataset.until));
    });
    return last;
  }

  function pending(container) {
    return container.querySelector("a.more[hx-get]") !== null;
  }

  function atEnd(container) {
    return container.getBoundingClientRect().bottom <= window.innerHeight + 120;
  }

  function interval() {
    var record = document.getElementById("record");
    var n = Number((record && record.dataset.followInterval) || 0);
    return n > 0 ? n : DEFAULT_INTERVAL;
  }

  // ---- rows --------------------------------------------------------------------

  function placeAfter(container, position) {
    var rows = container.querySelectorAll(":scope > article.msg[data-position], :scope > .chunk > article.msg[data-position]");
    for (var i = 0; i < rows.length; i++) {
      if (Number(rows[i].dataset.position) > position) return rows[i];
    }
    return container.querySelector(":scope > p.end, :scope > p.empty, :scope > a.more");
  }

  function placeMarks(container, fresh) {
    var last = lastPosition(container);
    Array.prototype.forEach.call(fresh.querySelectorAll(".ledger-mark[id]"), function (mark) {
      if (document.getElementById(mark.id)) return mark.remove();
      var after = Number(mark.dataset.after);
      if (after > last) return; // it follows one of the new rows: it comes with them
      var before = placeAfter(container, after);
      (before ? before.parentNode : container).insertBefore(mark, before);
    });
  }

  function insert(container, html, marker) {
    var template = document.createElement("template");
    template.innerHTML = html;
    var fresh = template.content;
    var added = [];
    Array.prototype.forEach.call(fresh.querySelectorAll("article.msg[id]"), function (row) {
      if (document.getElementById(row.id)) row.remove();
      else added.push(row);
    });
    placeMarks(container, fresh);
    if (!added.length) return;
    var pinned = atEnd(container);
    container.querySelectorAll(":scope > p.end, :scope > p.empty").forEach(function (node) { node.remove(); });
    if (!container.querySelector(".is-new-first")) added[0].classList.add("is-new-first");
    added.forEach(function (row) { row.classList.add("is-new"); });
    container.appendChild(fresh);
    if (window.htmx) window.htmx.process(container);
    if (pinned && container.offsetParent !== null) {
      // The reader was at the end: they stay there, and see the rows arrive.
      var last = added[added.length - 1];
      window.scrollBy(0, last.getBoundingClientRect().bottom - window.innerHeight + 16);
    } else if (container.dataset.followCount === "true") {
      marker.add(added);
    }
    container.dispatchEvent(new CustomEvent("follow:rows", { bubbles: true, detail: { rows: added } }));
  }

  function pollRows(container, marker) {
    if (container.dataset.busy === "1" || pending(container) || container.offsetParent === null) {
      return Promise.resolve(false);
    }
    container.dataset.busy = "1";
    var url = new URL(container.dataset.followUrl, window.location.href);
    url.searchParams.set(container.dataset.followParam || "after", String(lastPosition(container)));
    url.searchParams.set("follow", "1");
    return fetch(url.toString(), {
      headers: { "HX-Request": "true", "HX-Target": container.dataset.followTarget },
      credentials: "same-origin",
    })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.text();
      })
      .then(function (html) { insert(container, html, marker); return true; })
      .finally(function () { delete container.dataset.busy; });
  }

  // ---- panels and views ----------------------------------------------------------

  function fetchHtml(url, target) {
    var headers = { "HX-Request": "true" };
    if (target) headers["HX-Target"] = target;
    return fetch(url, { headers: headers, credentials: "same-origin" }).then(function (response) {
      if (!response.ok) throw new Error("HTTP " + response.status);
      return response.text();
    });
  }

  function swapInner(id, html) {
    var node = document.getElementById(id);
    if (!node) return;
    node.innerHTML = html;
    if (window.htmx) window.htmx.process(node);
  }

  function refreshPanel(name) {
    var slot = document.getElementById("ledger-slot");
    if (!slot) return Promise.resolve();
    var url = slot.dataset.panelUrl.replace(/\/ledger\/$/, "/" + name + "/");
    return fetchHtml(url).then(function (html) {
      if (name === "ledger") return swapInner("ledger-slot", html);
      var facts = document.getElementById("live-facts");
      if (facts) facts.outerHTML = html;
    });
  }

  var lastUsage = 0;
  function refreshUsage(force) {
    var usage = document.getElementById("usage");
    if (!usage || !usage.getAttribute("hx-get")) return;
    if (!force && Date.now() - lastUsage < USAGE_EVERY) return;
    lastUsage = Date.now();
    fetchHtml(usage.getAttribute("hx-get")).then(function (html) { usage.innerHTML = html; }).catch(function () {});
  }

  // The first row of the full record on screen: the views are read again around it.
  function topRow() {
    var rows = document.querySelectorAll("#record article.msg[data-position]");
    for (var i = 0; i < rows.length; i++) {
      var box = rows[i].getBoundingClientRect();
      if (box.bottom > 80) return { row: rows[i], top: box.top };
    }
    return null;
  }

  function refreshViews() {
    var views = document.getElementById("views");
    var form = document.querySelector("form.toolbar");
    if (!views || !form) return Promise.resolve();
    var anchor = topRow();
    var url = new URL(form.getAttribute("action"), window.location.href);
    new URLSearchParams(window.location.search).forEach(function (value, key) {
      if (key !== "at") url.searchParams.append(key, value);
    });
    if (anchor) url.searchParams.set("at", anchor.row.dataset.position);
    var pane = document.querySelector("#tab-active:checked") ? "active" : "record";
    return fetchHtml(url.toString(), "views").then(function (html) {
      var template = document.createElement("template");
      template.innerHTML = html;
      var fresh = template.content.querySelector("#views");
      if (!fresh) return;
      views.replaceWith(fresh);
      if (pane === "active") { var tab = document.getElementById("tab-active"); if (tab) tab.checked = true; }
      if (window.htmx) window.htmx.process(fresh);
      if (anchor) {
        var again = document.getElementById("p" + anchor.row.dataset.position);
        if (again) window.scrollBy(0, again.getBoundingClientRect().top - anchor.top);
      }
      fresh.dispatchEvent(new CustomEvent("rows:reloaded", { bubbles: true }));
    });
  }

  // ---- the "N new rows" button ------------------------------------------------------

  function newRowsMarker() {
    var button = document.createElement("button");
    button.type = "button";
    button.className = "new-rows";
    button.hidden = true;
    button.setAttribute("aria-live", "polite");
    document.body.appendChild(button);
    var unseen = [];
    var notLoaded = 0; // rows past what the page has loaded (the reader is further up)

    function render() {
      var n = unseen.length + notLoaded;
      button.hidden = n === 0;
      button.textContent = n === 1 ? "1 new row ↓" : n + " new rows ↓";
    }

    var observer = "IntersectionObserver" in window ? new IntersectionObserver(function (entries) {
      entries.forEach(function (entry) {
        if (!entry.isIntersecting) return;
        unseen = unseen.filter(function (row) { return row !== entry.target; });
        observer.unobserve(entry.target);
      });
      render();
    }) : null;

    button.addEventListener("click", function () {
      if (notLoaded) {
        var latest = document.querySelector("a[data-go=latest]");
        if (latest) { window.location.href = latest.href; return; }
      }
      var newest = unseen[unseen.length - 1];
      if (newest) {
        newest.scrollIntoView({ block: "end" });
        newest.setAttribute("tabindex", "-1");
        newest.focus({ preventScroll: true });
      }
      unseen.forEach(function (row) { if (observer) observer.unobserve(row); });
      unseen = [];
      render();
    });
    return {
      add: function (rows) {
        rows.forEach(function (row) {
          unseen.push(row);
          if (observer) observer.observe(row);
        });
        render();
      },
      beyond: function (n) { notLoaded = Math.max(0, n); render(); },
    };
  }

  // ---- the state poll --------------------------------------------------------------

  function setUp(views) {
    var stateUrl = views.dataset.stateUrl;
    // The rows there were when the reader arrived: only rows appended since count as new.
    var arrived = Number(views.dataset.nextPosition);
    var marker = newRowsMarker();
    var button = document.querySelector("button[data-live]");
    var known = { next_position: Number(views.dataset.nextPosition), checkpoint: views.dataset.checkpoint || null,
                  ledger: views.dataset.ledger || null };
    var etag = views.dataset.etag || null;
    var timer = null;
    var failures = 0;
    var live = window.localStorage && window.localStorage.getItem("memoryui.live") === "off" ? false : true;

    function show(state) {
      if (!button) return;
      button.setAttribute("aria-pressed", live ? "true" : "false");
      button.classList.toggle("is-fetching", state === "fetching");
      button.classList.toggle("is-stale", failures >= 3);
      button.querySelector(".live-label").textContent = !live ? "Paused" : failures >= 3 ? "Live: reconnecting" : "Live";
      button.title = live ? "Following live: new rows, checkpoints and the ledger show as they are written. Click to pause."
                          : "Paused: nothing new is fetched. Click to follow live again.";
    }

    // A shown container that has not yet asked for the rows up to the known end (it was
    // busy, hidden in the other tab, or the state moved while it was asking).
    function behind() {
      return containers().some(function (container) {
        if (pending(container) || container.offsetParent === null) return false;
        var reached = Math.max(lastPosition(container), Number(container.dataset.followedTo || -1));
        return reached < known.next_position - 1;
      });
    }

    function followRows(changed) {
      var target = known.next_position - 1;
      var work = containers().map(function (container) {
        if (pending(container)) return Promise.resolve(false);
        return pollRows(container, marker).then(function (done) {
          if (done) container.dataset.followedTo = String(target);
          return done;
        }).catch(function () { return false; });
      });
      return Promise.all(work).then(function () {
        var record = document.getElementById("record");
        // Rows past what is loaded (a reader further up) count only if they came after the reader did.
        if (record && pending(record)) marker.beyond(known.next_position - Math.max(arrived, lastPosition(record) + 1));
        else marker.beyond(0);
        return changed;
      });
    }

    function apply(state) {
      var jobs = [];
      var folded = String(state.checkpoint || "") !== String(known.checkpoint || "");
      var ledgerMoved = known.ledger !== null && state.ledger !== known.ledger;
      var grew = state.next_position !== known.next_position;
      known.checkpoint = state.checkpoint;
      known.ledger = state.ledger;
      known.next_position = state.next_position;
      if (folded) jobs.push(refreshViews().catch(function () {}));
      else if (grew || ledgerMoved) jobs.push(followRows());
      if (ledgerMoved) jobs.push(refreshPanel("ledger").catch(function () {}));
      if (folded || grew) jobs.push(refreshPanel("facts").catch(function () {}));
      if (folded || grew || ledgerMoved) refreshUsage(folded);
      return Promise.all(jobs);
    }

    function poll() {
      timer = null;
      if (!live || document.visibilityState !== "visible") return;
      show("fetching");
      var headers = { Accept: "application/json" };
      if (etag) headers["If-None-Match"] = etag;
      fetch(stateUrl, { headers: headers, credentials: "same-origin", cache: "no-store" })
        .then(function (response) {
          if (response.status === 304) return null;
          if (!response.ok) throw new Error("HTTP " + response.status);
          etag = response.headers.get("ETag");
          return response.json();
        })
        .then(function (state) { failures = 0; return state ? apply(state) : behind() ? followRows() : null; })
        .catch(function () { failures += 1; })
        .then(function () { show(); schedule(); });
    }

    function schedule() {
      if (timer === null && live) timer = window.setTimeout(poll, interval());
    }

    if (button) {
      button.addEventListener("click", function () {
        live = !live;
        try { window.localStorage.setItem("memoryui.live", live ? "on" : "off"); } catch (e) { /* private mode */ }
        show();
        if (live) { if (timer !== null) { window.clearTimeout(timer); timer = null; } poll(); }
      });
    }
    document.addEventListener("visibilitychange", function () {
      if (document.visibilityState === "visible") schedule();
    });
    // On a phone the other tab, once shown, catches up at once.
    document.addEventListener("change", function (event) {
      if (live && event.target.classList && event.target.classList.contains("tab-radio") && behind()) followRows();
    });
    show();
    schedule();
  }

  document.addEventListener("DOMContentLoaded", function () {
    var views = document.getElementById("views");
    if (views && views.dataset.stateUrl) setUp(views);
  });
})();
