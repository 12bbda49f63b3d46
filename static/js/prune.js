// The prune form posts as a plain form (its answer is a whole page: the run's result,
// or the preview again when the counts changed). While the run works, the progress
// bar polls; a second click cannot start a second run.
(function () {
  "use strict";
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form.id !== "prune-form") return;
    if (document.body.dataset.pruning) { event.preventDefault(); return; }
    document.body.dataset.pruning = "1";
    form.querySelectorAll("button").forEach(function (button) { button.disabled = true; });
  });
})();
// Back from the result page (a page restored from the back/forward cache): ready again.
window.addEventListener("pageshow", function (event) {
  if (!event.persisted) return;
  delete document.body.dataset.pruning;
  document.querySelectorAll("#prune-form button").forEach(function (button) { button.disabled = false; });
});
// While a prune runs (the server marks the bar data-running, or this page started
// one), ask for the bar once a second. Not an hx-trigger filter: htmx evaluates those
// as script, which the Content-Security-Policy forbids.
setInterval(function () {
  var bar = document.getElementById("prune-progress");
  if (bar && window.htmx && (bar.dataset.running || document.body.dataset.pruning)) {
    window.htmx.trigger(bar, "prune-poll");
  }
}, 1000);
