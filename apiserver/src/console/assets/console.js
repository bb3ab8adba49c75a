// The fleet console's script. Each page's shell names the page (body data-page); this script
// fills it from the hub's API, read as the signed-in user through /ui/api/, and keeps it
// current from watches. Data only ever enters the page as text (textContent, attributes),
// never as HTML. Actions post to /ui/actions/ with the session's token.
'use strict';

const TABLE = 'application/json;as=Table;v=v1;g=meta.k8s.io, application/json';
const CLUSTERS = '/apis/cluster.open-cluster-management.io/v1/managedclusters';
const CLUSTER_V1B1 = '/apis/cluster.open-cluster-management.io/v1beta1';
const WORK_V1 = '/apis/work.open-cluster-management.io/v1';
const WORK_V1A1 = '/apis/work.open-cluster-management.io/v1alpha1';
const ADDON = '/apis/addon.open-cluster-management.io/v1alpha1';
const POLICY = '/apis/policy.open-cluster-management.io/v1';
const ROOT_POLICY_LABEL = 'policy.open-cluster-management.io/root-policy';
const SET_LABEL = 'work.open-cluster-management.io/manifestworkreplicaset';
const HASH_LABEL = 'work.open-cluster-management.io/controller-hash';
const SET_NAME_LABEL = 'work.open-cluster-management.io/manifestworkreplicaset-name';
const PLACEMENT_LABEL = 'cluster.open-cluster-management.io/placement';

const csrf = document.querySelector('meta[name="csrf-token"]')?.content ?? '';
const main = document.getElementById('main');

/** The API said the user may not do this. */
class Forbidden extends Error {}

// ---- DOM ------------------------------------------------------------------------------------

/** An element with attributes (`class`, `data-*`, `href`, ...) and children (text or nodes). */
function h(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'onclick') e.addEventListener('click', v);
    else if (k === 'oninput') e.addEventListener('input', v);
    else e.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

/** Replaces what `parent` holds with `children`. */
function fill(parent, ...children) {
  parent.replaceChildren(...children.flat(Infinity).filter((c) => c !== undefined && c !== null));
}

/** A section with a heading and a body element to fill. */
function section(title, id) {
  const content = h('div', {id, class: 'content'}, h('p', {class: 'muted'}, 'Loading…'));
  main.append(h('section', {}, h('h2', {}, title), content));
  return content;
}

/** Runs `fn` once before the next frame, however often it is asked in between. */
function batched(fn) {
  let queued = false;
  return () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => {
      queued = false;
      fn();
    });
  };
}

/** The status class of a condition status or compliance state. */
function tone(value) {
  switch (String(value)) {
    case 'True': case 'true': case 'Compliant': case 'Succeeded': return 'ok';
    case 'False': case 'false': case 'NonCompliant': case 'Failed': return 'bad';
    case 'Pending': return 'pending';
    default: return 'unknown';
  }
}

/** A condition's tone: `Degraded` and the like are good when False. */
function conditionTone(type, status) {
  const bad = type === 'Degraded' || type.endsWith('Pressure');
  return bad ? tone(status === 'True' ? 'False' : status === 'False' ? 'True' : status) : tone(status);
}

function badge(label, value, attrs, type) {
  return h('span', {class: `badge ${type ? conditionTone(type, value) : tone(value)}`, title: `${label}: ${value ?? 'unknown'}`, ...attrs},
    label);
}

/** A status line that says what happened (an action's answer, a failure). */
function say(text, bad) {
  let flash = document.getElementById('flash');
  if (!flash) {
    flash = h('p', {id: 'flash', role: 'status'});
    main.prepend(flash);
  }
  flash.className = bad ? 'flash bad' : 'flash';
  flash.textContent = text;
}

function live(on) {
  document.getElementById('live')?.classList.toggle('on', on);
}

// ---- the API --------------------------------------------------------------------------------

async function statusMessage(resp) {
  try {
    const s = await resp.json();
    return s.message || `${resp.status} ${resp.statusText}`;
  } catch {
    return `${resp.status} ${resp.statusText}`;
  }
}

