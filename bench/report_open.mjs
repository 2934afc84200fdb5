// How long a run's report takes to open in Debian's headless Chromium: from navigation to every
// chart drawn (report/common.js sets window.fvicRenderedAt when the last chart has rendered),
// median and worst of RUNS loads, each in a fresh page. The floor, measured in the same run, is
// the same library drawing one chart: the report of a run directory that holds two rows of
// metrics.csv and nothing else (made here with `fvic report`). Target (issue 31): the
// FashionMNIST network's report (159k parameters) open in under 2 s.
//
// Usage: node bench/report_open.mjs FVIC PAGE.html... [--runs N]   (bench/README.md)
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { chromium } = require('./report_open/node_modules/playwright-core');

const args = process.argv.slice(2);
let runs = 7;
const at = args.indexOf('--runs');
if (at >= 0) runs = Number(args.splice(at, 2)[1]);
const [fvic, ...pages] = args;
if (!fvic || pages.length === 0 || !(runs >= 1)) {
  console.error('usage: node bench/report_open.mjs FVIC PAGE.html... [--runs N]');
  process.exit(2);
}

// The floor's page: one chart, the same inlined library.
const floorDir = mkdtempSync(join(tmpdir(), 'fvic-report-floor-'));
writeFileSync(join(floorDir, 'metrics.csv'), 'round,elbo,seconds,bytes_sent,bytes_received\n1,-2,0.1,0,0\n2,-1,0.2,0,0\n');
execFileSync(fvic, ['report', floorDir], { stdio: 'ignore' });

const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync'],
});

async function measure(file) {
  const times = [];
  for (let i = 0; i < runs; ++i) {
    const page = await browser.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto('file://' + resolve(file));
    await page.waitForFunction(() => document.body.dataset.rendered !== undefined, null, { timeout: 60000 });
    const [rendered, charts, at] = await page.evaluate(() =>
      [document.body.dataset.rendered, document.body.dataset.charts, window.fvicRenderedAt]);
    if (errors.length || rendered !== charts) throw new Error(`${file}: ${rendered}/${charts} charts, ${errors}`);
    times.push(at);
    await page.close();
  }
  times.sort((a, b) => a - b);
  return { median: times[Math.floor(times.length / 2)], worst: times[times.length - 1] };
}

const floor = await measure(join(floorDir, 'report.html'));
console.log(`floor (the library drawing one chart): median ${floor.median.toFixed(0)} ms, worst ${floor.worst.toFixed(0)} ms`);
for (const page of pages) {
  const m = await measure(page);
  const mb = statSync(page).size / 1e6;
  console.log(`${page}: ${mb.toFixed(2)} MB; to every chart drawn: median ${m.median.toFixed(0)} ms, worst ` +
              `${m.worst.toFixed(0)} ms (${(m.median / floor.median).toFixed(1)}x the floor); target 2000 ms: ` +
              (m.worst < 2000 ? 'met' : 'MISSED'));
}
await browser.close();
