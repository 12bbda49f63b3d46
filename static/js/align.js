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

  // Only the rows near the screen are levelled (two screens either way): a long record
  // holds hundreds of rows in each pane, and measuring them all on every change would
  // cost more than reading. Rows further away keep the margins they had.
  var REACH = 2;

  function align() {
    queued = false;
    var record = document.getElementById("record");
    var active = document.getElementById("active");
    if (!record || !active) return;
    if (!WIDE.matches) {
      document.querySelectorAll("#views article.msg[data-align-pad]").forEach(function (row) { set(row, 0); });
      return;
    }
    var left = rowsOf(record);
    var low = -REACH * window.innerHeight, high = (REACH + 1) * window.innerHeight;
    var plan = [];
    // Reads first: the tops of the pairs near the screen, with the margins they carry now.
    active.querySelectorAll("article.msg[data-position]").forEach(function (a) {
      var r = left[a.dataset.position];
      if (!r) return;
      var topR = r.getBoundingClientRect().top, topA = a.getBoundingClientRect().top;
      if ((topR < low || topR > high) && (topA < low || topA > high)) return;
      plan.push({ r: r, a: a, topR: topR, topA: topA,
                  padR: parseFloat(r.dataset.alignPad || 0), padA: parseFloat(a.dataset.alignPad || 0) });
    });
    // Then, top down, each pair's margins from its tops without them (shifted by what this
    // pass already changed above it), and the writes.
    var shiftR = 0, shiftA = 0;
    plan.forEach(function (p) {
      var r0 = p.topR + shiftR - p.padR, a0 = p.topA + shiftA - p.padA;
      var needR = a0 > r0 + 0.5 ? a0 - r0 : 0, needA = r0 > a0 + 0.5 ? r0 - a0 : 0;
      shiftR += needR - p.padR;
      shiftA += needA - p.padA;
      p.needR = needR; p.needA = needA;
    });
    plan.forEach(function (p) { set(p.r, p.needR); set(p.a, p.needA); });
  }

  // The gap a row keeps from the one above (the column's own), plus what aligns it.
  function set(row, pad) {
    var old = parseFloat(row.dataset.alignPad || 0);
    if (Math.abs(old - pad) < 0.5) return;
    if (pad > 0) {
      row.dataset.alignPad = String(pad);
      row.style.setProperty("margin-top", pad + "px");
    } else {
      delete row.dataset.alignPad;
      row.style.removeProperty("margin-top");
    }
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
