// The review queue from the keyboard: j/k move between proposals, a/r/e act on the
// focused one, u undoes the last review, Ctrl+Enter (or Cmd+Enter) submits the form
// being typed in. After a decision the focus goes to the proposal that came after
// the decided one (the one before it at the end of the queue), so the flow goes on
// where the reviewer is. Without JavaScript the same forms post and the server
// redirects to the next proposal with the status line and its undo.
(function () {
  "use strict";

  function items() {
    return Array.prototype.slice.call(document.querySelectorAll("#queue-items .queue-item"));
  }

  function focusItem(item) {
    if (!item) return;
    item.focus({ preventScroll: true });
    item.scrollIntoView({ block: "nearest" });
  }

  // The proposal that last had the focus (and its place), for j/k when the focus is lost.
  var lastItem = null;
  var lastItemIndex = null;
  document.addEventListener("focusin", function (ev) {
    var item = ev.target.closest && ev.target.closest("#queue-items .queue-item");
    if (!item) return;
    lastItem = item;
    lastItemIndex = items().indexOf(item);
  });

  // The item being decided, and where the focus goes once it has left the page.
  var decided = null;
  var nextFocus = null;

  document.addEventListener("keydown", function (ev) {
    if (!document.getElementById("review-queue")) return;
    var tag = (ev.target.tagName || "").toLowerCase();
    var typing = tag === "input" || tag === "textarea" || tag === "select";
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey) && typing) {
      var form = ev.target.form;
      if (form && form.closest("#review-queue")) {
        ev.preventDefault();
        form.requestSubmit();
      }
      return;
    }
    if (ev.key === "Escape" && typing && ev.target.closest && ev.target.closest("#queue-items .queue-item")) {
      // Esc leaves the field for its proposal, so j/k and the other keys work again.
      ev.preventDefault();
      var owner = ev.target.closest(".queue-item");
      ev.target.blur();
      focusItem(owner);
      return;
    }
    if (ev.ctrlKey || ev.metaKey || ev.altKey || typing) return;
    if (ev.key === "u") {
      var undo = document.querySelector('#queue-status button[data-key="u"]');
      if (undo) { ev.preventDefault(); undo.click(); }
      return;
    }
    var list = items();
    if (!list.length) return;
    var current = ev.target.closest ? ev.target.closest(".queue-item") : null;
    var i = current ? list.indexOf(current) : -1;
    if (i < 0 && lastItem) {
      // The focus fell to the page (its item was swapped away, or the reviewer clicked
      // beside the queue): j/k go on from the proposal last in focus.
      var at = list.indexOf(lastItem);
      if (at < 0 && lastItemIndex !== null) at = Math.min(lastItemIndex, list.length) - 0.5;
      i = at;
    }
    if (ev.key === "j" || ev.key === "k") {
      ev.preventDefault();
      var to = ev.key === "j" ? Math.floor(i + 1) : Math.ceil(i - 1);
      if (i < 0 && !lastItem) to = 0;
      focusItem(list[Math.min(list.length - 1, Math.max(0, to))]);
    } else if (current && (ev.key === "a" || ev.key === "r" || ev.key === "e")) {
      var el = current.querySelector('[data-key="' + ev.key + '"]');
      if (!el) return;
      ev.preventDefault();
      if (ev.key === "a") el.click();
      else if (ev.key === "r") el.focus();
      else { el.parentElement.open = true; current.querySelector(".edit-approve textarea").focus(); }
    }
  });

  // A decision is about to be sent from inside an item: remember its neighbour.
  document.addEventListener("htmx:beforeRequest", function (ev) {
    var item = ev.target.closest && ev.target.closest("#queue-items .queue-item");
    if (!item) return;
    decided = item.id;
    nextFocus = item.nextElementSibling || item.previousElementSibling;
  });

  // A refused review (422) comes back as the item with its error; a refused undo
  // (409) as the status line saying why. Both are meant to be shown.
  document.addEventListener("htmx:beforeSwap", function (ev) {
    if (!ev.target.closest || !ev.target.closest("#review-queue")) return;
    var status = ev.detail.xhr.status;
    if (status === 422 || status === 409) {
      ev.detail.shouldSwap = true;
      ev.detail.isError = false;
    }
  });

  // After a swap in the queue (an approve or reject swaps its item for nothing, so
  // only the status line's out-of-band swap reports it; an undo or a refusal swaps
  // items in), once the main swap is done: put the focus where the reviewer goes on.
  var settling = false;
  function afterQueueSwap() {
    if (settling) return;
    settling = true;
    window.setTimeout(function () {
      settling = false;
      var list = items();
      var asked = document.querySelector("#queue-items .queue-item[data-focus]");
      var stayed = decided && document.getElementById(decided);
      if (asked) {
        // After an undo the proposal that came back asks for the focus.
        asked.removeAttribute("data-focus");
        focusItem(asked);
      } else if (stayed) {
        // Refused: the item came back with its error; the field at fault gets the focus.
        var field = stayed.querySelector("[aria-invalid=true]");
        if (field) field.focus(); else focusItem(stayed);
      } else if (nextFocus && document.body.contains(nextFocus)) {
        focusItem(nextFocus);
      } else if (list.length && !(document.activeElement && document.activeElement.closest(".queue-item"))) {
        focusItem(list[0]);
      }
      decided = nextFocus = null;
      if (!list.length && !document.getElementById("queue-empty")) {
        var empty = document.createElement("p");
        empty.className = "empty";
        empty.id = "queue-empty";
        empty.textContent = "Nothing left to review.";
        document.getElementById("queue-items").appendChild(empty);
      }
    }, 0);
  }
  // The server marks the proposal that asks for the focus (or a refused field) with
  // autofocus, for the page loaded without JavaScript. After a swap htmx would honour
  // it a moment later, when it settles, and pull the focus from wherever the reviewer
  // has gone on typing: the attribute is taken off at once and the focus placed here.
  function dropAutofocus() {
    var marked = document.querySelectorAll("#review-queue [autofocus]");
    for (var n = 0; n < marked.length; n++) marked[n].removeAttribute("autofocus");
  }
  function inQueue(ev) { return ev.target.closest && ev.target.closest("#review-queue"); }
  document.addEventListener("htmx:afterSwap", function (ev) { if (inQueue(ev)) dropAutofocus(); });
  // The focus moves once htmx has settled the swap, which is when it makes the new items'
  // forms its own: a key pressed on an item before that would post its form as a plain
  // page (a full reload) instead of through htmx.
  document.addEventListener("htmx:afterSettle", function (ev) { if (inQueue(ev)) afterQueueSwap(); });
})();
