// Headless check of the dashboard page (run by run.sh against make serve):
// the page loads, every chart holds data points from the live engine and keeps
// updating, the page logs no console errors; writes a screenshot.
//   node check.mjs URL SCREENSHOT_PATH
import { chromium } from 'playwright-core';

const [url, shot] = process.argv.slice(2);
if (!url || !shot) {
  console.error('usage: node check.mjs URL SCREENSHOT_PATH');
  process.exit(2);
}
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
let passed = 0, failed = 0, n = 0;
const ok = (cond, name, diag) => {
  n++;
  if (cond) { passed++; console.log(`ok ${n} - ${name}`); }
  else { failed++; console.log(`not ok ${n} - ${name}`); if (diag) console.log(`# ${diag}`); }
};

const errors = [];
let browser;
try {
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-background-networking',
           '--disable-extensions', '--disable-sync', '--no-first-run', '--disable-component-update'],
  });
  const page = await browser.newPage({ viewport: { width: 1280, height: 1100 } });
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
  page.on('requestfailed', (r) => errors.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));

  const resp = await page.goto(url, { waitUntil: 'load', timeout: 15000 });
  ok(resp && resp.status() === 200, 'the page loads with 200', `status ${resp && resp.status()}`);
  if (!resp || resp.status() !== 200)
    throw new Error(`GET ${url} answered ${resp && resp.status()}: does the /dashboard/ alias point at BUILD/dashboard/?`);
  ok(await page.evaluate(() => typeof window.uPlot === 'function'), 'the charting library (uPlot) is loaded');
  const bg = await page.evaluate(() => getComputedStyle(document.querySelector('header')).backgroundColor);
  ok(bg === 'rgb(29, 35, 48)', 'the stylesheets apply (served as text/css)', `header background ${bg}`);

  let ready = true;
  try {
    await page.waitForFunction(() => window.__dashboardReady === true, null, { timeout: 30000, polling: 250 });
  } catch {
    ready = false;
  }
  const first = await page.evaluate(() => JSON.parse(JSON.stringify(window.__dashboard || {})));
  ok(ready, 'every chart holds data points and the engine generated tokens', JSON.stringify(first));

  const charts = await page.evaluate(() => [...document.querySelectorAll('.chart')].map((c) => ({
    id: c.id, canvas: !!c.querySelector('canvas'), legend: c.querySelectorAll('.u-legend .u-series').length })));
  const want = ['chart-throughput', 'chart-ttft', 'chart-tpot', 'chart-batch', 'chart-kv'];
  ok(want.every((id) => charts.some((c) => c.id === id && c.canvas)),
     'throughput, TTFT, TPOT, batch/queue and KV charts are drawn', JSON.stringify(charts));
  const knobs = charts.some((c) => c.id === 'chart-knobs');
  console.log(`# tuning knobs chart: ${knobs ? 'drawn' : 'absent (the status JSON has no knob history)'}`);

  // Live: the page keeps polling and the sample count grows.
  await page.waitForTimeout(3500);
  const later = await page.evaluate(() => JSON.parse(JSON.stringify(window.__dashboard || {})));
  ok(later.polls > first.polls && later.points.throughput > first.points.throughput,
     'the charts keep updating from the live engine',
     `polls ${first.polls} -> ${later.polls}, throughput points ${first.points?.throughput} -> ${later.points?.throughput}`);
  console.log(`# points per chart: ${JSON.stringify(later.points)}`);
  const state = await page.textContent('#engine-state');
  ok(state === 'ready', 'the header shows the engine ready', `badge: ${state}`);

  await page.screenshot({ path: shot, fullPage: true });
  console.log(`# screenshot: ${shot}`);
  ok(errors.length === 0, 'no console errors, page errors or failed requests', errors.join(' | '));
} catch (e) {
  ok(false, 'the browser check ran to the end', String(e && e.stack || e));
} finally {
  if (browser) await browser.close();
}
console.log(`1..${n}`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
