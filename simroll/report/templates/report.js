// simroll report: sortable and filterable tables. No libraries, no network.
(function () {
  "use strict";

  function sortValue(row, column) {
    const cell = row.cells[column];
    if (!cell) return "";
    return cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent.trim();
  }

  function compareValues(a, b) {
    // Empty values (unknown, n/a) always sort last; numbers compare as numbers.
    if (a === "" || b === "") return a === b ? 0 : (a === "" ? 1 : -1);
    const x = Number(a), y = Number(b);
    if (!Number.isNaN(x) && !Number.isNaN(y)) return x - y;
    return a.localeCompare(b, undefined, { numeric: true });
  }

  function makeSortable(table) {
    const headers = table.tHead ? Array.from(table.tHead.rows[0].cells) : [];
    headers.forEach(function (header, column) {
      header.tabIndex = 0;
      header.title = header.title || "sort by " + header.textContent.trim();
      function sort() {
        const ascending = header.getAttribute("aria-sort") !== "ascending";
        headers.forEach(function (other) { other.removeAttribute("aria-sort"); });
        header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        Array.from(table.tBodies).forEach(function (body) {
          const rows = Array.from(body.rows);
          rows.sort(function (r1, r2) {
            const a = sortValue(r1, column), b = sortValue(r2, column);
            if (a === "" || b === "") return compareValues(a, b);  // unknowns last both ways
            const order = compareValues(a, b);
            return ascending ? order : -order;
          });
          rows.forEach(function (row) { body.appendChild(row); });
        });
      }
      header.addEventListener("click", sort);
      header.addEventListener("keydown", function (event) {
        if (event.key === "Enter" || event.key === " ") { event.preventDefault(); sort(); }
      });
    });
  }

  function makeFilterable(tools) {
    const table = document.getElementById(tools.dataset.table);
    if (!table) return;
    const search = tools.querySelector("input[type=search]");
    const select = tools.querySelector("select");
    const count = tools.querySelector(".count");
    const rows = Array.from(table.tBodies[0] ? table.tBodies[0].rows : []);
    function apply() {
      const text = search.value.trim().toLowerCase();
      const tag = select.value;
      let shown = 0;
      rows.forEach(function (row) {
        const tags = (row.dataset.tags || "").split(" ");
        const visible = (!text || row.textContent.toLowerCase().includes(text)) &&
          (!tag || tags.includes(tag));
        row.hidden = !visible;
        if (visible) shown += 1;
      });
      count.textContent = "showing " + shown + " of " + rows.length;
    }
    search.addEventListener("input", apply);
    select.addEventListener("change", apply);
    apply();
  }

  document.querySelectorAll("table.sortable").forEach(makeSortable);
  document.querySelectorAll(".table-tools").forEach(makeFilterable);
  document.body.dataset.ready = "true";
})();
