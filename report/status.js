// NAME-server's status page (runtime/net/src/status_page.cpp serves it; fvi/report/html_page.h
// inlines this file, the style and the charting library). It draws the data in #fvic-data, then
// fetches status.json every two seconds and draws it again: the step, the silos (joined, missing
// the last exchange, replies missed so far), refusals, the objective so far, the time left at
// most, and the server's log. As report/page.js does, <body> gets data-charts and data-rendered
// after each drawing and data-errors on a failure (report/common.js); data-updates counts them.
(function () {
  'use strict';
  const root = document.getElementById('report');
  const {element, bytes, chart} = window.fvicPage;
  let updates = 0;

  function duration(s) {
    if (s === null || s === undefined) return '—';
    if (s < 90) return Math.round(s) + ' s';
    if (s < 5400) return Math.round(s / 60) + ' min';
    return (s / 3600).toFixed(1) + ' h';
  }
  function draw(s, connected) {
    const main = element('div', {});
    main.append(element('h1', {}, s.model + ' — ' + s.method + ' (live)'));
    const position = s.position ? s.position.trim() : 'not started';
    main.append(element('p', {class: 'where'}, connected ? 'updated every 2 s from this server'
      : 'not connected to the server: the run is over, or the server is not reachable; the last figures it gave'));
    const facts = [['state', s.state], ['position', position], ['time so far', duration(s.seconds)],
      ['time left at most', s.state === 'finished' ? '0' : duration(s.eta_seconds) +
        (s.eta_seconds !== null && s.eta_seconds !== undefined ? ' (the stopping rule may end the run sooner)' : '')],
      ['silos joined', s.silo_table.filter((r) => r.joined).length + ' of ' + s.silos],
      ['missing from the last exchange', s.silo_table.filter((r) => r.missed_last_report).map((r) => 'silo ' + r.silo).join(', ') || 'none'],
      ['messages refused', s.refused]];
    const t = element('table', {class: 'facts'});
    for (const [k, v] of facts) t.append(element('tr', {}, element('td', {}, k), element('td', {}, v)));
    main.append(t);
    for (const n of s.notes || [])
      main.append(element('p', {class: n.level === 'warning' ? 'warning' : ''}, (n.level === 'warning' ? 'warning: ' : '') + n.text));

    main.append(element('h2', {}, 'Silos'));
    const silos = element('table', {id: 'silos'});
    silos.append(element('tr', {}, ...['silo', 'status', 'replies missed', 'sent to it', 'received from it', 'what it holds']
      .map((h) => element('th', {}, h))));
    for (const r of s.silo_table) {
      const status = !r.joined ? 'not joined' : r.missed_last_report ? 'missing' : 'answering';
      silos.append(element('tr', {class: status === 'answering' ? '' : 'warning', 'data-silo': r.silo, 'data-status': status},
        element('td', {}, r.silo), element('td', {}, status), element('td', {}, r.missing_replies),
        element('td', {}, bytes(r.bytes_sent)), element('td', {}, bytes(r.bytes_received)),
        element('td', {}, r.description || '')));
    }
    main.append(silos);

    const pending = [];
    if (s.reports.length) {
      main.append(element('h2', {}, 'Progress'));
      pending.push(chart(main, 'objective', 'The objective at each report', {
        width: 560, height: 200, data: {values: s.reports.filter((r) => r.objective !== null)},
        mark: {type: 'line', point: s.reports.length < 60},
        encoding: {x: {field: 'step', type: 'quantitative', title: s.unit || 'step'},
                   y: {field: 'objective', type: 'quantitative', title: 'objective', scale: {zero: false}}}}));
      pending.push(chart(main, 'missing', 'Replies missed so far, per silo', {
        width: 560, height: 30 + 22 * s.silo_table.length, data: {values: s.silo_table.map((r) => ({silo: 'silo ' + r.silo, missed: r.missing_replies}))},
        mark: 'bar', encoding: {y: {field: 'silo', type: 'nominal', title: null},
                                x: {field: 'missed', type: 'quantitative', title: 'replies missed', axis: {tickMinStep: 1}}}}));
    }
    main.append(element('h2', {}, 'The server\'s log'));
    const log = element('pre', {class: 'source', id: 'events'});
    log.textContent = (s.events || []).map((e) => duration(e.seconds).padStart(7) + '  ' + e.text).join('\n') || '(nothing yet)';
    main.append(log);

    root.replaceChildren(main);
    return window.fvicPage.settle(pending).then(() => {
      updates += 1;
      document.body.dataset.updates = String(updates);
      document.body.dataset.state = s.state;
    });
  }

  let last = JSON.parse(document.getElementById('fvic-data').textContent);
  function poll() {
    fetch('status.json', {cache: 'no-store'})
      .then((r) => r.json())
      .then((s) => { last = s; return draw(s, true); })
      .catch(() => draw(last, false))
      .finally(() => { if (last.state !== 'finished') setTimeout(poll, 2000); });
  }
  draw(last, true).then(() => setTimeout(poll, 2000));
})();
