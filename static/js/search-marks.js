// A row opened from a search (?at=N&q=…) shows the searched words marked in its text.
// The words come from the search box's language (conversations/search/
// query.py): quotes, OR, NOT, -excluded and a trailing * are syntax, not words; a word
// marks every word starting with it, as the index's stemming matches "refunds" for
// "refund". Only text nodes are split and wrapped: nothing from the address is parsed
// as markup.
(function () {
  "use strict";

  function wordsOf(q) {
    var words = [];
    var skipNext = false;
    var token = /(-?)"([^"]*)"|(\S+)/g;
    var m;
    while ((m = token.exec(q)) !== null) {
      var text = m[2] !== undefined ? m[2] : m[3];
      var excluded = m[1] === "-" || skipNext || (m[3] !== undefined && m[3].charAt(0) === "-" && m[3].length > 1);
      skipNext = false;
      if (m[3] === "OR") continue;
      if (m[3] === "NOT") { skipNext = true; continue; }
      if (excluded) continue;
      text.split(/\s+/).forEach(function (w) {
        w = w.replace(/\*+$/, "").replace(/^[^\p{L}\p{N}]+|[^\p{L}\p{N}]+$/gu, "");
        if (w.length >= 2) words.push(w.toLowerCase());
      });
    }
    return words;
  }

  function escape(w) { return w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"); }

  function mark(root, probe, pattern) {
    var walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT, {
      acceptNode: function (node) {
        var parent = node.parentNode;
        if (!parent || parent.closest("mark, script, style, .msg-head")) return NodeFilter.FILTER_REJECT;
        return probe.test(node.nodeValue) ? NodeFilter.FILTER_ACCEPT : NodeFilter.FILTER_SKIP;
      }
    });
    var nodes = [];
    while (walker.nextNode()) nodes.push(walker.currentNode);
    var count = 0;
    nodes.forEach(function (node) {
      var text = node.nodeValue;
      var out = document.createDocumentFragment();
      var last = 0;
      pattern.lastIndex = 0;
      var m;
      while ((m = pattern.exec(text)) !== null) {
        var start = m.index + m[1].length;
        out.appendChild(document.createTextNode(text.slice(last, start)));
        var el = document.createElement("mark");
        el.className = "search-mark";
        el.textContent = m[2];
        out.appendChild(el);
        last = start + m[2].length;
        count += 1;
      }
      out.appendChild(document.createTextNode(text.slice(last)));
      node.parentNode.replaceChild(out, node);
    });
    return count;
  }

  function run() {
    var params = new URLSearchParams(window.location.search);
    var q = params.get("q");
    var at = params.get("at");
    if (!q || at === null || !/^\d+$/.test(at)) return;
    var words = wordsOf(q.slice(0, 300));
    if (!words.length) return;
    // The probe is not global: a global pattern's test() remembers where it stopped.
    var source = "(^|[^\\p{L}\\p{N}])((?:" + words.map(escape).join("|") + ")[\\p{L}\\p{N}]*)";
    var probe = new RegExp(source, "iu");
    var pattern = new RegExp(source, "giu");
    // The row, and a tool result shown under its call in another row.
    var rows = document.querySelectorAll('article.msg[data-position="' + at + '"], details.result[data-position="' + at + '"]');
    Array.prototype.forEach.call(rows, function (row) {
      var found = mark(row, probe, pattern);
      if (found) row.setAttribute("data-search-marks", String(found));
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", run);
  else run();

  // "Find in this conversation": the hits appear where the reader looks, and the focus moves to
  // them (on a desktop the box sits above the rows, the hits below the fold otherwise).
  document.addEventListener("htmx:afterSettle", function (event) {
    var config = event.detail && event.detail.requestConfig;
    var from = config && config.elt;
    if (!from || !from.closest || !from.closest("form.find")) return;
    var results = document.getElementById("find-results");
    if (!results) return;
    var count = results.querySelector(".find-count, .error");
    results.scrollIntoView({ block: "nearest" });
    if (count) { count.setAttribute("tabindex", "-1"); count.focus({ preventScroll: true }); }
  });
})();