function withQuery(path, query) {
  const q = Object.entries(query).filter(([, v]) => v !== undefined && v !== '')
    .map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join('&');
  if (!q) return path;
  return path + (path.includes('?') ? '&' : '?') + q;
}

/** Whether a form (signing out) is navigating away: its navigation is the one to finish. */
let leaving = false;
document.addEventListener('submit', () => { leaving = true; });

/** Goes to the sign-in page when the session has ended, unless a form is already leaving. */
function toLogin() {
  if (!leaving) location.assign('/ui/login');
}

/** GETs an API path as the user: JSON, or a Table when `table` names what rows carry. */
async function api(path, table) {
  const url = '/ui/api' + (table ? withQuery(path, {includeObject: table}) : path);
  const resp = await fetch(url, {headers: {Accept: table ? TABLE : 'application/json'}});
  if (resp.status === 401) {
    toLogin();
    throw new Error('signed out');
  }
  if (resp.status === 403) throw new Forbidden(await statusMessage(resp));
  if (resp.status === 404) return null;
  if (!resp.ok) throw new Error(await statusMessage(resp));
  return resp.json();
}

/** A list the user may not read is an empty one (what RBAC lets them see is nothing). */
async function listOrEmpty(path, table) {
  try {
    return (await api(path, table)) ?? {items: [], rows: [], metadata: {}};
  } catch (e) {
    if (!(e instanceof Forbidden)) throw e;
    return {items: [], rows: [], metadata: {}, forbidden: e.message};
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Follows `path` from resourceVersion `rv` (a list's), calling `onEvent(type, object)` for
 * each change. A watch that cannot resume (410 Gone) calls `relist()`, which lists again and
 * returns the new resourceVersion; a broken one resumes from the last version seen. It stops
 * once `current()` is false (the page asked for something else).
 */
async function follow(path, rv, table, onEvent, relist, current = () => true) {
  let delay = 500;
  while (current()) {
    try {
      const query = {watch: 1, allowWatchBookmarks: 'true', resourceVersion: rv};
      if (table) query.includeObject = table;
      const resp = await fetch('/ui/api' + withQuery(path, query),
        {headers: {Accept: table ? TABLE : 'application/json'}});
      if (resp.status === 401) return toLogin();
      if (resp.status === 403) return undefined;
      if (resp.status === 410) {
        rv = await relist();
        continue;
      }
      if (!resp.ok) throw new Error(await statusMessage(resp));
      live(true);
      delay = 500;
      const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      for (;;) {
        const {value, done} = await reader.read();
        if (done) break;
        buffer += value;
        let nl;
        while ((nl = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, nl);
          buffer = buffer.slice(nl + 1);
          if (!line.trim()) continue;
          const event = JSON.parse(line);
          if (event.type === 'ERROR') {
            if (event.object?.code === 410) rv = await relist();
            throw new Error(event.object?.message ?? 'watch failed');
          }
          rv = event.object?.metadata?.resourceVersion || rv;
          if (!current()) return reader.cancel();
          if (event.type !== 'BOOKMARK') onEvent(event.type, event.object);
        }
      }
    } catch (e) {
      if (e.message === 'signed out') return undefined;
    }
    if (!current()) return undefined;
    live(false);
    await sleep(delay);
    delay = Math.min(delay * 2, 10000);
  }
}

/** Posts an action; says its answer. */
async function act(path, confirmText) {
  if (confirmText && !window.confirm(confirmText)) return;
  const resp = await fetch('/ui/actions/' + path, {method: 'POST', headers: {'X-CSRF-Token': csrf}});
  if (resp.status === 401) return toLogin();
  const body = await resp.json().catch(() => ({}));
  say(body.message || `${resp.status} ${resp.statusText}`, !resp.ok);
  return undefined;
}

// ---- tables ---------------------------------------------------------------------------------

/** The row key of a Table row: namespace/name when rows carry metadata, else the name cell. */
function rowKey(row) {
  const m = row.object?.metadata;
  return m ? `${m.namespace ?? ''}/${m.name}` : String(row.cells[0]);
}

/**
 * A live Table of `path` (kubectl's columns) in `container`: listed, then followed. `link(row)`
 * names a page for a row; `allNamespaces` adds the Namespace column kubectl -A shows.
 */
async function liveTable(container, path, {link, allNamespaces, empty} = {}) {
  const include = allNamespaces ? 'Metadata' : 'None';
  const rows = new Map();
  let columns = [];
  let forbidden = '';
  const draw = batched(() => {
    if (forbidden || rows.size === 0) {
      fill(container, h('p', {class: 'muted'}, forbidden ? `Nothing to show: ${forbidden}` : (empty ?? 'None.')));
      return;
    }
    const head = [allNamespaces ? 'Namespace' : null, ...columns.map((c) => c.name)].filter((c) => c);
    const sorted = [...rows.values()].sort((a, b) => rowKey(a).localeCompare(rowKey(b)));
    const body = sorted.map((row) => {
      const cells = row.cells.map((c, i) => {
        const text = c === null || c === undefined ? '' : String(c);
        const href = i === 0 && link ? link(row) : null;
        return h('td', {class: `cell-${tone(text)}`}, href ? h('a', {href}, text) : text);
      });
      if (allNamespaces) cells.unshift(h('td', {}, row.object?.metadata?.namespace ?? ''));
      return h('tr', {'data-key': rowKey(row)}, cells);
    });
    fill(container, h('table', {}, h('thead', {}, h('tr', {}, head.map((c) => h('th', {}, c)))),
      h('tbody', {}, body)));
  });
  const load = async () => {
    const list = await listOrEmpty(path, include);
    forbidden = list.forbidden ?? '';
    if (list.columnDefinitions) columns = list.columnDefinitions;
    rows.clear();
    for (const row of list.rows ?? []) rows.set(rowKey(row), row);
    draw();
    return list.metadata?.resourceVersion;
  };
  const rv = await load();
  if (!rv) return;
  follow(path, rv, include, (type, table) => {
    if (table.columnDefinitions) columns = table.columnDefinitions;
    for (const row of table.rows ?? []) {
      if (type === 'DELETED') rows.delete(rowKey(row));
      else rows.set(rowKey(row), row);
    }
    draw();
  }, load);
}

/** A live map of objects (JSON) at `path`, keyed namespace/name; `draw(map)` after changes. */
async function liveObjects(path, draw) {
  const objects = new Map();
  const key = (o) => `${o.metadata.namespace ?? ''}/${o.metadata.name}`;
  const redraw = batched(() => draw(objects));
  const load = async () => {
    const list = await listOrEmpty(path);
    objects.clear();
    for (const o of list.items ?? []) objects.set(key(o), o);
    objects.forbidden = list.forbidden;
    redraw();
    return list.metadata?.resourceVersion;
  };
  const rv = await load();
  if (!rv) return;
  follow(path, rv, null, (type, o) => {
    if (type === 'DELETED') objects.delete(key(o));
    else objects.set(key(o), o);
    redraw();
  }, load);
}

/** One object of a collection, followed: `draw(object)` after each change, `undefined` when
 * it is gone or the user may not read it. */
function liveObject(collection, name, draw) {
  return liveObjects(withQuery(collection, {fieldSelector: `metadata.name=${name}`}),
    (all) => draw(all.values().next().value));
}

function conditionsTable(conditions) {
  if (!conditions?.length) return h('p', {class: 'muted'}, 'No conditions.');
  return h('table', {class: 'conditions'},
    h('thead', {}, h('tr', {}, ['Type', 'Status', 'Reason', 'Message', 'Since'].map((c) => h('th', {}, c)))),
    h('tbody', {}, conditions.map((c) => h('tr', {'data-condition': c.type, 'data-status': c.status},
      h('td', {}, c.type), h('td', {class: `cell-${conditionTone(c.type, c.status)}`}, c.status), h('td', {}, c.reason ?? ''),
      h('td', {}, c.message ?? ''), h('td', {}, c.lastTransitionTime ?? '')))));
}

function condition(obj, type) {
  return (obj?.status?.conditions ?? []).find((c) => c.type === type)?.status;
}

function keyValues(map) {
  const entries = Object.entries(map ?? {});
  if (!entries.length) return h('p', {class: 'muted'}, 'None.');
  return h('dl', {}, entries.map(([k, v]) => [h('dt', {}, k), h('dd', {}, String(v))]));
}

// ---- pages ----------------------------------------------------------------------------------

/** The fleet: a tile per cluster coloured by availability, and the clusters' kubectl table. */
async function fleetPage() {
  const summary = h('p', {id: 'summary', class: 'summary'}, 'Loading…');
  const tiles = h('div', {id: 'tiles', class: 'tiles', role: 'list'});
  const filter = h('input', {type: 'search', id: 'filter', placeholder: 'Filter rows'});
  const selector = h('input', {type: 'search', id: 'selector', placeholder: 'Label selector, e.g. env=prod'});
  const table = h('div', {id: 'clusters'});
  main.append(summary, tiles, h('div', {class: 'controls'}, filter, selector), table);
  const state = {rows: new Map(), columns: [], sort: 0, asc: true, shown: 500, forbidden: ''};
  const tileOf = new Map();
  const column = (name) => state.columns.findIndex((c) => c.name.toLowerCase() === name);
  const drawTiles = () => {
    const avail = column('available');
    const accepted = column('hub accepted');
    let counts = {ok: 0, bad: 0, unknown: 0, pending: 0};
    for (const [name, cells] of state.rows) {
      const tone_ = accepted >= 0 && String(cells[accepted]) !== 'true' ? 'pending'
        : tone(avail >= 0 ? cells[avail] : '');
      counts[tone_]++;
      let tile = tileOf.get(name);
      if (!tile) {
        tile = h('a', {href: `/ui/clusters/${encodeURIComponent(name)}`, title: name, role: 'listitem', 'data-cluster': name});
        tileOf.set(name, tile);
        tiles.append(tile);
      }
      const cls = `tile ${tone_}`;
      if (tile.className !== cls) {
        tile.className = cls;
        tile.dataset.available = avail >= 0 ? String(cells[avail] ?? '') : '';
      }
    }
    for (const [name, tile] of tileOf) {
      if (!state.rows.has(name)) {
        tile.remove();
        tileOf.delete(name);
      }
    }
    fill(summary, `${state.rows.size} clusters: `,
      h('span', {class: 'ok'}, `${counts.ok} available`), ', ',
      h('span', {class: 'bad'}, `${counts.bad} unavailable`), ', ',
      h('span', {class: 'unknown'}, `${counts.unknown} unknown`), ', ',
      h('span', {class: 'pending'}, `${counts.pending} not accepted`),
      state.forbidden ? h('span', {class: 'muted'}, ` (${state.forbidden})`) : null);
    summary.dataset.total = state.rows.size;
    summary.dataset.available = counts.ok;
  };
  const drawTable = () => {
    const needle = filter.value.trim().toLowerCase();
    let rows = [...state.rows.values()];
    if (needle) rows = rows.filter((cells) => cells.some((c) => String(c ?? '').toLowerCase().includes(needle)));
    const i = state.sort;
    rows.sort((a, b) => String(a[i] ?? '').localeCompare(String(b[i] ?? ''), undefined, {numeric: true}) * (state.asc ? 1 : -1));
    const head = state.columns.map((c, j) => h('th', {
      class: j === i ? (state.asc ? 'sorted asc' : 'sorted desc') : '',
      onclick: () => {
        state.asc = state.sort === j ? !state.asc : true;
        state.sort = j;
        drawTable();
      },
    }, c.name));
    const body = rows.slice(0, state.shown).map((cells) => h('tr', {'data-cluster': cells[0]},
      cells.map((c, j) => j === 0
        ? h('td', {}, h('a', {href: `/ui/clusters/${encodeURIComponent(c)}`}, String(c)))
        : h('td', {class: `cell-${tone(c)}`}, c === null || c === undefined ? '' : String(c)))));
    const more = rows.length > state.shown
      ? h('button', {type: 'button', onclick: () => { state.shown += 500; drawTable(); }},
        `Show more (${state.shown} of ${rows.length})`)
      : null;
    fill(table, h('table', {}, h('thead', {}, h('tr', {}, head)), h('tbody', {}, body)), more);
  };
  const draw = batched(() => {
    drawTiles();
    drawTable();
  });
  filter.addEventListener('input', batched(drawTable));
  let generation = 0;
  const start = async () => {
    const mine = ++generation;
    const path = withQuery(CLUSTERS, {labelSelector: selector.value.trim()});
    const load = async () => {
      const list = await listOrEmpty(path, 'None');
      if (mine !== generation) return undefined;
      state.forbidden = list.forbidden ? `you may not list clusters: ${list.forbidden}` : '';
      if (list.columnDefinitions) state.columns = list.columnDefinitions;
      state.rows = new Map((list.rows ?? []).map((r) => [String(r.cells[0]), r.cells]));
      draw();
      return list.metadata?.resourceVersion;
    };
    const rv = await load();
    if (!rv) return;
    follow(path, rv, 'None', (type, t) => {
      for (const row of t.rows ?? []) {
        if (type === 'DELETED') state.rows.delete(String(row.cells[0]));
        else state.rows.set(String(row.cells[0]), row.cells);
      }
      draw();
    }, load, () => mine === generation);
  };
  selector.addEventListener('change', start);
  await start();
}

/** One cluster: conditions, taints, claims, capacity, its works, add-ons and policies. */
async function clusterPage(name) {
  const head = section('Cluster', 'cluster');
  const works = section('ManifestWorks', 'works');
  const addons = section('Add-ons', 'addons');
  const policies = section('Policies', 'policies');
  const drawCluster = (mc) => {
    if (!mc) {
      fill(head, h('p', {class: 'muted'}, `No cluster ${name} that you may read.`));
      return;
    }
    const s = mc.status ?? {};
    const accepted = mc.spec?.hubAcceptsClient === true;
    const taints = (mc.spec?.taints ?? []).map((t) => `${t.key}${t.value ? '=' + t.value : ''}:${t.effect}`);
    const claims = Object.fromEntries((s.clusterClaims ?? []).map((c) => [c.name, c.value]));
    fill(head,
      h('p', {class: 'badges'}, badge('Accepted', String(accepted), {'data-accepted': String(accepted)}),
        ['ManagedClusterJoined', 'ManagedClusterConditionAvailable'].map((t) =>
          badge(t.replace('ManagedCluster', '').replace('ConditionAvailable', 'Available'), condition(mc, t) ?? 'Unknown',
            {'data-condition': t, 'data-status': condition(mc, t) ?? 'Unknown'})),
        accepted ? null : h('button', {type: 'button', id: 'accept',
          onclick: () => act(`clusters/${name}/accept`, `Accept cluster ${name}?`)}, 'Accept')),
      h('h3', {}, 'Conditions'), conditionsTable(s.conditions),
      h('h3', {}, 'Taints'), taints.length ? h('ul', {}, taints.map((t) => h('li', {}, t))) : h('p', {class: 'muted'}, 'None.'),
      h('h3', {}, 'Version'), h('p', {}, s.version?.kubernetes ?? 'unknown'),
      h('h3', {}, 'Claims'), keyValues(claims),
      h('h3', {}, 'Capacity'), keyValues(s.capacity),
      h('h3', {}, 'Allocatable'), keyValues(s.allocatable),
      h('h3', {}, 'Labels'), keyValues(mc.metadata?.labels));
  };
  let mc;
  try {
    mc = await api(`${CLUSTERS}/${name}`);
  } catch (e) {
    if (!(e instanceof Forbidden)) throw e;
  }
  drawCluster(mc);
  if (mc) {
    const path = withQuery(CLUSTERS, {fieldSelector: `metadata.name=${name}`});
    const relist = async () => {
      const list = await listOrEmpty(path);
      drawCluster(list.items?.[0]);
      return list.metadata?.resourceVersion;
    };
    follow(path, mc.metadata.resourceVersion, null,
      (type, o) => drawCluster(type === 'DELETED' ? null : o), relist);
  }
  liveObjects(`${WORK_V1}/namespaces/${name}/manifestworks`, (all) => drawWorks(works, all));
  liveTable(addons, `${ADDON}/namespaces/${name}/managedclusteraddons`);
  liveTable(policies, `${POLICY}/namespaces/${name}/policies`);
}

/** ManifestWorks, each with its conditions and per-manifest status. */
function drawWorks(container, works) {
  if (works.size === 0) {
    fill(container, h('p', {class: 'muted'}, works.forbidden ? `Nothing to show: ${works.forbidden}` : 'None.'));
    return;
  }
  const sorted = [...works.values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  fill(container, sorted.map((w) => {
    const manifests = w.status?.resourceStatus?.manifests ?? [];
    return h('article', {class: 'work', 'data-work': w.metadata.name},
      h('h3', {}, w.metadata.name, ' ',
        ['Applied', 'Available', 'Progressing', 'Degraded'].map((t) => {
          const status = condition(w, t);
          return status ? badge(t, status, {'data-condition': t, 'data-status': status}, t) : null;
        })),
      manifests.length ? h('table', {}, h('thead', {}, h('tr', {}, ['#', 'Kind', 'Namespace', 'Name', 'Conditions'].map((c) => h('th', {}, c)))),
        h('tbody', {}, manifests.map((m) => {
          const r = m.resourceMeta ?? {};
          return h('tr', {'data-manifest': `${r.kind}/${r.namespace ?? ''}/${r.name}`},
            h('td', {}, r.ordinal ?? ''), h('td', {}, r.kind ?? ''), h('td', {}, r.namespace ?? ''), h('td', {}, r.name ?? ''),
            h('td', {}, (m.conditions ?? []).map((c) => badge(c.type, c.status, {'data-condition': c.type, 'data-status': c.status}, c.type))));
        })))
        : h('p', {class: 'muted'}, `${(w.spec?.workload?.manifests ?? []).length} manifests, no status reported yet.`));
  }));
}

/** A namespaced kind listed across namespaces, each row linking to `/ui/<route>/<ns>/<name>`. */
function indexPage(title, id, path, route) {
  liveTable(section(title, id), path, {allNamespaces: true,
    link: (row) => `/ui/${route}/${row.object.metadata.namespace}/${row.object.metadata.name}`});
}

async function placementsPage() {
  indexPage('Placements', 'placements', `${CLUSTER_V1B1}/placements`, 'placements');
}

/** One placement: its status, its decisions and the scheduler's explanation. */
async function placementPage(ns, name) {
  const head = section('Status', 'placement');
  const decisions = section('Decisions', 'decisions');
  const explain = section('Explain', 'explain');
  liveObject(`${CLUSTER_V1B1}/namespaces/${ns}/placements`, name, (p) => {
    if (!p) return fill(head, h('p', {class: 'muted'}, `No placement ${ns}/${name} that you may read.`));
    return fill(head, h('p', {}, `${p.status?.numberOfSelectedClusters ?? 0} clusters selected`),
      conditionsTable(p.status?.conditions));
  });
  liveObjects(withQuery(`${CLUSTER_V1B1}/namespaces/${ns}/placementdecisions`, {labelSelector: `${PLACEMENT_LABEL}=${name}`}), (all) => {
    const rows = [...all.values()].flatMap((d) => (d.status?.decisions ?? []).map((c) => [c.clusterName, c.reason ?? '', d.metadata.name]));
    rows.sort((a, b) => a[0].localeCompare(b[0]));
    if (!rows.length) return fill(decisions, h('p', {class: 'muted'}, 'No clusters decided.'));
    return fill(decisions, h('table', {}, h('thead', {}, h('tr', {}, ['Cluster', 'Reason', 'PlacementDecision'].map((c) => h('th', {}, c)))),
      h('tbody', {}, rows.map(([c, reason, d]) => h('tr', {'data-cluster': c},
        h('td', {}, h('a', {href: `/ui/clusters/${c}`}, c)), h('td', {}, reason), h('td', {}, d))))));
  });
  const drawExplain = async () => {
    try {
      const t = await api(`${CLUSTER_V1B1}/namespaces/${ns}/placements/${name}/explain`, 'None');
      if (!t) return fill(explain, h('p', {class: 'muted'}, 'Nothing to explain.'));
      return fill(explain, h('button', {type: 'button', onclick: drawExplain}, 'Explain again'),
        h('table', {}, h('thead', {}, h('tr', {}, t.columnDefinitions.map((c) => h('th', {}, c.name)))),
          h('tbody', {}, t.rows.map((r) => h('tr', {}, r.cells.map((c) => h('td', {}, String(c ?? ''))))))));
    } catch (e) {
      return fill(explain, h('p', {class: 'muted'}, `Nothing to show: ${e.message}`));
    }
  };
  drawExplain();
}

async function rolloutsPage() {
  indexPage('ManifestWorkReplicaSets', 'rollouts', `${WORK_V1A1}/manifestworkreplicasets`, 'rollouts');
}

/** One ManifestWorkReplicaSet: its summary and actions, per-cluster progress, revisions. */
async function rolloutPage(ns, name) {
  const head = section('Rollout', 'rollout');
  const clusters = section('Clusters', 'progress');
  const revisions = section('Revisions', 'revisions');
  liveObject(`${WORK_V1A1}/namespaces/${ns}/manifestworkreplicasets`, name, (set) => {
    if (!set) return fill(head, h('p', {class: 'muted'}, `No ManifestWorkReplicaSet ${ns}/${name} that you may read.`));
    const s = set.status ?? {};
    const paused = set.spec?.paused === true;
    return fill(head,
      h('p', {class: 'badges'}, badge(paused ? 'Paused' : 'Running', paused ? 'Pending' : 'True', {'data-paused': String(paused)}),
        h('button', {type: 'button', id: paused ? 'resume' : 'pause',
          onclick: () => act(`rollouts/${ns}/${name}/${paused ? 'resume' : 'pause'}`)}, paused ? 'Resume' : 'Pause'),
        h('button', {type: 'button', id: 'undo',
          onclick: () => act(`rollouts/${ns}/${name}/undo`, `Roll ${ns}/${name} back to its previous revision?`)}, 'Undo')),
      h('p', {}, `Current revision ${s.currentRevision ?? '-'}, update revision ${s.updateRevision ?? '-'}`),
      h('h3', {}, 'Summary'), keyValues(s.summary),
      h('h3', {}, 'Conditions'), conditionsTable(s.conditions));
  });
  liveObjects(withQuery(`${WORK_V1}/manifestworks`, {labelSelector: `${SET_LABEL}=${ns}.${name}`}), (all) => {
    const works = [...all.values()].sort((a, b) => a.metadata.namespace.localeCompare(b.metadata.namespace));
    if (!works.length) return fill(clusters, h('p', {class: 'muted'}, 'No cluster runs it yet.'));
    return fill(clusters, h('table', {}, h('thead', {}, h('tr', {}, ['Cluster', 'Revision', 'Applied', 'Available', 'Progressing', 'Degraded'].map((c) => h('th', {}, c)))),
      h('tbody', {}, works.map((w) => h('tr', {'data-cluster': w.metadata.namespace},
        h('td', {}, h('a', {href: `/ui/clusters/${w.metadata.namespace}`}, w.metadata.namespace)),
        h('td', {}, w.metadata.labels?.[HASH_LABEL] ?? ''),
        ['Applied', 'Available', 'Progressing', 'Degraded'].map((t) => h('td', {class: `cell-${conditionTone(t, condition(w, t))}`}, condition(w, t) ?? '')))))));
  });
  liveTable(revisions, withQuery(`/apis/apps/v1/namespaces/${ns}/controllerrevisions`, {labelSelector: `${SET_NAME_LABEL}=${name}`}));
}

async function addonsPage() {
  const cmas = section('ClusterManagementAddOns', 'clustermanagementaddons');
  const mcas = section('ManagedClusterAddOns', 'managedclusteraddons');
  liveTable(cmas, `${ADDON}/clustermanagementaddons`);
  liveTable(mcas, `${ADDON}/managedclusteraddons`, {allNamespaces: true});
}

/** Policy compliance: a row per cluster, a column per root policy, and the policies' table. */
async function policiesPage() {
  const matrix = section('Compliance', 'compliance');
  const list = section('Policies', 'policy-list');
  liveObjects(`${POLICY}/policies`, (all) => {
    const roots = [...all.values()].filter((p) => !p.metadata.labels?.[ROOT_POLICY_LABEL])
      .sort((a, b) => `${a.metadata.namespace}/${a.metadata.name}`.localeCompare(`${b.metadata.namespace}/${b.metadata.name}`));
    if (!roots.length) {
      fill(matrix, h('p', {class: 'muted'}, all.forbidden ? `Nothing to show: ${all.forbidden}` : 'No policies.'));
      fill(list);
      return;
    }
    const clusters = [...new Set(roots.flatMap((p) => (p.status?.status ?? []).map((s) => s.clustername)))].sort();
    const state = (p, c) => (p.status?.status ?? []).find((s) => s.clustername === c)?.compliant;
    fill(matrix, clusters.length ? h('table', {class: 'matrix'},
      h('thead', {}, h('tr', {}, h('th', {}, 'Cluster'), roots.map((p) => h('th', {}, `${p.metadata.namespace}/${p.metadata.name}`)))),
      h('tbody', {}, clusters.map((c) => h('tr', {'data-cluster': c},
        h('td', {}, h('a', {href: `/ui/clusters/${c}`}, c)),
        roots.map((p) => {
          const s = state(p, c);
          return h('td', {class: `cell-${tone(s ?? '')}`, 'data-policy': `${p.metadata.namespace}/${p.metadata.name}`}, s ?? '');
        })))))
      : h('p', {class: 'muted'}, 'No cluster reports yet.'));
    fill(list, h('table', {}, h('thead', {}, h('tr', {}, ['Namespace', 'Name', 'Remediation', 'Compliance', 'Disabled', ''].map((c) => h('th', {}, c)))),
      h('tbody', {}, roots.map((p) => {
        const {namespace, name} = p.metadata;
        const disabled = p.spec?.disabled === true;
        return h('tr', {'data-policy': `${namespace}/${name}`},
          h('td', {}, namespace), h('td', {}, name), h('td', {}, p.spec?.remediationAction ?? ''),
          h('td', {class: `cell-${tone(p.status?.compliant ?? '')}`}, p.status?.compliant ?? ''),
          h('td', {}, String(disabled)),
          h('td', {}, h('button', {type: 'button',
            onclick: () => act(`policies/${namespace}/${name}/${disabled ? 'enable' : 'disable'}`)}, disabled ? 'Enable' : 'Disable')));
      }))));
  });
}

const PAGES = {
  fleet: () => fleetPage(),
  cluster: (ns, name) => clusterPage(name),
  placements: () => placementsPage(),
  placement: placementPage,
  rollouts: () => rolloutsPage(),
  rollout: rolloutPage,
  addons: () => addonsPage(),
  policies: () => policiesPage(),
};

async function start() {
  const {page, namespace, name} = document.body.dataset;
  const run = PAGES[page];
  if (!run) return;
  main.querySelector('p.muted')?.remove();
  try {
    await run(namespace, name);
  } catch (e) {
    say(`The console could not load this page: ${e.message}`, true);
  }
}

start();
