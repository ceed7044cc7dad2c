// The Suggestions view's "Select all on this page": a checkbox this script adds before
// the table (no script, no such box: each match's own checkbox still works), which ticks
// or clears every match's box; ticking them one by one keeps it in step. No amount is
// read here: the page's figures are the server's.
(function () {
  "use strict";
  var form = document.getElementById("selected");
  var table = document.getElementById("suggested");
  if (!form || !table) { return; }
  var boxes = Array.prototype.slice.call(
    document.querySelectorAll('input[type=checkbox][name=match][form=selected]'));
  if (boxes.length === 0) { return; }
  var label = document.createElement("label");
  label.className = "select-all";
  var all = document.createElement("input");
  all.type = "checkbox";
  all.id = "select-all";
  label.appendChild(all);
  label.appendChild(document.createTextNode(" Select all on this page"));
  form.appendChild(label);
  function sync() {
    var ticked = boxes.filter(function (b) { return b.checked; }).length;
    all.checked = ticked === boxes.length;
    all.indeterminate = ticked > 0 && ticked < boxes.length;
  }
  all.addEventListener("change", function () {
    boxes.forEach(function (b) { b.checked = all.checked; });
  });
  boxes.forEach(function (b) { b.addEventListener("change", sync); });
  sync();
})();
