// Full record and active view side by side, aligned by row: a position shown in both
// panes sits at the same height in both, so reading across compares the same row.
//
// The panes hold different things between rows (fold lines and ledger marks in the
// record, the handoff summary in the active view), so their rows drift apart. After
// each change (load, a page of rows, live rows, a resize, rows coming into view and
// taking their real height), every row that both panes show gets a top margin in the
// pane where it sits higher, just enough to bring it level. All positions are read
// first and all margins written after, so it costs one layout, not one per row.
// Only when both panes are side by side; on a phone they are tabs.
(function () {
  "use strict";

  var WIDE = window.matchMedia("(min-width: 961px)");
  var queued = false;

  function rowsOf(container) {
    var out = {};
    container.querySelectorAll("article.msg[data-position]").forEach(function (row) {
      out[row.dataset.position] = row;
    });
    return out;
  }

  function align() {
    queued = false;
    var record = document.getElementById("record");
    var active = document.getElementById("active");
    if (!record || !active) return;
    var left = rowsOf(record);
    var pairs = [];
    active.querySelectorAll("article.msg[data-position]").forEach(function (a) {
      var r = left[a.dataset.position];
      if (r) pairs.push([r, a]);
    });
    if (!WIDE.matches) {
      pairs.forEach(function (p) { p[0].style.removeProperty("margin-top"); p[1].style.removeProperty("margin-top"); });
      return;
    }
    // Natural tops: where each row would be without the margins this script added.
    var shiftR = 0, shiftA = 0, plan = [];
    pairs.forEach(function (p) {
      var addedR = parseFloat(p[0].dataset.alignPad || 0), addedA = parseFloat(p[1].dataset.alignPad || 0);
      shiftR += addedR; shiftA += addedA;
      plan.push({ r: p[0], a: p[1], topR: p[0].getBoundingClientRect().top - shiftR,
                  topA: p[1].getBoundingClientRect().top - shiftA });
    });
    var padR = 0, padA = 0;
    plan.forEach(function (p) {
      var r = p.topR + padR, a = p.topA + padA, needR = 0, needA = 0;
      if (r < a - 0.5) needR = a - r; else if (a < r - 0.5) needA = r - a;
      padR += needR; padA += needA;
      p.needR = needR; p.needA = needA;
    });
    plan.forEach(function (p) { set(p.r, p.needR); set(p.a, p.needA); });
  }

  // The gap a row keeps from the one above (the column's own), plus what aligns it.
  function set(row, pad) {
    var old = parseFloat(row.dataset.alignPad || 0);
    if (Math.abs(old - pad) < 0.5) return;
    row.dataset.alignPad = String(pad);
    if (pad > 0) row.style.setProperty("margin-top", "calc(" + pad + "px + var(--align-base, 0px))");
    else row.style.removeProperty("margin-top");
  }

  function queue() {
    if (queued) return;
    queued = true;
    window.requestAnimationFrame(align);
  }

  window.memoryuiAlign = align; // the browser tests call it to wait for a settled layout
  document.addEventListener("DOMContentLoaded", function () {
    queue();
    ["htmx:afterSettle", "follow:rows", "rows:reloaded", "toggle"].forEach(function (name) {
      document.addEventListener(name, queue, true);
    });
    window.addEventListener("resize", queue);
    var scrolling = null;
    // Rows off screen are laid out at an estimated height (content-visibility); when
    // they come into view and take their real one, the panes are levelled again.
    window.addEventListener("scroll", function () {
      if (scrolling) window.clearTimeout(scrolling);
      scrolling = window.setTimeout(queue, 120);
    }, { passive: true });
  });
})();
