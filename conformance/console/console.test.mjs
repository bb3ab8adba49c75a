// The fleet console in a real browser: headless Chromium (Debian's) driven by playwright-core.
// Run by conformance/tests/console.rs, which starts a hub with real klusterlets and passes:
//   HUB            https://127.0.0.1:PORT (the console is HUB/ui/)
//   ADMIN_TOKEN    a service account token bound to cluster-admin
//   NOBODY_TOKEN   a service account token bound to nothing
//   BOOTSTRAP_TOKEN a bootstrap token (refused at sign-in)
//   CLUSTERS       the real fleet's clusters, comma-separated, all Available
//   NAMESPACE      where the Placement `all`, the ManifestWorkReplicaSet `web` (rolled out to
//                  it) and the policy `settings` (inform, bound to it) live
//   KUBECONFIG     the hub's admin kubeconfig (kubectl applies works with it)
//   CHROMIUM       the browser; ARTIFACTS where screenshots go
//   SIMULATED      how many simulated clusters to add for the screenshot (1000)
// NODE_EXTRA_CA_CERTS names the hub's CA, so this script's own API calls trust the hub.
// Prints one line per check; any failure exits 1 naming what was expected.
import assert from 'node:assert/strict';
import {execFileSync} from 'node:child_process';
import {mkdirSync} from 'node:fs';
import {join} from 'node:path';
import {chromium} from 'playwright-core';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (run by conformance/tests/console.rs)`);
  return v;
};
const HUB = env('HUB');
const ADMIN = env('ADMIN_TOKEN');
const NOBODY = env('NOBODY_TOKEN');
const BOOTSTRAP = env('BOOTSTRAP_TOKEN');
const CLUSTERS = env('CLUSTERS').split(',');
const ARTIFACTS = env('ARTIFACTS');
const NS = env('NAMESPACE');
const SIMULATED = Number(process.env.SIMULATED ?? '1000');
const MC = '/apis/cluster.open-cluster-management.io/v1/managedclusters';
const WAIT = 60_000;

const ok = (what) => console.log(`ok - ${what}`);

/** An API call as the admin token, from this script (not the browser). */
async function admin(method, path, body, contentType = 'application/json') {
  const resp = await fetch(HUB + path, {
    method,
    headers: {Authorization: `Bearer ${ADMIN}`, 'Content-Type': contentType, Accept: 'application/json'},
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await resp.text();
  if (!resp.ok) throw new Error(`${method} ${path}: ${resp.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

/** `kubectl apply -f -` of `object`, with the admin kubeconfig (KUBECONFIG). */
function kubectlApply(object) {
  return execFileSync('kubectl', ['apply', '-f', '-'], {encoding: 'utf8', input: JSON.stringify(object)});
}

/** Signs in on a fresh page of `context` with `token`; returns the page. */
async function signIn(context, token) {
  const page = await context.newPage();
  await page.goto(`${HUB}/ui/`);
  assert.match(page.url(), /\/ui\/login$/, 'an unsigned visitor is sent to the sign-in page');
  await page.fill('#token', token);
  await Promise.all([page.waitForURL(/\/ui\/$|\/ui\/login$/), page.click('#signin')]);
  return page;
}

async function fleetTotal(page) {
  const summary = page.locator('#summary[data-total]');
  await summary.waitFor({timeout: WAIT});
  return Number(await summary.getAttribute('data-total'));
}

const browser = await chromium.launch({executablePath: env('CHROMIUM'), args: ['--no-sandbox']});
try {
  const options = {ignoreHTTPSErrors: true, viewport: {width: 1400, height: 1000}};

  // Without a session nothing is served: pages send the visitor to sign in, data is 401.
  {
    const context = await browser.newContext(options);
    const page = await context.newPage();
    const resp = await page.goto(`${HUB}/ui/clusters/${CLUSTERS[0]}`);
    assert.match(page.url(), /\/ui\/login$/);
    assert.equal(resp.status(), 200);
    const csp = resp.headers()['content-security-policy'] ?? '';
    assert.match(csp, /script-src 'self'/, 'a content security policy');
    assert.doesNotMatch(csp, /unsafe-inline/);
    const data = await page.evaluate(async (mc) => (await fetch(`/ui/api${mc}`)).status, MC);
    assert.equal(data, 401, 'data without a session');
    const action = await page.evaluate(async (c) => (await fetch(`/ui/actions/clusters/${c}/accept`, {method: 'POST'})).status, CLUSTERS[0]);
    assert.ok(action === 401 || action === 403, `an action without a session: ${action}`);
    ok('no page or data without a session; a content security policy without inline scripts');

    // A bootstrap token joins clusters; it never signs in.
    await page.fill('#token', BOOTSTRAP);
    const [refused] = await Promise.all([page.waitForNavigation(), page.click('#signin')]);
    assert.equal(refused.status(), 401, `a bootstrap token's sign-in: ${await refused.text()}`);
    assert.match(await page.locator('#error').textContent(), /bootstrap token/);
    assert.match(page.url(), /\/ui\/login$/);
    await page.fill('#token', 'not-a-token');
    await Promise.all([page.waitForNavigation(), page.click('#signin')]);
    assert.match(await page.locator('#error').textContent(), /does not accept/);
    ok('a bootstrap token and a bad token are refused');
    await context.close();
  }

  // The admin signs in and sees the real fleet, each cluster with its availability.
  const context = await browser.newContext(options);
  const page = await signIn(context, ADMIN);
  assert.match(page.url(), /\/ui\/$/, 'signed in, on the fleet page');
  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name === 'ocm-console');
  assert.ok(session, 'a session cookie');
  assert.equal(session.httpOnly, true);
  assert.equal(session.secure, true);
  assert.equal(session.sameSite, 'Strict');
  assert.ok(!page.url().includes(ADMIN), 'the token is in no URL');
  assert.equal(await page.evaluate(() => document.cookie), '', 'scripts cannot read the session');
  for (const c of CLUSTERS) {
    const tile = page.locator(`.tile[data-cluster="${c}"]`);
    await tile.waitFor({timeout: WAIT});
    await page.waitForFunction((c) => document.querySelector(`.tile[data-cluster="${c}"]`)?.dataset.available === 'True', c, {timeout: WAIT});
    assert.match(await tile.getAttribute('class'), /\bok\b/);
    await page.locator(`#clusters tr[data-cluster="${c}"]`).waitFor();
  }
  assert.equal(await fleetTotal(page), CLUSTERS.length);
  const headers = await page.locator('#clusters th').allTextContents();
  for (const h of ['Name', 'Hub Accepted', 'Joined', 'Available', 'Age']) {
    assert.ok(headers.some((x) => x.startsWith(h)), `the ${h} column: ${headers}`);
  }
  ok(`the fleet of ${CLUSTERS.length} with the kubectl columns, every cluster Available`);

  // A cluster's page: its conditions, and a work applied with kubectl showing up live.
  const cluster = CLUSTERS[0];
  await page.click(`#clusters a[href="/ui/clusters/${cluster}"]`);
  await page.waitForURL(`**/ui/clusters/${cluster}`);
  await page.locator('#cluster .badges [data-condition="ManagedClusterConditionAvailable"][data-status="True"]').waitFor({timeout: WAIT});
  await page.waitForFunction(() => !document.querySelector('#works').textContent.includes('Loading'), null, {timeout: WAIT});
  assert.equal(await page.locator('[data-work="console-demo"]').count(), 0);
  const work = {
    apiVersion: 'work.open-cluster-management.io/v1', kind: 'ManifestWork',
    metadata: {name: 'console-demo', namespace: cluster},
    spec: {workload: {manifests: [{apiVersion: 'v1', kind: 'ConfigMap',
      metadata: {name: 'console-demo', namespace: 'default'}, data: {hello: 'world'}}]}},
  };
  kubectlApply(work);
  await page.locator('[data-work="console-demo"]').waitFor({timeout: WAIT});
  await page.locator('[data-work="console-demo"] h3 [data-condition="Applied"][data-status="True"]').waitFor({timeout: WAIT});
  await page.locator('[data-work="console-demo"] tr[data-manifest="ConfigMap/default/console-demo"] [data-condition="Applied"][data-status="True"]').waitFor({timeout: WAIT});
  mkdirSync(ARTIFACTS, {recursive: true});
  await page.screenshot({path: join(ARTIFACTS, 'cluster.png'), fullPage: true});
  ok('a work applied with kubectl appears on the cluster page and turns Applied, live');

  // A script injected into the page cannot run inline (the content security policy).
  const inline = await page.evaluate(() => new Promise((resolve) => {
    window.inlineRan = false;
    const s = document.createElement('script');
    s.textContent = 'window.inlineRan = true;';
    document.body.append(s);
    setTimeout(() => resolve(window.inlineRan), 200);
  }));
  assert.equal(inline, false, 'an inline script ran');
  ok('inline scripts do not run');

  // Another origin (a page on another port of this host, which SameSite alone does not tell
  // apart, and another site) cannot read with the session or act with it.
  const pending = 'console-pending';
  await admin('POST', MC, {apiVersion: 'cluster.open-cluster-management.io/v1', kind: 'ManagedCluster',
    metadata: {name: pending}, spec: {hubAcceptsClient: false}});
  const port = Number(new URL(HUB).port);
  for (const origin of [`https://127.0.0.1:${port + 1}`, 'https://evil.example']) {
    const attacker = await context.newPage();
    await attacker.route(`${origin}/**`, (route) => route.fulfill({
      contentType: 'text/html',
      body: `<!doctype html><form id="f" method="post" action="${HUB}/ui/actions/clusters/${pending}/accept"></form>`,
    }));
    await attacker.goto(`${origin}/`);
    const read = await attacker.evaluate(async ([hub, mc]) => {
      try {
        const r = await fetch(`${hub}/ui/api${mc}`, {credentials: 'include'});
        return `read ${r.status}`;
      } catch (e) {
        return 'refused';
      }
    }, [HUB, MC]);
    assert.equal(read, 'refused', `${origin} read the API through the session`);
    await attacker.evaluate(async ([hub, p]) => {
      await fetch(`${hub}/ui/actions/clusters/${p}/accept`, {method: 'POST', mode: 'no-cors', credentials: 'include'}).catch(() => {});
    }, [HUB, pending]);
    const [answer] = await Promise.all([attacker.waitForNavigation(), attacker.evaluate(() => document.getElementById('f').submit())]);
    assert.ok([401, 403].includes(answer.status()), `${origin}'s form post answered ${answer.status()}`);
    const mc = await admin('GET', `${MC}/${pending}`);
    assert.equal(mc.spec.hubAcceptsClient, false, `${origin} accepted a cluster with the session`);
    await attacker.close();
  }
  ok('another origin can neither read nor act with the session');

  // The admin accepts the pending cluster from its page, as ocm-hub accept would.
  await page.goto(`${HUB}/ui/clusters/${pending}`);
  page.once('dialog', (d) => d.accept());
  await page.locator('#accept').click();
  await page.locator('#flash').waitFor({timeout: WAIT});
  assert.match(await page.locator('#flash').textContent(), /hubAcceptsClient=true/);
  assert.equal((await admin('GET', `${MC}/${pending}`)).spec.hubAcceptsClient, true);
  ok('an admin accepts a cluster from its page');

  // A rollout: per-cluster progress, paused and resumed, a new revision undone.
  const SETS = `/apis/work.open-cluster-management.io/v1alpha1/namespaces/${NS}/manifestworkreplicasets`;
  await page.goto(`${HUB}/ui/rollouts`);
  await page.locator(`#rollouts tr[data-key="${NS}/web"] a`).click();
  await page.waitForURL(`**/ui/rollouts/${NS}/web`);
  for (const c of CLUSTERS) {
    await page.locator(`#progress tr[data-cluster="${c}"]`).waitFor({timeout: WAIT});
  }
  await page.locator('#pause').click();
  await page.locator('[data-paused="true"]').waitFor({timeout: WAIT});
  assert.equal((await admin('GET', `${SETS}/web`)).spec.paused, true);
  await page.locator('#resume').click();
  await page.locator('[data-paused="false"]').waitFor({timeout: WAIT});
  assert.ok(!(await admin('GET', `${SETS}/web`)).spec.paused, 'resumed');
  await admin('PATCH', `${SETS}/web`, {spec: {manifestWorkTemplate: {workload: {manifests: [{apiVersion: 'v1', kind: 'ConfigMap',
    metadata: {name: 'web', namespace: 'default'}, data: {version: '2'}}]}}}}, 'application/merge-patch+json');
  await page.waitForFunction(() => document.querySelectorAll('#revisions tbody tr').length === 2, null, {timeout: WAIT});
  page.once('dialog', (d) => d.accept());
  await page.locator('#undo').click();
  await page.locator('#flash').getByText('rolled back to revision 1').waitFor({timeout: WAIT});
  const undone = await admin('GET', `${SETS}/web`);
  assert.equal(undone.spec.manifestWorkTemplate.workload.manifests[0].data.version, '1', 'undo restored revision 1');
  await page.screenshot({path: join(ARTIFACTS, 'rollout.png'), fullPage: true});
  ok('a rollout\'s clusters shown; paused, resumed and a new revision undone from its page');

  // A placement's decisions and the scheduler's explanation.
  await page.goto(`${HUB}/ui/placements/${NS}/all`);
  for (const c of CLUSTERS) {
    await page.locator(`#decisions tr[data-cluster="${c}"]`).waitFor({timeout: WAIT});
  }
  await page.locator('#explain tbody tr').first().waitFor({timeout: WAIT});
  ok('a placement\'s decisions and its explain table');

  // Compliance per cluster (the policy reports NonCompliant: the ConfigMap is missing), then
  // the policy disabled from the page.
  await page.goto(`${HUB}/ui/policies`);
  for (const c of CLUSTERS) {
    await page.locator(`#compliance tr[data-cluster="${c}"] td[data-policy="${NS}/settings"]`).getByText('NonCompliant').waitFor({timeout: WAIT});
  }
  await page.screenshot({path: join(ARTIFACTS, 'policies.png'), fullPage: true});
  await page.locator(`#policy-list tr[data-policy="${NS}/settings"] button`).click();
  await page.locator('#flash').getByText('disabled').waitFor({timeout: WAIT});
  const disabled = await admin('GET', `/apis/policy.open-cluster-management.io/v1/namespaces/${NS}/policies/settings`);
  assert.equal(disabled.spec.disabled, true);
  ok('policy compliance per cluster; a policy disabled from the page');

  // The add-ons page loads (the fleet runs none).
  await page.goto(`${HUB}/ui/addons`);
  await page.locator('#clustermanagementaddons').getByText('None.').waitFor({timeout: WAIT});
  assert.equal(await page.locator('.flash.bad').count(), 0);
  ok('the add-ons page');

  // A token without rights sees an empty fleet, not an error, and cannot act.
  {
    const other = await browser.newContext(options);
    const p = await signIn(other, NOBODY);
    assert.match(p.url(), /\/ui\/$/);
    assert.equal(await fleetTotal(p), 0, 'a user without rights sees no clusters');
    assert.equal(await p.locator('.tile').count(), 0);
    assert.equal(await p.locator('.flash.bad').count(), 0, 'no error shown');
    await p.goto(`${HUB}/ui/clusters/${cluster}`);
    await p.locator('#cluster').getByText(`No cluster ${cluster}`).waitFor({timeout: WAIT});
    const csrf = await p.locator('meta[name="csrf-token"]').getAttribute('content');
    const status = await p.evaluate(async ([c, t]) => (await fetch(`/ui/actions/clusters/${c}/accept`, {method: 'POST', headers: {'X-CSRF-Token': t}})).status, [pending, csrf]);
    assert.equal(status, 403, 'RBAC refuses the action');
    await other.close();
  }
  ok('a token without rights sees an empty fleet and is refused actions');

  // 1,000 simulated clusters: the page shows them all, a change of one arrives live, and a
  // screenshot is kept.
  const names = Array.from({length: SIMULATED}, (_, i) => `sim-${String(i).padStart(4, '0')}`);
  const tones = (i) => (i % 10 === 3 ? 'False' : i % 10 === 7 ? 'Unknown' : 'True');
  const pool = async (items, n, fn) => {
    const queue = [...items.entries()];
    await Promise.all(Array.from({length: n}, async () => {
      for (let next = queue.shift(); next; next = queue.shift()) await fn(next[1], next[0]);
    }));
  };
  await pool(names, 16, async (name, i) => {
    await admin('POST', MC, {apiVersion: 'cluster.open-cluster-management.io/v1', kind: 'ManagedCluster',
      metadata: {name, labels: {simulated: 'true'}}, spec: {hubAcceptsClient: i % 50 !== 0}});
    await admin('PATCH', `${MC}/${name}/status`, {status: {conditions: [{
      type: 'ManagedClusterConditionAvailable', status: tones(i), reason: 'Simulated', message: 'simulated',
      lastTransitionTime: new Date().toISOString()}]}}, 'application/merge-patch+json');
  });
  await page.goto(`${HUB}/ui/`);
  const total = CLUSTERS.length + 1 + SIMULATED;
  await page.waitForFunction((n) => Number(document.querySelector('#summary')?.dataset.total) === n, total, {timeout: WAIT});
  assert.equal(await page.locator('.tile').count(), total);
  const shot = join(ARTIFACTS, `fleet-${SIMULATED}.png`);
  await page.screenshot({path: shot});
  ok(`the fleet page at ${total} clusters; screenshot ${shot}`);
  const flipped = names[1];
  const started = Date.now();
  await admin('PATCH', `${MC}/${flipped}/status`, {status: {conditions: [{
    type: 'ManagedClusterConditionAvailable', status: 'False', reason: 'Simulated', message: 'gone',
    lastTransitionTime: new Date().toISOString()}]}}, 'application/merge-patch+json');
  await page.waitForFunction((c) => document.querySelector(`.tile[data-cluster="${c}"]`)?.dataset.available === 'False', flipped, {timeout: WAIT});
  ok(`an availability change reached the open page in ${Date.now() - started} ms`);
  await page.fill('#selector', 'simulated=true');
  await page.locator('#selector').dispatchEvent('change');
  await page.waitForFunction((n) => Number(document.querySelector('#summary')?.dataset.total) === n, SIMULATED, {timeout: WAIT});
  ok('a label selector narrows the fleet on the hub');

  // Signing out ends the session: the old cookie no longer opens anything.
  await page.goto(`${HUB}/ui/`);
  await Promise.all([page.waitForURL(/\/ui\/login$/), page.click('header form button')]);
  const replay = await browser.newContext(options);
  await replay.addCookies([{...session}]);
  const p = await replay.newPage();
  await p.goto(`${HUB}/ui/`);
  assert.match(p.url(), /\/ui\/login$/, 'the signed-out cookie still opened a page');
  assert.equal(await p.evaluate(async (mc) => (await fetch(`/ui/api${mc}`)).status, MC), 401);
  await replay.close();
  ok('sign-out ends the session');
} finally {
  await browser.close();
}
