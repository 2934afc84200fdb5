// The page of `fvic report` (fvi/report/html_page.h inlines this file, the style and the
// charting library into one HTML file). It reads the run's data from the JSON element
// #fvic-data (compiler/driver/report_data.cpp writes it) and draws every chart with Vega-Lite.
// When every chart has settled, <body> gets data-charts (how many were asked for) and
// data-rendered (how many rendered); a failure is listed in #report-errors and counted in
// data-errors (report/common.js), so a headless browser can check the page
// (tests/e2e/check_report.py).
(function () {
  'use strict';
  const data = JSON.parse(document.getElementById('fvic-data').textContent);
  const root = document.getElementById('report');
  const {element, bytes} = window.fvicPage;
  const pending = [];

  function section(title, id) {
    const s = element('section', {id: id});
    s.append(element('h2', {}, title));
    root.append(s);
    return s;
  }
  function table(header, rows, cls) {
    const t = element('table', cls ? {class: cls} : {});
    if (header) t.append(element('thead', {}, element('tr', {}, ...header.map((h) => element('th', {}, h)))));
    const body = element('tbody');
    for (const r of rows) body.append(element('tr', {}, ...r.map((c) => element('td', {}, c === null ? 'NA' : c))));
    t.append(body);
    return t;
  }
  function figure(x) {
    if (x === null || x === undefined) return 'NA';
    if (typeof x !== 'number') return String(x);
    if (x !== 0 && (Math.abs(x) >= 1e5 || Math.abs(x) < 1e-3)) return x.toExponential(2);
    return String(Number(x.toPrecision(3)));
  }
  function chart(parent, id, title, spec) {
    pending.push(window.fvicPage.chart(parent, id, title, spec));
  }
  // Rows of a {columns, rows} table as objects.
  function records(t) {
    return (t && t.rows ? t.rows : []).map((r) => Object.fromEntries(t.columns.map((c, i) => [c, r[i]])));
  }

  const run = data.run || {};
  const plan = data.plan || null;

  // --- The run: what it fitted and whether it got there ------------------------------------
  {
    const title = (run.model || (plan && plan.model) || 'run') + (run.method ? ' — ' + run.method : '');
    root.append(element('h1', {}, title));
    root.append(element('p', {class: 'where'}, data.directory || ''));
    const facts = [];
    if (run.silos !== undefined) facts.push(['silos', run.silos]);
    if (run.iterations !== undefined) facts.push(['steps taken', run.iterations + ' of at most ' + run.rounds]);
    if (run.converged !== undefined) facts.push(['converged', run.converged ? 'yes' : 'no']);
    if (run.criterion) {
      const c = run.criterion;
      facts.push(['stopping rule', 'relative objective change ' + figure(c.relative_objective_change) +
        ', drift ' + figure(c.drift_sd) + ' q sds, standard error ' + figure(c.standard_error_sd) + ' q sds']);
    }
    facts.push(['Pareto k̂', run.khat !== undefined ? figure(run.khat) +
      (run.khat_reading ? ' (' + run.khat_reading + ')'
        : run.khat < 0.5 ? ' (good)' : run.khat <= 0.7 ? ' (usable)' : ' (poor: q is not to be trusted)') : 'not computed']);
    if (run.moments_corrected)
      facts.push(['q', 'moved from the ELBO\'s optimum to the posterior\'s mean and covariance as importance sampling ' +
        'estimates them (the moment correction: the notes below)']);
    if (data.draws !== undefined) facts.push(['draws from q', data.draws]);
    if (data.facts && data.facts.family) facts.push(['family', data.facts.family]);
    root.append(table(null, facts, 'facts'));
    if (run.notes && run.notes.length) {
      const notes = element('ul', {class: 'notes'});
      for (const n of run.notes) notes.append(element('li', {class: n.level}, (n.level === 'warning' ? 'warning: ' : '') + n.text));
      root.append(notes);
    }
  }

  // --- The plan: parties, messages with sizes, what never leaves a silo ---------------------
  if (plan) {
    const s = section('The plan', 'plan');
    s.append(element('p', {}, 'method ' + plan.method + (plan.family ? ', family ' + plan.family : '') +
      (plan.silos ? ', ' + plan.silos + ' silos' : '')));
    if (plan.reasons && plan.reasons.length) s.append(element('ul', {}, ...plan.reasons.map((r) => element('li', {}, 'why: ' + r))));
    if (plan.terms && plan.terms.length)
      s.append(table(['line', 'term', 'subject', 'distribution', 'evaluated by'],
        plan.terms.map((t) => [t.line, t.kind, t.subject || '', t.distribution || '', t.owner])));
    const messages = (plan.opening_messages || []).map((m) => ['once, before the first step', m.from + ' → ' + m.to,
      m.content, m.doubles, m.doubles_per_silo ? m.doubles_per_silo.map((d) => bytes(8 * d)).join(', ') : '']);
    for (const m of plan.messages || [])
      messages.push(['each step', m.from + ' → ' + m.to, m.content, m.doubles,
        m.bytes_per_silo ? m.bytes_per_silo.map(bytes).join(', ') : 'with the data\'s sizes']);
    for (const m of plan.closing_messages || [])
      messages.push(['once, at the end', m.from + ' → ' + m.to, m.content, m.doubles,
        m.bytes_per_silo ? m.bytes_per_silo.map(bytes).join(', ') : '']);
    if (messages.length) {
      s.append(element('h3', {}, 'Messages'));
      s.append(table(['when', 'from → to', 'what', 'doubles', 'bytes per silo'], messages));
    }
    const never = plan.never_leaves_silo || [];
    s.append(element('p', {class: 'private'}, never.length
      ? 'Never leaves a silo: ' + never.join(', ') + '.' : 'The silos hold no data of their own.'));
    if (plan.never_leaves_server && plan.never_leaves_server.length)
      s.append(element('p', {class: 'private'}, 'Never leaves the server: ' + plan.never_leaves_server.join(', ') + '.'));
    for (const n of plan.notes || []) s.append(element('p', {class: 'note'}, n));
  }

  // --- Convergence --------------------------------------------------------------------------
  const metrics = records(data.metrics);
  if (metrics.length) {
    const s = section('Convergence', 'convergence');
    chart(s, 'objective', 'The objective (ELBO, or the method\'s own) at each report', {
      width: 560, height: 220, data: {values: metrics.filter((m) => m.elbo !== null)},
      mark: {type: 'line', point: metrics.length < 60},
      encoding: {x: {field: 'round', type: 'quantitative', title: 'report'},
                 y: {field: 'elbo', type: 'quantitative', title: 'objective', scale: {zero: false}}}});
    // Each silo's part of the objective (silos.csv's objective_term: SFVI's silo terms of the
    // ELBO, PVI's expected log likelihoods, SFVI-Avg's local objectives), where the method has them.
    const terms = records(data.silos).filter((r) => r.objective_term !== null && r.objective_term !== undefined)
      .map((r) => ({round: r.round, silo: 'silo ' + r.silo, term: r.objective_term}));
    if (terms.length)
      chart(s, 'silo-terms', 'Each silo\'s term of the objective at each report (its mean since the last)', {
        width: 560, height: 200, data: {values: terms}, mark: {type: 'line', point: metrics.length < 60},
        encoding: {x: {field: 'round', type: 'quantitative', title: 'report'},
                   y: {field: 'term', type: 'quantitative', title: 'silo term', scale: {zero: false}},
                   color: {field: 'silo', type: 'nominal', title: null}}});
    // The stopping rule's figures at each report against its tolerances (docs/user-guide.md §7).
    const rule = [];
    const names = {rule_relative_change: 'relative change of the objective', rule_drift_sd: 'drift (q sds)',
                   rule_standard_error_sd: 'standard error (q sds)'};
    for (const m of metrics)
      for (const [column, label] of Object.entries(names))
        if (m[column] !== null && m[column] !== undefined && m[column] > 0) rule.push({round: m.round, figure: label, value: m[column]});
    if (rule.length) {
      const c = run.criterion || {};
      const tolerances = [];
      if (c.tol) tolerances.push({value: c.tol, what: 'tol (relative change)'});
      if (c.tol_param) {
        tolerances.push({value: c.tol_param, what: 'tol_param (standard error)'});
        tolerances.push({value: 2 * c.tol_param, what: '2 tol_param (drift)'});
      }
      const layers = [{data: {values: rule}, mark: {type: 'line', point: metrics.length < 60},
                       encoding: {x: {field: 'round', type: 'quantitative', title: 'report'},
                                  y: {field: 'value', type: 'quantitative', title: 'figure', scale: {type: 'log'}},
                                  color: {field: 'figure', type: 'nominal', title: null}}}];
      if (tolerances.length)
        layers.push({data: {values: tolerances}, mark: {type: 'rule', strokeDash: [4, 3], color: '#666'},
                     encoding: {y: {field: 'value', type: 'quantitative'}, tooltip: {field: 'what'}}});
      chart(s, 'stopping-rule', 'The stopping rule at each report, its tolerances dashed: the objective\'s relative change ' +
            'ends the optimising phase (or falls within its noise); then the run has converged once the drift is under ' +
            '2 tol_param and the standard error under tol_param (docs/user-guide.md §7)',
            {width: 560, height: 200, layer: layers});
    }
    const columns = data.metrics.columns || [];
    const heldout = columns.filter((c) => c.startsWith('test_') && !c.endsWith('_if_calibrated'));
    for (const column of heldout) {
      const values = metrics.filter((m) => m[column] !== null);
      const line = {mark: {type: 'line', point: metrics.length < 60, color: '#8a5a00'},
                    encoding: {x: {field: 'round', type: 'quantitative', title: 'report'},
                               y: {field: column, type: 'quantitative', title: column, scale: {zero: false}}}};
      // A calibration error beside what a calibrated predictive scores on these rows (dashed).
      const reference = column + '_if_calibrated';
      const title = 'Held-out ' + column.slice(5).replace('_', ' ') + ' (--test) at each report' +
        (columns.includes(reference) ? ', dashed: what a calibrated predictive scores on these rows' : '');
      const spec = !columns.includes(reference) ? line : {layer: [line, {
        mark: {type: 'line', strokeDash: [4, 3], color: '#666'},
        encoding: {x: {field: 'round', type: 'quantitative'}, y: {field: reference, type: 'quantitative'}}}]};
      chart(s, column, title, Object.assign({width: 560, height: 160, data: {values}}, spec));
    }
  }

  // --- The posterior ------------------------------------------------------------------------
  if (data.marginals && data.marginals.length) {
    const s = section('Posterior marginals', 'posterior');
    s.append(element('p', {}, 'Histograms of q\'s draws (density), the 90% interval (5% to 95%) below each, the mean ' +
      'as a rule, and the prior where the model states it with numbers (dashed). ' +
      (data.summary && data.summary.elements > data.marginals.length
        ? data.marginals.length + ' of ' + data.summary.elements + ' elements are drawn; the table lists ' +
          data.summary.rows.length + '.' : '')));
    const grid = element('div', {class: 'grid'});
    s.append(grid);
    data.marginals.forEach((m, i) => {
      if (!m.bins) return;
      const layers = [
        {data: {values: m.bins}, mark: {type: 'rect', color: '#4c78a8', opacity: 0.8},
         encoding: {x: {field: 'x0', type: 'quantitative', title: m.name, scale: {zero: false}}, x2: {field: 'x1'},
                    y: {field: 'density', type: 'quantitative', title: 'density'}}},
        {data: {values: [{lo: m.q5, hi: m.q95}]}, mark: {type: 'rule', strokeWidth: 4, color: '#222'},
         encoding: {x: {field: 'lo', type: 'quantitative'}, x2: {field: 'hi'}, y: {datum: 0}}},
        {data: {values: [{mean: m.mean}]}, mark: {type: 'rule', color: '#d62728'},
         encoding: {x: {field: 'mean', type: 'quantitative'}}}];
      if (m.prior)
        layers.push({data: {values: m.prior.curve}, mark: {type: 'line', strokeDash: [4, 3], color: '#2ca02c'},
                     encoding: {x: {field: 'x', type: 'quantitative'}, y: {field: 'density', type: 'quantitative'}}});
      chart(grid, 'marginal-' + i, m.name + (m.prior ? ' (prior ' + m.prior.text + ')' : ''),
        {width: 240, height: 140, layer: layers});
    });
  }
  if (data.summary && data.summary.rows.length) {
    const s = section('Posterior summary', 'summary');
    s.append(element('p', {}, 'As R\'s posterior::summarise_draws() computes it, from ' + data.draws +
      ' independent draws of q (R-hat and ESS would say nothing about them; k̂ does).' +
      (data.summary.elements > data.summary.rows.length
        ? ' The first ' + data.summary.rows.length + ' of ' + data.summary.elements + ' elements; `fvic summary` prints all.' : '')));
    s.append(table(data.summary.columns, data.summary.rows.map((r) => [r[0], ...r.slice(1).map(figure)]), 'numbers'));
  }

  // --- Traffic and the silos ----------------------------------------------------------------
  if (metrics.length) {
    const s = section('Traffic', 'traffic');
    const perRound = [];
    metrics.forEach((m, i) => {
      const before = i > 0 ? metrics[i - 1] : {bytes_sent: 0, bytes_received: 0};
      perRound.push({round: m.round, direction: 'server → silos', bytes: m.bytes_sent - before.bytes_sent});
      perRound.push({round: m.round, direction: 'silos → server', bytes: m.bytes_received - before.bytes_received});
    });
    chart(s, 'bytes-per-round', 'Bytes on the wire between reports (all silos)', {
      width: 560, height: 180, data: {values: perRound}, mark: {type: 'line', point: metrics.length < 60},
      encoding: {x: {field: 'round', type: 'quantitative', title: 'report'},
                 y: {field: 'bytes', type: 'quantitative', title: 'bytes'},
                 color: {field: 'direction', type: 'nominal', title: null}}});
    const silos = records(data.silos);
    if (silos.length) {
      const last = Math.max(...silos.map((r) => r.round));
      const totals = [];
      for (const r of silos.filter((r) => r.round === last)) {
        totals.push({silo: 'silo ' + r.silo, direction: 'server → silo', bytes: r.bytes_sent});
        totals.push({silo: 'silo ' + r.silo, direction: 'silo → server', bytes: r.bytes_received});
      }
      chart(s, 'bytes-per-silo', 'Bytes per silo over the run (before the closing exchange)', {
        width: 560, height: 40 + 28 * totals.length / 2, data: {values: totals}, mark: 'bar',
        encoding: {y: {field: 'silo', type: 'nominal', title: null}, yOffset: {field: 'direction'},
                   x: {field: 'bytes', type: 'quantitative', title: 'bytes'},
                   color: {field: 'direction', type: 'nominal', title: null}}});
      const missing = [];
      const previous = {};
      for (const r of silos) {
        missing.push({round: r.round, silo: 'silo ' + r.silo, missing: r.missing_replies - (previous[r.silo] || 0)});
        previous[r.silo] = r.missing_replies;
      }
      const refused = [];
      const refusedBefore = {};
      for (const r of silos) {
        if (r.refused_replies === null || r.refused_replies === undefined) continue;  // an older silos.csv
        refused.push({round: r.round, silo: 'silo ' + r.silo, refused: r.refused_replies - (refusedBefore[r.silo] || 0)});
        refusedBefore[r.silo] = r.refused_replies;
      }
      if (refused.some((m) => m.refused > 0)) {
        s.append(element('p', {class: 'warning'}, 'The server refused some silos\' replies (malformed, stale, ' +
          'too large, not finite); the server\'s log names each with its reason. Per silo and report:'));
        chart(s, 'refused', 'Replies the server refused, per silo and report', {
          width: 560, height: 40 + 22 * Object.keys(refusedBefore).length, data: {values: refused}, mark: 'rect',
          encoding: {x: {field: 'round', type: 'ordinal', title: 'report'}, y: {field: 'silo', type: 'nominal', title: null},
                     color: {field: 'refused', type: 'quantitative', title: 'refused', scale: {scheme: 'oranges'}}}});
      }
      const any = missing.some((m) => m.missing > 0);
      s.append(element('p', {class: any ? 'warning' : ''}, any
        ? 'Some rounds went on without some silos\' replies (a dropout, a deadline missed, a refused message): the chart below shows which.'
        : 'Every silo answered every exchange that counted.'));
      if (any)
        chart(s, 'missing', 'Replies the server went on without, per silo and report', {
          width: 560, height: 40 + 22 * Object.keys(previous).length, data: {values: missing}, mark: 'rect',
          encoding: {x: {field: 'round', type: 'ordinal', title: 'report'}, y: {field: 'silo', type: 'nominal', title: null},
                     color: {field: 'missing', type: 'quantitative', title: 'missing', scale: {scheme: 'reds'}}}});
    }
    if (data.silo_directories && data.silo_directories.length)
      s.append(element('p', {}, 'Each silo\'s own outputs stay with it: ' + data.silo_directories.join(', ') +
        ' (fvic report OUT/silo-K makes a silo\'s page, to be kept on the silo).'));
  }

  // --- Settings and the model ---------------------------------------------------------------
  if (data.settings && data.settings.length) {
    const s = section('Settings', 'settings');
    s.append(table(['key', 'value'], data.settings));
  }
  if (data.model_source) {
    const s = section('The model', 'model');
    s.append(element('pre', {class: 'source'}, data.model_source));
  }

  window.fvicPage.settle(pending);
})();
