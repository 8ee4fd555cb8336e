const mode = select.value;
const d = source.data;
d.color = Array.from(d['c_' + mode]);
source.change.emit();
legend.text = legends[mode];
