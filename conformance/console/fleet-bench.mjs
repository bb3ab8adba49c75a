// The fleet page in headless Chromium at a large fleet, for conformance/src/bin/console-bench.rs:
// signs in with TOKEN, times the page until all CLUSTERS tiles are drawn, reads the page's
// weight as the browser counts it (transferSize of the page and every finished request), then
// for each rate of RATES changes the availability of that many clusters per second for
// SECONDS seconds (PATCHes of their status as TOKEN) and times how long each change takes to
// show in the open page's tile. Clusters are named PREFIX + five digits, all Available at start.
import {chromium} from 'playwright-core';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (run by console-bench)`);
  return v;
};
const HUB = env('HUB');
const TOKEN = env('TOKEN');
const N = Number(env('CLUSTERS'));
const PREFIX = env('PREFIX');
const RATES = env('RATES').split(',').map(Number);
const SECONDS = Number(env('SECONDS'));
const MC = '/apis/cluster.open-cluster-management.io/v1/managedclusters';

const name = (i) => `${PREFIX}${String(i).padStart(5, '0')}`;
const q = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];

async function setAvailable(cluster, status) {
  const resp = await fetch(`${HUB}${MC}/${cluster}/status`, {
    method: 'PATCH',
    headers: {Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/merge-patch+json'},
    body: JSON.stringify({status: {conditions: [{type: 'ManagedClusterConditionAvailable', status,
      reason: 'Bench', message: 'set by fleet-bench', lastTransitionTime: new Date().toISOString()}]}}),
  });
  if (!resp.ok) throw new Error(`PATCH ${cluster}: ${resp.status} ${await resp.text()}`);
}

const browser = await chromium.launch({executablePath: env('CHROMIUM'), args: ['--no-sandbox']});
try {
  const context = await browser.newContext({ignoreHTTPSErrors: true, viewport: {width: 1400, height: 1000}});
  const page = await context.newPage();
  await page.goto(`${HUB}/ui/login`);
  await page.fill('#token', TOKEN);
  await Promise.all([page.waitForURL(/\/ui\/$/), page.click('#signin')]);
  const started = Date.now();
  await page.goto(`${HUB}/ui/`);
  await page.waitForFunction((n) => document.querySelectorAll('.tile').length === n, N, {timeout: 300_000, polling: 50});
  console.log(`browser: ${N} tiles drawn ${Date.now() - started} ms after the page was asked for`);
  const weight = await page.evaluate(() => {
    const nav = performance.getEntriesByType('navigation')[0];
    const done = performance.getEntriesByType('resource');
    return {page: nav.transferSize, rest: done.map((r) => [r.name.replace(location.origin, ''), r.transferSize, r.decodedBodySize])};
  });
  let total = weight.page;
  for (const [, transfer] of weight.rest) total += transfer;
  console.log(`browser: page weight ${(total / 1048576).toFixed(2)} MiB transferred (page ${weight.page} B; ${weight.rest.map(([n, t, d]) => `${n.split('?')[0]} ${t} B of ${d}`).join('; ')})`);

  await page.evaluate(() => {
    window.seen = new Map();
    new MutationObserver((changes) => {
      const at = performance.timeOrigin + performance.now();
      for (const c of changes) window.seen.set(`${c.target.dataset.cluster}=${c.target.dataset.available}`, at);
    }).observe(document.getElementById('tiles'), {attributes: true, subtree: true, attributeFilter: ['data-available']});
  });
  let next = 0;
  for (const rate of RATES) {
    const count = rate * SECONDS;
    const sent = new Map();
    const pending = [];
    const t0 = Date.now();
    for (let k = 0; k < count; k++) {
      const due = t0 + (k * 1000) / rate;
      const wait = due - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const cluster = name(next++ % N);
      sent.set(`${cluster}=False`, Date.now());
      pending.push(setAvailable(cluster, 'False'));
      if (pending.length >= 256) await Promise.all(pending.splice(0));
    }
    await Promise.all(pending);
    const offered = count / ((Date.now() - t0) / 1000);
    await new Promise((r) => setTimeout(r, 5000));
    const seen = new Map(await page.evaluate(() => [...window.seen]));
    const latencies = [];
    let missing = 0;
    for (const [key, at] of sent) {
      if (seen.has(key)) latencies.push(seen.get(key) - at);
      else missing++;
    }
    latencies.sort((a, b) => a - b);
    console.log(`browser: ${rate}/s for ${SECONDS} s (${offered.toFixed(0)}/s made): ${latencies.length} changes shown, ${missing} not within 5 s; ` +
      `p50 ${q(latencies, 0.5)?.toFixed(0)} ms, p99 ${q(latencies, 0.99)?.toFixed(0)} ms, max ${latencies.at(-1)?.toFixed(0)} ms`);
    // Back to Available for the next rate.
    const restore = [...sent.keys()].map((k) => k.split('=')[0]);
    for (let i = 0; i < restore.length; i += 64) await Promise.all(restore.slice(i, i + 64).map((c) => setAvailable(c, 'True')));
    await page.evaluate(() => window.seen.clear());
  }
} finally {
  await browser.close();
}
