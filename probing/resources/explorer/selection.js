const n = source.selected.indices.length;
info.text = n ? `<b>${n}</b> selected (in every panel)` : 'no selection: drag a box or a lasso';
