const d = source.data;
const sel = source.selected.indices.slice().sort((a, b) => a - b);
if (sel.length === 0) { status.text = 'nothing selected: draw a lasso or a box first'; return; }
const cols = ['corpus', 'row', 'sentence_id', 'doc_id', 'word', 'lemma', 'upos', 'senses', 'gloss', 'set', 'sentence'];
for (const p of panels) { cols.push('x_' + p, 'y_' + p); }
const q = v => { const s = (v === null || v === undefined || (typeof v === 'number' && isNaN(v))) ? '' : String(v);
  return /[",\n\r]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s; };
const lines = [cols.map(c => c === 'senses' ? 'sense' : c).join(',')];
for (const i of sel) lines.push(cols.map(c => q(d[c][i])).join(','));
const blob = new Blob([lines.join('\n') + '\n'], {type: 'text/csv;charset=utf-8'});
const a = document.createElement('a');
a.href = URL.createObjectURL(blob);
a.download = 'selection.csv';
document.body.appendChild(a); a.click(); a.remove();
setTimeout(() => URL.revokeObjectURL(a.href), 1000);
status.text = `exported ${sel.length} occurrences to selection.csv`;
