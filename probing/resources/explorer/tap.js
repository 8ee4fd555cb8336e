const d = source.data;
const xs = d['px_' + panel], ys = d['py_' + panel];
const xr = plot.x_range, yr = plot.y_range;
const sx = plot.inner_width / (xr.end - xr.start), sy = plot.inner_height / (yr.end - yr.start);
let best = -1, bestd = 100;  // squared pixels: within 10 px
for (let i = 0; i < xs.length; i++) {
  if (!Number.isFinite(xs[i])) continue;
  const dx = (xs[i] - cb_obj.x) * sx, dy = (ys[i] - cb_obj.y) * sy;
  const dd = dx * dx + dy * dy;
  if (dd < bestd) { bestd = dd; best = i; }
}
if (best < 0) return;
const k = knn.data['k'][0];
const ids = [], cos = [];
for (let j = 0; j < k; j++) {
  const id = knn.data['nn_' + panel + '_' + j][best];
  if (id >= 0) { ids.push(id); cos.push(knn.data['cos_' + panel + '_' + j][best]); }
}
const esc = s => String(s).replace(/[&<>"]/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));
const where = panel === 'GloVe' ? 'GloVe' : 'layer ' + panel;
const dup = d['dup_' + panel];
const distinct = dup[best] > 1 ? ' distinct vectors' : ' occurrences';
let h = `<div class="knn"><b>${ids.length} nearest${distinct} at ${esc(where)}</b> (cosine in the original space) of: `
  + `${d.sentence_html[best]} <i>${esc(d.sense[best])} ${esc(d.gloss[best])}</i>`;
if (dup[best] > 1) {
  h += `<div class="ties"><b>${dup[best] - 1} occurrences at cosine 1.000: identical vectors</b> `
    + `(every occurrence of this word form has the same vector at ${esc(where)})</div>`;
}
h += '<table>';
ids.forEach((id, r) => {
  const times = dup[id] > 1 ? ` <i>(${dup[id]} identical occurrences)</i>` : '';
  h += `<tr><td>${r + 1}</td><td>${cos[r].toFixed(3)}</td><td>${d.sentence_html[id]}${times}</td>`
    + `<td>${esc(d.lemma[id])} ${esc(d.upos[id])}</td><td>${esc(d.sense[id])} <i>${esc(d.gloss[id])}</i></td></tr>`;
});
h += '</table></div>';
out.text = h;
const m = {};
for (const p of panels) {
  m['x_' + p] = [d['x_' + p][best]].concat(ids.map(i => d['x_' + p][i]));
  m['y_' + p] = [d['y_' + p][best]].concat(ids.map(i => d['y_' + p][i]));
}
m['kind'] = ['query'].concat(ids.map(() => 'neighbour'));
m['mcolor'] = ['#000000'].concat(ids.map(() => '#D55E00'));
marks.data = m;
