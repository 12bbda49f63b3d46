// Live follow on a conversation page: rows an agent appends show up without a reload.
//
// Each `.rows[data-follow]` container asks its own page fragment for the rows after
// the last one it shows (`?after=N`, or `?active_after=N` for the active view),
// every few seconds, only while the tab is visible and only once the reader has
// reached the end of what is loaded (a "Load more rows" link still pending means
// there is older ground to cover first). A row already on the page is never added
// twice. New rows in the full record raise an "N new rows" button that jumps to them.
// A ledger mark (an action, a task-state change, a workspace snapshot) recorded after
// the row it follows was already shown comes with the next poll (`follow=1`) and is
// put right after that row, never twice.
(function () {
  "use strict";

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

  function setUp(container, marker) {
    var interval = Number(container.dataset.followInterval || 3000);
    var param = container.dataset.followParam || "after";
    var target = container.dataset.followTarget;
    var base = container.dataset.followUrl;
    var busy = false;
    var timer = null;

    function pending() {
      return container.querySelector("a.more[hx-get]") !== null;
    }

    function poll() {
      timer = null;
      if (document.visibilityState !== "visible") return; // resumed by visibilitychange
      // A pane hidden on a narrow screen (the other tab) waits until it is shown.
      if (busy || pending() || container.offsetParent === null) return schedule();
      busy = true;
      var url = new URL(base, window.location.href);
      url.searchParams.set(param, String(lastPosition(container)));
      url.searchParams.set("follow", "1");
      fetch(url.toString(), {
        headers: { "HX-Request": "true", "HX-Target": target },
        credentials: "same-origin",
      })
        .then(function (response) {
          if (!response.ok) throw new Error("HTTP " + response.status);
          return response.text();
        })
        .then(function (html) { insert(html); })
        .catch(function () { /* try again next time */ })
        .then(function () { busy = false; schedule(); });
    }

    // The first row after `position` on the page, or what closes the rows (the end note,
    // a "Load more" link), or null: a mark placed after `position` goes just before it.
    function placeAfter(position) {
      var rows = container.querySelectorAll(":scope > article.msg[data-position]");
      for (var i = 0; i < rows.length; i++) {
        if (Number(rows[i].dataset.position) > position) return rows[i];
      }
      return container.querySelector(":scope > p.end, :scope > p.empty, :scope > a.more");
    }

    function placeMarks(fresh) {
      var last = lastPosition(container);
      Array.prototype.forEach.call(fresh.querySelectorAll(".ledger-mark[id]"), function (mark) {
        if (document.getElementById(mark.id)) return mark.remove();
        var after = Number(mark.dataset.after);
        if (after > last) return; // it follows one of the new rows: it comes with them
        container.insertBefore(mark, placeAfter(after));
      });
    }

    function insert(html) {
      var template = document.createElement("template");
      template.innerHTML = html;
      var fresh = template.content;
      var added = [];
      Array.prototype.forEach.call(fresh.querySelectorAll("article.msg[id]"), function (row) {
        if (document.getElementById(row.id)) row.remove();
        else added.push(row);
      });
      placeMarks(fresh);
      if (!added.length) return;
      container.querySelectorAll(":scope > p.end, :scope > p.empty").forEach(function (node) { node.remove(); });
      added[0].classList.add("is-new-first");
      added.forEach(function (row) { row.classList.add("is-new"); });
      container.appendChild(fresh);
      if (window.htmx) window.htmx.process(container);
      if (marker && container.dataset.followCount === "true") marker.add(added);
      container.dispatchEvent(new CustomEvent("follow:rows", { bubbles: true, detail: { rows: added } }));
    }

    function schedule() {
      if (timer === null) timer = window.setTimeout(poll, interval);
    }

    document.addEventListener("visibilitychange", function () {
      if (document.visibilityState === "visible") schedule();
    });
    schedule();
  }

  function newRowsMarker() {
    var button = document.createElement("button");
    button.type = "button";
    button.className = "new-rows";
    button.hidden = true;
    button.setAttribute("aria-live", "polite");
    document.body.appendChild(button);
    var unseen = [];

    function render() {
      button.hidden = unseen.length === 0;
      button.textContent = unseen.length === 1 ? "1 new row ↓" : unseen.length + " new rows ↓";
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
      var first = unseen[0];
      if (first) {
        first.scrollIntoView({ block: "start" });
        first.setAttribute("tabindex", "-1");
        first.focus({ preventScroll: true });
      }
    });
    return {
      add: function (rows) {
        rows.forEach(function (row) {
          unseen.push(row);
          if (observer) observer.observe(row);
        });
        render();
      },
    };
  }

  document.addEventListener("DOMContentLoaded", function () {
    var containers = document.querySelectorAll(".rows[data-follow-url]");
    if (!containers.length) return;
    var marker = newRowsMarker();
    containers.forEach(function (container) { setUp(container, marker); });
  });
})();
