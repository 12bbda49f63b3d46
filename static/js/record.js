// The record's reading aids: focus the row a link points at, copy a row, collapse all,
// relative times. Every feature is an enhancement; without JavaScript the page reads
// the same, rows link by #pN and the times are absolute.
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  function focusRow(row) {
    if (!row) return;
    row.setAttribute("tabindex", "-1");
    row.scrollIntoView({ block: "start" });
    row.focus({ preventScroll: true });
  }

  // A permalink (#pN, ?at=N) or a search hit: the row is focused, below the sticky bar.
  function focusFromLocation() {
    var id = window.location.hash.slice(1);
    var row = id ? document.getElementById(id) : null;
    if (!row || !row.matches("article.msg")) row = document.querySelector("article.msg.is-here");
    if (row) focusRow(row);
  }

  function copyText(text, button) {
    var done = function () {
      var label = button.textContent;
      button.textContent = "Copied";
      button.classList.add("copied");
      window.setTimeout(function () { button.textContent = label; button.classList.remove("copied"); }, 1500);
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, function () { fallbackCopy(text); done(); });
    } else {
      fallbackCopy(text);
      done();
    }
  }

  function fallbackCopy(text) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    try { document.execCommand("copy"); } catch (e) { /* nothing more to try */ }
    area.remove();
    window.__lastCopied = text; // what the browser tests read
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-copy]");
    if (button) {
      var row = button.closest("article.msg");
      if (button.dataset.copy === "json") {
        // The row as the API returns it (position, kind, message, created_at): the stored bytes, parsed.
        // <page root>conversations/<id>/ → <api root>conversations/<id>/messages, the one row after
        // position − 1. The page root holds the project (/p/<slug>/); the API takes it as a header.
        var pageData = document.body.dataset;
        var pageRoot = pageData.pageRoot || "/";
        var path = new URL(row.querySelector("a.pos").href).pathname;
        if (path.indexOf(pageRoot) === 0) path = path.slice(pageRoot.length);
        var jsonUrl = button.dataset.jsonUrl || (pageData.apiRoot || "/api/v1/") + path.replace(/^\//, "") +
          "messages?after=" + (Number(row.dataset.position) - 1) + "&limit=1";
        var headers = { Accept: "application/json" };
        if (pageData.project) headers["X-Memoryui-Project"] = pageData.project;
        fetch(jsonUrl, { credentials: "same-origin", headers: headers })
          .then(function (response) { return response.json(); })
          .then(function (body) {
            var text = JSON.stringify(body.items[0], null, 2);
            window.__lastCopied = text;
            copyText(text, button);
          });
      } else if (button.dataset.copy === "link") {
        var link = row.querySelector("a.pos");
        window.__lastCopied = link.href;
        copyText(link.href, button);
      }
      return;
    }
    var toggle = event.target.closest("button[data-collapse-all]");
    if (toggle) {
      // A class on the body, not on each row: rows loaded later come in collapsed too.
      var open = toggle.getAttribute("aria-pressed") === "true";
      document.body.classList.toggle("rows-collapsed", !open);
      toggle.setAttribute("aria-pressed", open ? "false" : "true");
      toggle.textContent = open ? "Collapse all" : "Expand all";
    }
  });

  // Relative time beside the absolute one ("3 min ago"); refreshed every minute.
  function relative(date) {
    var seconds = Math.round((Date.now() - date.getTime()) / 1000);
    var future = seconds < 0;
    seconds = Math.abs(seconds);
    // Words take a plural; the abbreviations (h, min, s) do not.
    var units = [["year", 31536000, true], ["month", 2592000, true], ["day", 86400, true],
                 ["h", 3600, false], ["min", 60, false], ["s", 1, false]];
    for (var i = 0; i < units.length; i++) {
      var n = Math.floor(seconds / units[i][1]);
      if (n >= 1) {
        var unit = units[i][0];
        var word = " " + unit + (units[i][2] && n > 1 ? "s" : "");
        return future ? "in " + n + word : n + word + " ago";
      }
    }
    return "just now";
  }

  function stampTimes(root) {
    (root || document).querySelectorAll("time[data-relative]").forEach(function (el) {
      var date = new Date(el.getAttribute("datetime"));
      if (isNaN(date)) return;
      var rel = el.querySelector(".rel");
      if (!rel) {
        rel = document.createElement("span");
        rel.className = "rel";
        el.appendChild(rel);
      }
      rel.textContent = " · " + relative(date);
    });
  }

  // Jump targets clear the sticky top bar, whatever its height (it wraps on a phone).
  function measureTopbar() {
    var bar = document.querySelector("header.topbar");
    // A top bar that scrolls away (a phone's) leaves nothing for a jump target to clear.
    var sticky = bar && window.getComputedStyle(bar).position === "sticky";
    if (bar) document.documentElement.style.setProperty("--topbar-h", (sticky ? bar.getBoundingClientRect().height : 0) + "px");
  }

  // On a phone, the panels above the rows fold behind a button each, so the messages
  // begin on the first screen. Without JavaScript they stay open.
  var PHONE = window.matchMedia("(max-width: 640px)");
  function phoneCollapse() {
    if (!PHONE.matches) return;
    document.querySelectorAll("[data-phone-collapse]").forEach(function (panel) {
      if (panel.dataset.collapsed) return;
      panel.dataset.collapsed = "1";
      var toggle = document.createElement("button");
      toggle.type = "button";
      toggle.className = "phone-toggle";
      toggle.setAttribute("aria-expanded", "false");
      if (!panel.id) panel.id = "panel-" + Math.random().toString(36).slice(2);
      toggle.setAttribute("aria-controls", panel.id);
      toggle.textContent = panel.dataset.phoneCollapse;
      panel.hidden = true;
      panel.parentNode.insertBefore(toggle, panel);
      toggle.addEventListener("click", function () {
        panel.hidden = !panel.hidden;
        toggle.setAttribute("aria-expanded", panel.hidden ? "false" : "true");
      });
    });
  }

  // A row's "Raw" shows the stored text exactly as kept, in place of its rendering.
  function toggleRaw(link) {
    var row = link.closest("article.msg");
    var shown = row.querySelector(":scope > pre.raw-text");
    var menu = link.closest("details.row-menu");
    if (menu) menu.open = false;
    if (shown) {
      shown.remove();
      row.classList.remove("is-raw");
      link.setAttribute("aria-pressed", "false");
      return;
    }
    fetch(link.href, { credentials: "same-origin" })
      .then(function (response) { if (!response.ok) throw new Error("HTTP " + response.status); return response.text(); })
      .then(function (text) {
        var pre = document.createElement("pre");
        pre.className = "raw-text";
        pre.textContent = text;
        row.appendChild(pre);
        row.classList.add("is-raw");
        link.setAttribute("aria-pressed", "true");
      })
      .catch(function () { window.location.href = link.href; });
  }

  document.addEventListener("click", function (event) {
    var raw = event.target.closest("a[data-raw-toggle]");
    if (raw) { event.preventDefault(); toggleRaw(raw); return; }
    // One row menu open at a time; a click elsewhere closes it.
    document.querySelectorAll("details.row-menu[open]").forEach(function (menu) {
      if (!menu.contains(event.target)) menu.open = false;
    });
  });
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    var menu = document.activeElement && document.activeElement.closest("details.row-menu[open]");
    if (menu) { menu.open = false; menu.querySelector("summary").focus(); }
  });

  // Panels folded into one line ("About this conversation") open as the person left them, per
  // person and browser: the messages come first, and a reader who wants the panels keeps them.
  function rememberOpen() {
    var person = document.body.dataset.person || "anyone";
    document.querySelectorAll("details[data-remember]").forEach(function (details) {
      var key = "memoryui." + details.dataset.remember + "." + person;
      try { if (window.localStorage.getItem(key) === "open") details.open = true; } catch (e) { /* private mode */ }
      details.addEventListener("toggle", function () {
        try { window.localStorage.setItem(key, details.open ? "open" : "closed"); } catch (e) { /* private mode */ }
      });
    });
  }

  // The context chart is one tab stop: the arrow keys move along its points (Home and End to the
  // first and last), Enter opens the focused point's row, Escape goes back to the chart.
  function chartKeys(event) {
    var svg = event.target.closest && event.target.closest(".context-chart svg");
    if (!svg) return;
    var points = Array.prototype.slice.call(svg.querySelectorAll("a.point"));
    if (!points.length) return;
    var at = points.indexOf(event.target);
    var next = null;
    if (event.key === "ArrowRight" || event.key === "ArrowDown") next = at < 0 ? 0 : Math.min(points.length - 1, at + 1);
    else if (event.key === "ArrowLeft" || event.key === "ArrowUp") next = at < 0 ? points.length - 1 : Math.max(0, at - 1);
    else if (event.key === "Home") next = 0;
    else if (event.key === "End") next = points.length - 1;
    else if (event.key === "Escape" && at >= 0) { event.preventDefault(); svg.focus(); return; }
    if (next === null) return;
    event.preventDefault();
    points[next].focus();
  }
  document.addEventListener("keydown", chartKeys);

  document.addEventListener("DOMContentLoaded", function () {
    measureTopbar();
    phoneCollapse();
    rememberOpen();
    window.addEventListener("resize", measureTopbar);
    focusFromLocation();
    stampTimes();
    window.setInterval(stampTimes, 60000);
  });
  window.addEventListener("hashchange", focusFromLocation);
  document.addEventListener("htmx:afterSettle", function (event) {
    stampTimes(event.target);
    // The filter form's jump-to swaps both views in: the row it asked for gets the focus.
    if (event.target.id === "views") {
      var here = event.target.querySelector("#record article.msg.is-here");
      if (here) focusRow(here);
    }
  });
  document.addEventListener("follow:rows", function (event) { stampTimes(event.target); });
  document.addEventListener("rows:reloaded", function (event) { stampTimes(event.target); });
})();
