// The text boxes of every visible Plotly figure on the page that overlap or are clipped: the titles, the
// subplot titles and other annotations, the axis titles, the legend box and the mode bar (against each
// other), and the tick labels (against those, not each other: Plotly thins and turns its own ticks).
() => {
  const problems = [];
  const overlap = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 2 &&
                            Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 2;
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    if (!gd.offsetParent || !gd.querySelector('svg.main-svg')) continue;  // in a hidden tab, or not drawn
    const figure = (gd.closest('[id]') || {id: '?'}).id;
    const frame = gd.getBoundingClientRect();
    const items = [];
    const add = (el, kind, text) => {
      const r = el.getBoundingClientRect();
      if (r.width > 0.5 && r.height > 0.5) items.push({kind, text: (text || el.textContent || '').trim().slice(0, 50), r});
    };
    gd.querySelectorAll('.gtitle').forEach(e => add(e, 'title'));
    gd.querySelectorAll('.annotation-text').forEach(e => add(e, 'annotation'));
    gd.querySelectorAll('text').forEach(e => { if (/^[xy]\d*title$/.test(e.getAttribute('class') || '')) add(e, 'axis title'); });
    gd.querySelectorAll('g.legend').forEach(e => add(e.querySelector('rect.bg') || e, 'legend', 'legend'));
    gd.querySelectorAll('.modebar').forEach(e => { if (getComputedStyle(e).display !== 'none' && getComputedStyle(e.parentElement).opacity !== '0') add(e, 'mode bar', 'mode bar'); });
    gd.querySelectorAll('.xtick text, .ytick text').forEach(e => add(e, 'tick'));
    for (const it of items) {
      const r = it.r;
      if (it.kind !== 'mode bar' && (r.left < frame.left - 1 || r.right > frame.right + 1 || r.top < frame.top - 1 || r.bottom > frame.bottom + 1 || r.left < -1 || r.right > window.innerWidth + 1))
        problems.push(`${figure}: ${it.kind} "${it.text}" clipped`);
    }
    for (let i = 0; i < items.length; i++) for (let j = i + 1; j < items.length; j++) {
      const a = items[i], b = items[j];
      if (a.kind === 'tick' && b.kind === 'tick') continue;
      if (overlap(a.r, b.r)) problems.push(`${figure}: ${a.kind} "${a.text}" overlaps ${b.kind} "${b.text}"`);
    }
  }
  return problems;
}
