// The maps wrap to the window: as many columns as keep a map at least panel_min px wide (at most
// panel_max) in the window's width, never more than the page was laid out for (width), the rest in rows;
// the rule of probing.views.explorer._columns, run on load and on every resize.
function fit() {
  const usable = Math.min(window.innerWidth, width) - toolbar - 16;
  const ncols = Math.max(1, Math.min(plots.length, Math.floor(usable / panel_min)));
  const size = Math.floor(Math.min(panel_max, Math.floor(usable / ncols) - 8));
  for (const p of plots) {
    if (p.width !== size) { p.width = size; p.height = size; }
  }
  const cells = plots.map((p, i) => [p, Math.floor(i / ncols), i % ncols]);
  if (cells.some((c, i) => grid.children[i][1] !== c[1] || grid.children[i][2] !== c[2])) grid.children = cells;
}
fit();
window.addEventListener('resize', fit);
