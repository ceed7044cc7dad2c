// The Exceptions view's live Selection and keys (issue #34). Progressive enhancement:
// without this script the page works as plain forms (the server computes the sums and
// the difference after each action). With it, ticking a row updates each side's count
// and sum and the difference at once, and the keys the page documents move, tick and
// match.
//
// Money is exact: each row's amount arrives as an integer at the run's scale
// (`data-amount`, as the engine compares amounts: the amount column, or credit minus
// debit), and the sums are BigInt. An amount is NEVER parsed to a Number: a float
// cannot hold 12345678901234567.89, and 0.1 + 0.2 is not 0.3 in one.
"use strict";

(function () {
  const form = document.getElementById("selection");
  if (!form) return;
  const scale = Number(form.dataset.scale || "0"); // a count of digits, not an amount

  function money(value) {
    // A scaled BigInt as decimal text with `scale` digits after the point; the same
    // text the server writes (console/exceptions_rows.py: money).
    const negative = value < 0n;
    let digits = (negative ? -value : value).toString();
    if (scale > 0) {
      digits = digits.padStart(scale + 1, "0");
      digits = digits.slice(0, -scale) + "." + digits.slice(-scale);
    }
    return (negative ? "-" : "") + digits;
  }

  function picks() {
    return Array.from(document.querySelectorAll("input.pick[form=selection]"));
  }

  function update() {
    // Each row once, however many boxes show it (its table and the candidates panel).
    const chosen = new Map();
    for (const box of picks()) {
      if (box.checked) chosen.set(box.dataset.side + ":" + box.value, box.dataset.amount);
    }
    const sums = { left: 0n, right: 0n };
    const counts = { left: 0, right: 0 };
    let missing = false;
    for (const [key, amount] of chosen) {
      const side = key.split(":")[0];
      counts[side] += 1;
      if (amount === "") missing = true;
      else sums[side] += BigInt(amount);
    }
    for (const side of ["left", "right"]) {
      const count = form.querySelector("[data-count=" + side + "]");
      const sum = form.querySelector("[data-sum=" + side + "]");
      count.textContent = String(counts[side]);
      count.nextSibling.textContent = counts[side] === 1 ? " row, sum " : " rows, sum ";
      sum.textContent = money(sums[side]);
    }
    form.querySelector("[data-difference]").textContent = missing
      ? "not known: a row has no amount"
      : money(sums.left - sums.right);
  }

  function twins(box) {
    // The other boxes of the same row keep its state.
    for (const other of picks()) {
      if (other !== box && other.dataset.side === box.dataset.side && other.value === box.value) {
        other.checked = box.checked;
      }
    }
  }

  document.addEventListener("change", function (event) {
    const box = event.target;
    if (!(box instanceof HTMLInputElement) || !box.classList.contains("pick")) return;
    twins(box);
    update();
  });

  function move(box, step) {
    const table = box.closest("table");
    if (!table) return;
    const boxes = Array.from(table.querySelectorAll("input.pick"));
    const next = boxes[boxes.indexOf(box) + step];
    if (next) next.focus();
  }

  document.addEventListener("keydown", function (event) {
    const box = event.target;
    if (!(box instanceof HTMLInputElement) || !box.classList.contains("pick")) return;
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    const key = event.key;
    if (key === "ArrowDown" || key === "j") move(box, 1);
    else if (key === "ArrowUp" || key === "k") move(box, -1);
    else if (key === "m") {
      const button = document.getElementById("match-button");
      if (button) button.click();
    } else if (key === "n") {
      const note = document.getElementById("note");
      if (note) note.focus();
    } else if (key === "c") {
      const link = box.closest("tr").querySelector("a.candidates-link");
      if (link) link.click();
    } else return;
    event.preventDefault();
  });

  update();
})();
