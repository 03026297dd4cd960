() => {
  // Figures that fit their box. The server draws every figure once, for any width; this lays each one out
  // in the browser after Plotly draws it, once per drawing (a flag on the layout Gradio hands to Plotly).
  // On a phone (a window ≤ 480 px wide) subplots side by side go into one column (annotations placed on a
  // subplot move with it), the legend goes under the plot, long titles, legend entries and annotations
  // wrap; the page's CSS hides the mode bar. At any width, text that still collides is measured and
  // moved (step 5), and a figure drawn in a hidden tab is fitted to its box when shown. A window that crosses
  // the phone width (a phone turned sideways, a desktop window narrowed) lays every figure out again from the
  // figure as the server drew it.
  if (window.__narrowFigures) return;
  window.__narrowFigures = true;
  const NARROW = 480;   // px: a phone held upright
  const ROW = 300;      // px per stacked subplot, the gap under it included (a y title of 30 characters fits)
  const GAP = 100;      // px under a subplot: its tick labels, its axis title and the next one's title
  const PINNED = {'title.yref': 'container', 'title.y': 1, 'title.yanchor': 'top', 'title.pad.t': 10};
  const LEGEND = 62;    // px between the lowest plot area and the legend under it (ticks, axis title)

  // Plotly's layout calls under way; with no scan pending and none under way every shown figure is laid out:
  // ``window.__figuresSettled()`` says so (what the page's tests wait on, instead of guessing a delay)
  let busy = 0;
  const tracked = (promise) => { busy++; return Promise.resolve(promise).finally(() => { busy--; }); };
  // ... and laid out for the width the window has now (a resize across NARROW is seen a frame later)
  window.__figuresSettled = () => pending === null && busy === 0 && scanned === (window.innerWidth <= NARROW);

  // the figure as the server drew it, kept before the first change (the layout, and the trace names step 4
  // wraps), so that a window crossing NARROW lays it out again from there; one drawn without a height keeps the
  // height Plotly gave it (drawn again, it would take its box's, which the laid-out figure has stretched)
  const keep = (gd, user) => {
    const layout = JSON.parse(JSON.stringify(user));
    if (layout.height == null && gd._fullLayout) layout.height = gd._fullLayout.height;
    gd.__drawn = {layout, names: (gd.data || []).map(t => t.name)};
  };
  const redraw = (gd) => {
    const drawn = gd.__drawn;
    gd.__stale = false;
    const data = (gd.data || []).map((t, i) => Object.assign({}, t, {name: drawn.names[i]}));
    // a new plot, as Gradio first drew it, with Gradio's config (our figures carry none of their own; Plotly.react
    // kept pieces of the layout made for the other width)
    return tracked(window.Plotly.newPlot(gd, data, JSON.parse(JSON.stringify(drawn.layout)), {responsive: true}));
  };

  const wrap = (text, chars) => {
    // break at spaces into lines of at most ``chars`` characters, keeping lines the text already has
    if (typeof text !== 'string' || chars < 8) return text;
    return text.split('<br>').map(line => {
      const words = line.split(' '), lines = [];
      let current = '';
      for (const w of words) {
        const plain = (current + ' ' + w).replace(/<[^>]*>/g, '');
        if (current && plain.length > chars) { lines.push(current); current = w; } else current = current ? current + ' ' + w : w;
      }
      if (current) lines.push(current);
      return lines.join('<br>');
    }).join('<br>');
  };

  const adapt = (gd) => {
    const L = gd._fullLayout, user = gd.layout;
    if (!L || !user || user.__narrow || !window.Plotly) return;
    keep(gd, user);
    user.__narrow = true;
    const width = gd.clientWidth || window.innerWidth - 24;
    const update = {};
    const margin = {t: L.margin.t, b: L.margin.b, l: Math.min(L.margin.l, 70), r: Math.min(L.margin.r, 20)};
    let height = L.height;

    // 1. one column: every (x, y) axis pair that is not overlaid, top to bottom, then left to right
    const cells = [];
    for (const key of Object.keys(L)) {
      const m = /^xaxis(\d*)$/.exec(key);
      if (!m || !L[key].domain || L[key].overlaying) continue;
      const anchor = L[key].anchor;
      const yKey = 'yaxis' + (anchor && anchor !== 'free' ? anchor.slice(1) : m[1]);
      if (!L[yKey] || !L[yKey].domain || L[yKey].overlaying) continue;
      cells.push({x: key, y: yKey, xd: L[key].domain.slice(), yd: L[yKey].domain.slice()});
    }
    const columns = new Set(cells.map(c => c.xd[0].toFixed(2)));
    const moved = [];
    if (columns.size > 1) {
      cells.sort((a, b) => (b.yd[1] - a.yd[1]) || (a.xd[0] - b.xd[0]));
      const n = cells.length, plot = n * ROW - GAP;  // the lowest subplot reaches the plot area's bottom
      height = plot + margin.t + margin.b;
      cells.forEach((c, i) => {
        const top = 1 - i * ROW / plot, bottom = top - (ROW - GAP) / plot;
        update[c.x + '.domain'] = [0, 1];
        update[c.y + '.domain'] = [bottom, top];
        moved.push({from: c, to: {xd: [0, 1], yd: [bottom, top]}});
      });
      // a y axis overlaid on a stacked one keeps its side; its domain follows its base's by Plotly's rules
    }

    // 2. annotations in the figure's own coordinates move with the subplot they sit on (a subplot's
    // title in a smaller font, to stay on one line where it can); what is still too wide wraps in step 5
    (L.annotations || []).forEach((full, i) => {
      if (!moved.length || full.xref !== 'paper' || full.yref !== 'paper') return;
      place(full, i);
      if (full.font && full.font.size > 13) update[`annotations[${i}].font.size`] = 13;
    });
    function place(full, i) {
      let best = null, distance = Infinity;
      for (const m of moved) {
        const cx = (m.from.xd[0] + m.from.xd[1]) / 2, cy = (m.from.yd[0] + m.from.yd[1]) / 2;
        const inside = full.x >= m.from.xd[0] - 0.03 && full.x <= m.from.xd[1] + 0.03;
        const d = Math.abs(full.x - cx) + Math.abs(full.y - cy) + (inside ? 0 : 10);
        if (d < distance) { best = m; distance = d; }
      }
      const f = best.from, t = best.to;
      const x = t.xd[0] + (full.x - f.xd[0]) / (f.xd[1] - f.xd[0]) * (t.xd[1] - t.xd[0]);
      const y = t.yd[0] + (full.y - f.yd[0]) / (f.yd[1] - f.yd[0]) * (t.yd[1] - t.yd[0]);
      update[`annotations[${i}].x`] = Math.min(1, Math.max(0, x));
      update[`annotations[${i}].y`] = y;
    }

    // 3. the title wraps, with room above a first subplot's own title
    const title = L.title && L.title.text;
    if (title) {
      const wrapped = wrap(title, Math.floor((width - 20) / ((L.title.font && L.title.font.size) || 16) * 1.8));
      const lines = wrapped.split('<br>').length;
      update['title.text'] = wrapped;
      update['title.x'] = 0.02;
      update['title.xanchor'] = 'left';
      Object.assign(update, PINNED);  // at the top (Plotly centres it in the top margin, which step 5 may grow)
      margin.t = Math.max(margin.t, 30 + 24 * lines + (moved.length ? 30 : 0));
      height += Math.max(0, margin.t - L.margin.t);
    }

    // 4. the legend under the plot, across
    if (L.showlegend) {
      const plot = height - margin.t - margin.b;
      update['legend.orientation'] = 'h';
      update['legend.x'] = 0;
      update['legend.xanchor'] = 'left';
      update['legend.y'] = -LEGEND / Math.max(plot, 1);
      update['legend.yanchor'] = 'top';
      update['legend.title.text'] = (L.legend.title && L.legend.title.text) || '';
    }
    update.margin = margin;
    update.height = height;
    update.width = width;  // a figure drawn in a hidden tab kept Plotly's default 700 px
    // a legend entry longer than a line wraps (an entry is a trace's name)
    const names = [], which = [];
    if (L.showlegend) {
      (gd.data || []).forEach((t, i) => {
        const name = typeof t.name === 'string' ? wrap(t.name, Math.floor((width - 60) / 6.6)) : t.name;
        if (name !== t.name) { names.push(name); which.push(i); }
      });
    }
    const renamed = which.length ? tracked(window.Plotly.restyle(gd, {name: names}, which)) : Promise.resolve();
    renamed.then(() => tracked(window.Plotly.relayout(gd, update))).then(() => makeRoom(gd))
      .catch(e => console.warn('narrow figure', e));
  };

  // 5. where drawn text still collides, measure and move: the legend under everything the axes drew,
  // the title above everything else, and the figure tall enough for all of it
  const boxes = (gd, selector) => Array.from(gd.querySelectorAll(selector)).map(e => e.getBoundingClientRect())
    .filter(r => r.width > 0.5 && r.height > 0.5);
  const axisText = gd => boxes(gd, '.xtick text, .ytick text, .annotation-text')
    .concat(Array.from(gd.querySelectorAll('text')).filter(e => /^[xy]\d*title$/.test(e.getAttribute('class') || ''))
      .map(e => e.getBoundingClientRect()));
  // 6. labels written beside points (a scatter's text) that would overlap one already shown are hidden, the
  // labels of the trace drawn last (on top) kept first; the hover still names every point. Beam search's tree
  // wrote "5 millionsquaremeters" at 1 400 px and a solid block at 390 px (#48)
  const declutter = (gd) => {
    const shown = [];
    Array.from(gd.querySelectorAll('g.trace.scatter')).reverse().forEach(t => t.querySelectorAll('g.textpoint text')
      .forEach(e => {
        e.style.display = '';
        const r = e.getBoundingClientRect();
        if (r.width < 0.5 || r.height < 0.5) return;
        const hit = shown.some(s => s.left < r.right + 3 && r.left < s.right + 3 && s.top < r.bottom && r.top < s.bottom);
        if (hit) e.style.display = 'none'; else shown.push(r);
      }));
  };
  const makeRoom = (gd, depth = 0) => {
    const L = gd._fullLayout, frame = gd.getBoundingClientRect(), update = {};
    if (depth > 4) { declutter(gd); return; }  // each pass fixes what the last one moved into (wrap, raise, rise, grow)
    // text wider than the room it has sideways: wrap it by the measured overflow
    let wrapped = false;
    const fit = (el, key, text, size) => {
      // a smaller font first (down to 11 px: a line that grows taller can cover what is above it), then wrap
      const r = el.getBoundingClientRect(), over = Math.max(frame.left - r.left, r.right - frame.right, 0);
      if (over < 1 || typeof text !== 'string') return;
      let ratio = (r.width - 2 * over - 8) / r.width;
      if (size) {
        const smaller = Math.max(11, Math.floor(size * ratio));
        if (smaller < size) { update[key.replace(/text$/, 'font.size')] = smaller; wrapped = true; ratio *= size / smaller; }
        if (ratio >= 1) return;
      }
      const chars = Math.floor(text.replace(/<[^>]*>/g, '').length * ratio);
      const shorter = wrap(text.replace(/<br>/g, ' '), chars);
      if (shorter !== text) { update[key] = shorter; wrapped = true; }
    };
    gd.querySelectorAll('text').forEach(e => {
      const m = /^([xy])(\d*)title$/.exec(e.getAttribute('class') || '');
      if (m) { const axis = L[(m[1] === 'x' ? 'xaxis' : 'yaxis') + m[2]]; if (axis && axis.title) fit(e, `${m[1]}axis${m[2]}.title.text`, axis.title.text); }
    });
    gd.querySelectorAll('g.annotation').forEach(g => {
      const i = Number(g.getAttribute('data-index')), text = g.querySelector('.annotation-text');
      const a = L.annotations && L.annotations[i];
      if (text && a) fit(text, `annotations[${i}].text`, a.text, (a.font && a.font.size) || 12);
    });
    // a title running under the mode bar (shown while the pointer is over the figure) wraps short of it
    const bar = gd.querySelector('.modebar'), heading = gd.querySelector('.gtitle');
    if (bar && heading && L.title && typeof L.title.text === 'string' && getComputedStyle(bar).display !== 'none') {
      const b = bar.getBoundingClientRect(), t = heading.getBoundingClientRect();
      if (b.width > 0 && t.right > b.left && t.top < b.bottom && t.bottom > b.top) {
        const plain = L.title.text.replace(/<br>/g, ' ');
        const shorter = wrap(plain, Math.floor(plain.replace(/<[^>]*>/g, '').length * (b.left - 8 - t.left) / t.width));
        if (shorter !== L.title.text) { update['title.text'] = shorter; wrapped = true; }
      }
    }
    // a subplot's title (an annotation above its plot) that a wrapped line brought down onto the tick
    // labels under it: raise it clear of them
    const labels = boxes(gd, '.xtick text, .ytick text');
    gd.querySelectorAll('g.annotation').forEach(g => {
      const i = Number(g.getAttribute('data-index')), a = L.annotations && L.annotations[i];
      const text = g.querySelector('.annotation-text');
      if (!a || !text || a.yref !== 'paper' || a.yanchor !== 'bottom') return;
      const r = text.getBoundingClientRect();
      const hit = labels.filter(t => t.top > (r.top + r.bottom) / 2 - 4 && t.top < r.bottom &&
                                     Math.min(t.right, r.right) > Math.max(t.left, r.left));
      if (!hit.length) return;
      update[`annotations[${i}].yshift`] = (a.yshift || 0) + Math.max(...hit.map(t => r.bottom - t.top)) + 3;
      wrapped = true;
    });
    if (wrapped) {
      tracked(window.Plotly.relayout(gd, update)).then(() => makeRoom(gd, depth + 1));
      return;
    }
    // the plot area keeps its size: what needs room grows the top or bottom margin (the legend's offset
    // is in units of the plot area's height)
    const legend = L.showlegend ? (boxes(gd, 'g.legend rect.bg')[0] || boxes(gd, 'g.legend')[0]) : null;
    const title = boxes(gd, '.gtitle')[0];
    const others = axisText(gd);
    const plot = L.height - L.margin.t - L.margin.b;
    let shift = 0, grow = 0, rise = 0;  // legend down, bottom margin, top margin (px)
    if (legend) {
      const above = others.filter(r => r.top < legend.top + 2 && r.bottom > legend.top - 40 && r.bottom < legend.bottom);
      const lowest = Math.max(...above.map(r => r.bottom), -Infinity);
      if (lowest > legend.top - 6) {
        shift = lowest + 8 - legend.top;
        update['legend.y'] = L.legend.y - shift / plot;
      }
    }
    if (title && title.top < frame.top + 4) {  // a title of several lines starts above the figure: lower it
      update['title.y'] = L.title.y - (frame.top + 6 - title.top) / L.height;
    }
    if (title) {
      const below = others.concat(legend ? [legend] : []).filter(r => r.bottom > title.top && r.top < title.bottom + 2);
      rise = Math.max(...below.map(r => title.bottom + 6 - r.top), 0);
    }
    const lowest = Math.max(...others.map(r => r.bottom), legend ? legend.bottom + shift : -Infinity);
    grow = Math.max(0, lowest + 6 - frame.bottom);
    if (!grow && !rise) {
      if (Object.keys(update).length) tracked(window.Plotly.relayout(gd, update)).then(() => declutter(gd));
      else declutter(gd);
      return;
    }
    if (rise) Object.assign(update, PINNED);  // else Plotly centres the title in the margin that grows
    update['margin.t'] = L.margin.t + rise;
    update['margin.b'] = L.margin.b + grow;
    update.height = L.height + rise + grow;
    tracked(window.Plotly.relayout(gd, update)).then(() => makeRoom(gd, depth + 1));
  };

  // a wider window: the figure as drawn, only fitted to its box (one drawn in a hidden tab kept Plotly's
  // default 700 px) and cleared where drawn text collides (step 5)
  const settle = (gd) => {
    const L = gd._fullLayout, user = gd.layout;
    if (!L || !user || user.__narrow || !window.Plotly) return;
    keep(gd, user);
    user.__narrow = true;
    const width = gd.clientWidth;
    const sized = width > 0 && Math.abs(L.width - width) > 2 ? tracked(window.Plotly.Plots.resize(gd)) : Promise.resolve();
    sized.then(() => makeRoom(gd)).catch(e => console.warn('figure', e));
  };

  // Each figure drawn once. Gradio's Plot mounts a new element for every new figure (its child is keyed on the
  // value), but the element it replaces is handed the new figure first and draws it (Plotly.react, then
  // Plots.resize) before it is removed: each figure of a round step was drawn twice, the first time for nothing
  // (#50). A drawn element handed a figure waits one turn of the event loop, and draws only if it is still on
  // the page (were it kept, as a Gradio that stops replacing it would, the figure is drawn a moment later).
  const drawOnce = () => {
    const P = window.Plotly;
    if (!P || P.__drawOnce) return;
    P.__drawOnce = true;
    const react = P.react, resize = P.Plots.resize;
    P.react = function (gd, ...figure) {
      if (!gd || !gd._fullLayout) return react.call(this, gd, ...figure);
      gd.__waiting = true;  // its resize, called right after, waits with it
      return new Promise(resolve => setTimeout(() => {
        gd.__waiting = false;
        if (!gd.isConnected) { resolve(gd); return; }
        Promise.resolve(react.call(P, gd, ...figure)).then(() => resize.call(P.Plots, gd)).then(() => resolve(gd),
          e => { console.warn('figure', e); resolve(gd); });
      }, 0));
    };
    P.Plots.resize = function (gd) {
      return gd && gd.__waiting ? Promise.resolve(gd) : resize.apply(this, arguments);
    };
  };

  let pending = null, scanned = null;  // scanned: whether the last pass laid figures out for a phone
  const scan = () => {
    pending = null;
    drawOnce();  // Plotly is loaded with the first figure Gradio draws
    const narrow = window.innerWidth <= NARROW;
    if (scanned !== null && narrow !== scanned) {  // the window crossed NARROW: every figure laid out for the other
      document.querySelectorAll('.js-plotly-plot').forEach(gd => { if (gd.__drawn && gd.layout && gd.layout.__narrow) gd.__stale = true; });
    }
    scanned = narrow;
    document.querySelectorAll('.js-plotly-plot').forEach(gd => {
      if (!gd.offsetParent) return;  // in a hidden tab: laid out once shown, at the size it is shown at
      const lay = () => { try { (narrow ? adapt : settle)(gd); } catch (e) { console.warn('figure', e); } };
      // (a figure the server has drawn anew since the crossing is laid out as it is: its layout is not ours)
      if (gd.__stale && gd.layout && gd.layout.__narrow) redraw(gd).then(lay).catch(e => console.warn('figure', e));
      else { gd.__stale = false; lay(); }
    });
  };
  // new figures, redrawn figures, a tab shown (its figures become visible), and a window crossing NARROW
  const later = () => { if (!pending) pending = setTimeout(scan, 80); };
  new MutationObserver(later)
    .observe(document.body, {childList: true, subtree: true, attributes: true, attributeFilter: ['class', 'hidden', 'style']});
  // (after Plotly's own resize of every shown figure, due 100 ms after the event: it would undo a layout made before it)
  window.addEventListener('resize', () => {
    if ((window.innerWidth <= NARROW) === scanned) return;
    clearTimeout(pending);
    pending = setTimeout(scan, 250);
  });
  scan();
}
