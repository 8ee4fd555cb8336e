const q = search.value_input.trim().toLowerCase();
const d = source.data;
const n = d.form.length;
const lw = new Array(n), alpha = new Array(n);
let hits = 0;
for (let i = 0; i < n; i++) {
  const hit = q !== '' && (d.form[i] === q || d.lemma_lc[i] === q);
  if (hit) hits++;
  d.hit[i] = hit ? 1 : 0;
  lw[i] = hit ? 2.0 : 0.0;
  alpha[i] = q === '' ? 0.75 : (hit ? 1.0 : 0.12);
}
for (const p of panels) {
  const base = d['bsize_' + p];
  d['size_' + p] = Array.from(base, (b, i) => d.hit[i] ? b * 1.6 : b);
}
d.line_width = lw; d.alpha = alpha;
source.change.emit();
status.text = q === '' ? '' : `<b>${hits}</b> of ${n} occurrences match "${q.replace(/[&<>"]/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]))}"`;
