// What report/page.js (fvic report) and report/status.js (NAME-server's status page) share,
// inlined before either (fvi/report/html_page.h): building elements, drawing one Vega-Lite chart
// in its own container, and the page's record of failures (<body data-errors>, #report-errors).
window.fvicPage = (function () {
  'use strict';
  let errors = 0;

  function element(tag, attributes, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attributes || {})) e.setAttribute(k, v);
    for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return e;
  }
  function fail(what, error) {
    errors += 1;
    document.body.dataset.errors = String(errors);
    const text = what + ': ' + (error && error.message ? error.message : String(error));
    console.error(text);
    let list = document.getElementById('report-errors');
    if (!list) {
      list = element('ul', {id: 'report-errors', class: 'errors'});
      document.body.prepend(list);
    }
    list.append(element('li', {}, text));
  }
  window.addEventListener('error', (e) => fail('script error', e.error || e.message));
  function bytes(b) {
    if (b === null || b === undefined) return 'NA';
    if (b < 1024) return b + ' B';
    if (b < 1024 * 1024) return (b / 1024).toFixed(1) + ' KiB';
    return (b / 1024 / 1024).toFixed(1) + ' MiB';
  }
  // One chart in its own container under `parent`, captioned; the promise resolves to 1 once it
  // has rendered, 0 (and a recorded failure) if it could not.
  function chart(parent, id, title, spec) {
    const box = element('div', {class: 'chart', id: 'chart-' + id});
    parent.append(element('figure', {}, box, element('figcaption', {}, title)));
    spec.$schema = 'https://vega.github.io/schema/vega-lite/v6.json';
    spec.config = Object.assign({view: {stroke: null}, axis: {labelFontSize: 11, titleFontSize: 11}}, spec.config);
    return vegaEmbed(box, spec, {renderer: 'svg', actions: false, mode: 'vega-lite'})
      .then(() => { box.dataset.rendered = '1'; return 1; })
      .catch((e) => { fail('chart ' + id, e); return 0; });
  }
  // Marks <body> once every chart of a drawing has settled: data-charts asked, data-rendered drawn.
  function settle(pending) {
    document.body.dataset.charts = String(pending.length);
    delete document.body.dataset.rendered;
    return Promise.all(pending).then((done) => {
      window.fvicRenderedAt = performance.now();  // ms since navigation began (bench/report_open.mjs)
      document.body.dataset.rendered = String(done.reduce((a, b) => a + b, 0));
    });
  }
  return {element, fail, bytes, chart, settle};
})();
