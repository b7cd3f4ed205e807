/* ngx_llm dashboard: polls the llm_status JSON once a second and plots its
 * history columns with uPlot. Plain browser JavaScript, no build step.
 * window.__dashboard reports what is drawn (polls, points per chart) for
 * the headless check in tests/dashboard; window.__dashboardReady turns true
 * once every chart holds data from a live engine. */
(function () {
  'use strict';
  var STATUS_URL = document.body.getAttribute('data-status-url') || '../status';
  var POLL_MS = 1000;
  var COLORS = ['#2f6fdf', '#e0702a', '#2e9d52', '#b03fb0', '#c23b3b', '#6b7a8f'];

  /* A chart: title, y axes, series (history column, label, axis index, optional scale fn). */
  var CHARTS = [
    { id: 'throughput', title: 'Throughput', axes: ['tokens/s', 'requests/s'], series: [
      { col: 'tokens_out_per_s', label: 'generated tok/s' },
      { col: 'tokens_in_per_s', label: 'prompt tok/s' },
      { col: 'tokens_cached_per_s', label: 'prompt tok/s from the prefix cache' },
      { col: 'finished_per_s', label: 'finished req/s', axis: 1 },
    ] },
    { id: 'ttft', title: 'Time to first token (ms, per-second window)', axes: ['ms'], series: [
      { col: 'ttft_p50_ms', label: 'TTFT p50' },
      { col: 'ttft_p99_ms', label: 'TTFT p99' },
      { col: 'queue_p50_ms', label: 'queue p50' },
    ] },
    { id: 'tpot', title: 'Time per output token / engine step (ms)', axes: ['ms'], series: [
      { col: 'tpot_p50_ms', label: 'TPOT p50' },
      { col: 'tpot_p99_ms', label: 'TPOT p99' },
      { col: 'step_p50_ms', label: 'step p50' },
      { col: 'step_p99_ms', label: 'step p99' },
    ] },
    { id: 'batch', title: 'Batch and queue', axes: ['sequences'], series: [
      { col: 'batch_size', label: 'batch size' },
      { col: 'running', label: 'running' },
      { col: 'queue_depth', label: 'queue depth' },
      { col: 'slots_in_use', label: 'slots in use' },
    ] },
    { id: 'kv', title: 'KV cache', axes: ['% used', 'blocks'], series: [
      { col: 'kv_used_pct', label: 'KV used %' },
      { col: 'kv_blocks_used', label: 'blocks used', axis: 1 },
      { col: 'kv_window_blocks_used', label: 'window-pool blocks used', axis: 1 },
      { col: 'preempted', label: 'preemptions/s', axis: 1 },
    ] },
    { id: 'knobs', title: 'Tuning knobs', axes: ['batch / ms', 'tokens'], series: [
      { col: 'max_batch_size', label: 'max_batch_size' },
      { col: 'batch_timeout_ms', label: 'batch_timeout_ms' },
      { col: 'max_batched_tokens', label: 'max_batched_tokens', axis: 1 },
      { col: 'mem_cap_tokens', label: 'memory cap (tokens)', axis: 1 },
    ], optional: true },
  ];

  var state = { polls: 0, failures: 0, points: {}, lastError: null };
  window.__dashboard = state;
  window.__dashboardReady = false;
  var plots = {};

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function fmt(v, digits) {
    if (v === null || v === undefined || !isFinite(v)) return '–';
    if (Math.abs(v) >= 1e6) return (v / 1e6).toFixed(1) + 'M';
    if (Math.abs(v) >= 1e4) return (v / 1e3).toFixed(1) + 'k';
    return Number(v).toFixed(digits === undefined ? 0 : digits);
  }

  /* Derived columns the page computes from the JSON's. */
  function columns(h) {
    var used = h.kv_blocks_used || [], free = h.kv_blocks_free || [];
    h.kv_used_pct = used.map(function (u, i) {
      var tot = u + (free[i] || 0);
      return tot > 0 ? 100 * u / tot : null;
    });
    /* 0 = no memory cap in force: no point rather than a line at zero */
    if (Array.isArray(h.mem_cap_tokens))
      h.mem_cap_tokens = h.mem_cap_tokens.map(function (v) { return v > 0 ? v : null; });
    return h;
  }

  function makePlot(spec, h) {
    var box = el('div', 'chart');
    box.id = 'chart-' + spec.id;
    box.appendChild(el('h3', null, spec.title));
    document.getElementById('charts').appendChild(box);
    var axes = [{}];
    spec.axes.forEach(function (label, i) {
      var a = { label: label, scale: i ? 'y2' : 'y', size: 60 };
      if (i) { a.side = 1; a.grid = { show: false }; }
      axes.push(a);
    });
    var series = [{}];
    spec.series.forEach(function (s, i) {
      series.push({ label: s.label, scale: s.axis ? 'y2' : 'y', stroke: COLORS[i % COLORS.length],
                    width: 1.5, spanGaps: false, value: function (u, v) { return fmt(v, 2); } });
    });
    var opts = {
      width: Math.max(300, box.clientWidth - 12), height: 220,
      scales: { x: { time: true }, y: { range: function (u, min, max) { return [0, max > 0 ? max * 1.1 : 1]; } },
                y2: { range: function (u, min, max) { return [0, max > 0 ? max * 1.1 : 1]; } } },
      axes: axes, series: series,
    };
    return { spec: spec, box: box, plot: new uPlot(opts, data(spec, h), box) };
  }

  function data(spec, h) {
    var d = [h.t || []];
    spec.series.forEach(function (s) { d.push(h[s.col] || []); });
    return d;
  }

  /* Points drawn in a chart: samples with at least one non-null value. */
  function countPoints(d) {
    var n = 0;
    for (var i = 0; i < d[0].length; i++) {
      for (var k = 1; k < d.length; k++) if (d[k][i] !== null && d[k][i] !== undefined) { n++; break; }
    }
    return n;
  }

  function tiles(st) {
    var c = st.current || {}, lat = c.latency_ms || {}, h = st.history || {};
    var last = function (col) { var a = h[col] || []; return a.length ? a[a.length - 1] : null; };
    var kvTot = (c.kv_blocks_used || 0) + (c.kv_blocks_free || 0);
    var kvwTot = (c.kv_window_blocks_used || 0) + (c.kv_window_blocks_free || 0);
    var items = [
      ['generated tok/s', fmt(last('tokens_out_per_s'))],
      ['requests finished', fmt(c.finished)],
      ['running / slots', fmt(c.running) + ' / ' + fmt(st.engine && st.engine.n_slots)],
      ['batch size', fmt(c.batch_size)],
      ['queue depth', fmt(c.queue_depth)],
      ['KV used', kvTot ? fmt(100 * c.kv_blocks_used / kvTot, 1) + ' %' : '–'],
      ['window pool used', kvwTot ? fmt(100 * c.kv_window_blocks_used / kvwTot, 1) + ' %' : '–'],
      ['prompt tokens from the prefix cache', c.tokens_in ? fmt(100 * (c.tokens_cached || 0) / c.tokens_in, 1) + ' %' : '–'],
      ['TTFT p50 / p99 ms', fmt(lat.ttft && lat.ttft.p50, 1) + ' / ' + fmt(lat.ttft && lat.ttft.p99, 1)],
      ['TPOT p50 / p99 ms', fmt(lat.tpot && lat.tpot.p50, 1) + ' / ' + fmt(lat.tpot && lat.tpot.p99, 1)],
      ['failed / cancelled', fmt(c.failed) + ' / ' + fmt(c.cancelled)],
      ['preemptions', fmt(c.preemptions)],
      ['out-of-memory shrinks / recoveries', fmt(c.oom_shrinks) + ' / ' + fmt(c.oom_recoveries)],
    ];
    var box = document.getElementById('tiles');
    box.textContent = '';
    items.forEach(function (it) {
      var t = el('div', 'tile');
      t.appendChild(el('b', null, it[1]));
      t.appendChild(el('span', null, it[0]));
      box.appendChild(t);
    });
  }

  function header(st) {
    var e = st.engine || {}, badge = document.getElementById('engine-state');
    badge.textContent = e.state || 'unknown';
    badge.className = 'badge ' + (e.up ? e.state : 'down');
    document.getElementById('engine-info').textContent = e.model
      ? e.model + ' · ctx ' + e.ctx_len + ' · generation ' + e.generation + ' · pid ' + e.pid
      : (e.reason || '');
    document.getElementById('updated').textContent = 'updated ' + new Date(st.time * 1000).toLocaleTimeString();
  }

  function tuning(st) {
    var sec = document.getElementById('tuning');
    var knobs = st.tuning || (st.current && st.current.tuning);
    if (!knobs) { sec.hidden = true; return; }
    sec.hidden = false;
    var body = document.getElementById('tuning-body');
    body.textContent = '';
    Object.keys(knobs).forEach(function (k) {
      var v = knobs[k];
      var t = el('div', 'tile');
      t.appendChild(el('b', null, typeof v === 'number' ? fmt(v, Number.isInteger(v) ? 0 : 2) : String(v)));
      t.appendChild(el('span', null, k));
      body.appendChild(t);
    });
  }

  function render(st) {
    header(st);
    tiles(st);
    tuning(st);
    var h = columns(st.history || { t: [] });
    var ready = (h.t || []).length > 0;
    CHARTS.forEach(function (spec) {
      var present = spec.series.some(function (s) { return Array.isArray(h[s.col]); });
      if (spec.optional && !present) return; /* this engine publishes no tuning knobs */
      if (!plots[spec.id]) plots[spec.id] = makePlot(spec, h);
      else plots[spec.id].plot.setData(data(spec, h));
      state.points[spec.id] = countPoints(data(spec, h));
      if (state.points[spec.id] < 2) ready = false;
    });
    /* Ready: every chart drawn holds points and the engine has produced tokens in the window. */
    var out = h.tokens_out_per_s || [];
    window.__dashboardReady = ready && out.some(function (v) { return v > 0; });
  }

  function poll() {
    fetch(STATUS_URL, { cache: 'no-store' })
      .then(function (r) {
        if (!r.ok) throw new Error('status ' + r.status + ' from ' + STATUS_URL);
        return r.json();
      })
      .then(function (st) {
        state.polls++;
        document.getElementById('error').hidden = true;
        render(st);
      })
      .catch(function (err) {
        state.failures++;
        state.lastError = String(err);
        var e = document.getElementById('error');
        e.textContent = 'cannot read ' + STATUS_URL + ': ' + err.message;
        e.hidden = false;
        var b = document.getElementById('engine-state');
        b.textContent = 'no status';
        b.className = 'badge down';
      })
      .then(function () { setTimeout(poll, POLL_MS); });
  }

  window.addEventListener('resize', function () {
    Object.keys(plots).forEach(function (k) {
      var p = plots[k];
      p.plot.setSize({ width: Math.max(300, p.box.clientWidth - 12), height: 220 });
    });
  });
  poll();
})();
