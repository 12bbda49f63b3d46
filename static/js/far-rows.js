// A long record stays light: rows far from the screen are unloaded, and loaded again,
// exactly, when the reader scrolls back to them.
//
// Every page of rows arrives as a chunk, `<div class="chunk" data-after="A"
// data-until="B">`: the server's rendering of the positions A < p <= B (rows and the
// checkpoint and ledger marks among them). When a container holds more than MAX_ROWS
// rows, the chunks farthest from the screen are swapped for gaps of the same height
// that keep A and B; a gap that comes near the screen asks the page for `?after=A&
// until=B` (HX-Target: the container's chunk fragment) and is swapped for what comes
// back. So a row is never shown twice and never missing: the chunks and gaps of a
// container cover contiguous ranges, each position in exactly one of them. The
// browser's scroll anchoring keeps the reader's place when something above changes.
// A load that fails or takes too long is asked again (after 1, 2, 4, 8 s) while its
// gap is still near the screen, and every settled scroll asks for the gaps near it,
// so a reader who stops next to a gap never waits on a scroll that does not come.
// Without JavaScript nothing is ever unloaded.
(function () {
  "use strict";

  // Rows kept per container before far chunks are unloaded, and unloaded down to
  // (a container may say otherwise: data-window-max, data-window-keep).
  var MAX_ROWS = 600;
  var KEEP_ROWS = 400;
  var NEAR = 1.5;       // viewports above and below that are never unloaded
  var LOAD_NEAR = 1;    // viewports above and below where a gap is loaded (the observer's margin)
  var LOAD_TIMEOUT = 20000;  // ms before a load that has not answered is given up and asked again

  function rowsIn(node) {
    return node.querySelectorAll("article.msg[data-position]").length;
  }

  // A chunk's box: `display: contents` gives it none, so from its first to its last child.
  function extent(node) {
    var first = node.firstElementChild, last = node.lastElementChild;
    if (!first) return null;
    var top = first.getBoundingClientRect().top, bottom = last.getBoundingClientRect().bottom;
    return { top: top, bottom: bottom, height: Math.max(0, bottom - top) };
  }

  function url(container, gap) {
    var u = new URL(container.dataset.followUrl || window.location.href, window.location.href);
    var afterParam = container.dataset.followParam || "after";
    u.searchParams.delete("at");
    u.searchParams.set(afterParam, gap.dataset.after);
    u.searchParams.set(container.dataset.window, gap.dataset.until);
    return u.toString();
  }

  function makeGap(container, chunk, height) {
    var gap = document.createElement("div");
    gap.className = "gap";
    gap.dataset.after = chunk.dataset.after;
    gap.dataset.until = chunk.dataset.until;
    gap.style.height = Math.max(1, Math.round(height)) + "px";
    // Keyboard and screen-reader users get a way in that needs no scrolling.
    var link = document.createElement("a");
    link.className = "gap-load";
    link.href = url(container, gap);
    link.textContent = "Rows #" + (Number(gap.dataset.after) + 1) + "–#" + gap.dataset.until + " (unloaded: load them)";
    gap.appendChild(link);
    return gap;
  }

  function unloadFar(container) {
    if (container.offsetParent === null) return; // a hidden tab: measure nothing
    var most = Number(container.dataset.windowMax || MAX_ROWS);
    var keep = Number(container.dataset.windowKeep || KEEP_ROWS);
    var total = rowsIn(container);
    if (total <= most) return;
    var view = window.innerHeight;
    var candidates = [];
    var chunks = container.querySelectorAll(":scope > .chunk");
    chunks.forEach(function (chunk, i) {
      // The last chunk stays (live follow adds after it), and so do rows live follow
      // added that the reader has not reached yet ("N new rows" leads to them).
      if (i === chunks.length - 1 || chunk.querySelector("article.is-new")) return;
      var box = extent(chunk);
      if (!box) return;
      var distance = box.bottom < -NEAR * view ? -box.bottom : box.top > (1 + NEAR) * view ? box.top - view : 0;
      if (distance <= 0) return;
      if (chunk.contains(document.activeElement)) return;
      candidates.push({ chunk: chunk, box: box, distance: distance });
    });
    candidates.sort(function (a, b) { return b.distance - a.distance; });
    for (var i = 0; i < candidates.length && total > keep; i++) {
      var c = candidates[i];
      total -= rowsIn(c.chunk);
      c.chunk.replaceWith(makeGap(container, c.chunk, c.box.height));
    }
    watchGaps(container);
  }

  var observer = null;
  var loading = new WeakSet();
  var failures = new WeakMap();  // gap -> loads of it that failed in a row

  // A gap a reader is at or about to reach: in a shown container, within LOAD_NEAR viewports.
  function near(gap) {
    var container = gap.parentElement;
    if (!gap.isConnected || !container || container.offsetParent === null) return false;
    var box = gap.getBoundingClientRect(), view = window.innerHeight;
    return box.bottom >= -LOAD_NEAR * view && box.top <= (1 + LOAD_NEAR) * view;
  }

  function loadNear(container) {
    container.querySelectorAll(":scope > .gap").forEach(function (gap) { if (near(gap)) reload(gap); });
  }

  function failed(gap) {
    loading.delete(gap);
    var count = (failures.get(gap) || 0) + 1;
    failures.set(gap, count);
    // The observer reports a gap only when it comes near, not while it stays there.
    window.setTimeout(function () { if (near(gap)) reload(gap); }, 1000 * Math.pow(2, Math.min(count, 4) - 1));
  }

  function watchGaps(container) {
    if (!observer) return;
    container.querySelectorAll(":scope > .gap").forEach(function (gap) { observer.observe(gap); });
  }

  function reload(gap) {
    if (loading.has(gap)) return;
    var container = gap.parentElement;
    if (!container || !container.dataset.window) return;
    loading.add(gap);
    var abort = "AbortController" in window ? new AbortController() : null;
    var timer = abort ? window.setTimeout(function () { abort.abort(); }, LOAD_TIMEOUT) : null;
    fetch(url(container, gap), {
      headers: { "HX-Request": "true", "HX-Target": container.dataset.windowTarget },
      credentials: "same-origin",
      signal: abort ? abort.signal : undefined,
    })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.text();
      })
      .then(function (html) {
        window.clearTimeout(timer);
        if (!gap.isConnected) return;
        var template = document.createElement("template");
        template.innerHTML = html;
        var chunk = template.content.querySelector(".chunk");
        if (!chunk) throw new Error("no chunk in the answer");
        var rest = null;
        if (Number(chunk.dataset.until) < Number(gap.dataset.until)) {
          // More rows in the range than one answer holds: the rest stays a gap.
          rest = gap.cloneNode(false);
          rest.dataset.after = chunk.dataset.until;
        }
        if (observer) observer.unobserve(gap);
        gap.replaceWith(chunk);
        if (rest) {
          var box = extent(chunk);
          rest.style.height = Math.max(1, parseFloat(gap.style.height) - (box ? box.height : 0)) + "px";
          chunk.after(makeGap(container, rest, parseFloat(rest.style.height)));
        }
        if (window.htmx) window.htmx.process(chunk);
        chunk.dispatchEvent(new CustomEvent("rows:reloaded", { bubbles: true }));
        watchGaps(container);
        window.setTimeout(function () { unloadFar(container); }, 0);
      })
      .catch(function () {
        window.clearTimeout(timer);
        if (gap.isConnected) failed(gap);
      });
  }

  document.addEventListener("click", function (event) {
    var link = event.target.closest("a.gap-load");
    if (!link) return;
    event.preventDefault();
    reload(link.parentElement);
  });

  function containers() {
    return document.querySelectorAll(".rows[data-window]");
  }

  // After a page of rows arrived (htmx) or live follow added some.
  function settled(event) {
    var container = event.target.closest ? event.target.closest(".rows[data-window]") : null;
    if (container) window.setTimeout(function () { unloadFar(container); }, 0);
  }

  var scrollTimer = null;
  function scrolled() {
    if (scrollTimer !== null) return;
    scrollTimer = window.setTimeout(function () {
      scrollTimer = null;
      containers().forEach(function (container) {
        unloadFar(container);
        loadNear(container);
      });
    }, 250);
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (!containers().length) return;
    if ("IntersectionObserver" in window) {
      observer = new IntersectionObserver(function (entries) {
        entries.forEach(function (entry) { if (entry.isIntersecting) reload(entry.target); });
      }, { rootMargin: LOAD_NEAR * 100 + "% 0px" });
    }
    document.addEventListener("htmx:afterSettle", settled);
    document.addEventListener("follow:rows", settled);
    window.addEventListener("scroll", scrolled, { passive: true });
  });

  // For tests and the benchmark: unload now, without waiting for a scroll.
  window.__unloadFarRows = function () { containers().forEach(unloadFar); };
})();
