// The operator's web UI: a hash-routed single page on the coordinator's own API. Everything it
// shows comes from the monitoring endpoints; every change goes through the admin API (and so is
// audited) with the `requestedBy` and `reason` the operator types in.
import { ApiError, follow, get, groupPath, login, newRequestId, post, session } from './api.js';

const main = document.getElementById('main');
let leave = () => {}; // stops the timers and streams of the page being left

/** Builds an element; strings become text nodes (never HTML), so API data cannot inject markup. */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

const list = (shards) => (shards && shards.length > 0 ? shards.join(', ') : '–');

const clockFormat = (withMs) =>
  new Intl.DateTimeFormat('en-US', {
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hourCycle: 'h23',
    timeZoneName: 'shortOffset',
    ...(withMs ? { fractionalSecondDigits: 3 } : {}),
  });
const CLOCK = [clockFormat(false), clockFormat(true)];

/** `2026-05-03 14:02:11 GMT+2`: always the date and the zone, never a bare time of day. */
function when(iso, { ms = false } = {}) {
  if (!iso) return '–';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  const p = Object.fromEntries(
    CLOCK[ms ? 1 : 0].formatToParts(date).map((part) => [part.type, part.value]),
  );
  const seconds = ms ? `${p.second}.${p.fractionalSecond}` : p.second;
  return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}:${seconds} ${p.timeZoneName}`;
}

/** A time in the page's zone, with the instant in UTC as its tooltip. */
const time = (iso, options) =>
  iso ? h('time', { datetime: iso, title: new Date(iso).toISOString() }, when(iso, options)) : '–';

/** `950 ms`, `12.5 s`, `3 min 20 s`, `2 h 5 min`. */
function duration(ms) {
  if (ms === null || ms === undefined) return '–';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${Number(s.toFixed(1))} s`;
  const whole = Math.round(s);
  const [big, small] =
    whole < 3600
      ? [`${Math.floor(whole / 60)} min`, whole % 60 ? `${whole % 60} s` : '']
      : [
          `${Math.floor(whole / 3600)} h`,
          whole % 3600 >= 60 ? `${Math.floor((whole % 3600) / 60)} min` : '',
        ];
  return small ? `${big} ${small}` : big;
}

const count = (n) => (n === null || n === undefined ? '–' : Number(n).toLocaleString('en-US'));

function table(columns, rows, attrs = {}, rowAttrs = () => ({})) {
  return h(
    'table',
    attrs,
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        columns.map(([title]) => h('th', {}, title)),
      ),
    ),
    h(
      'tbody',
      {},
      rows.length === 0
        ? h('tr', {}, h('td', { colspan: columns.length, class: 'empty' }, 'none'))
        : rows.map((row) =>
            h(
              'tr',
              rowAttrs(row),
              columns.map(([, cell]) => h('td', {}, cell(row))),
            ),
          ),
    ),
  );
}

const errorText = (error) =>
  error instanceof ApiError ? `${error.code}: ${error.message}` : String(error);

function showError(error, where = main) {
  where.prepend(h('p', { class: 'error', role: 'alert' }, errorText(error)));
}

/**
 * Whether `error` says the login ended (401: the token expired, or the coordinator's secret
 * changed); if so the login is forgotten and the login form shown.
 */
function loginEnded(error) {
  if (!(error instanceof ApiError && error.status === 401)) return false;
  session.clear();
  route();
  return true;
}

/** Why the page offers no change to this login: changes need the role WRITE. */
const NEEDS_WRITE = 'Needs the WRITE role: log in as a user who has it to change anything.';

/** Whether the logged-in token may change things (role WRITE); the page offers changes only then. */
const canWrite = () => (session.user?.roles ?? []).includes('WRITE');

/** A button that makes a change: disabled, saying why, for a token without WRITE. */
function changeButton(attrs, label) {
  const allowed = canWrite();
  return h(
    'button',
    {
      type: 'button',
      ...attrs,
      disabled: !allowed || attrs.disabled,
      title: allowed ? attrs.title : NEEDS_WRITE,
      dataset: { ...attrs.dataset, change: '' },
    },
    label,
  );
}

/**
 * Asks for the fields of a change (always `requestedBy` and `reason`, which the audit records);
 * resolves with the values, or null when cancelled.
 */
function ask(title, fields = []) {
  const dialog = document.getElementById('ask');
  const holder = document.getElementById('ask-fields');
  document.getElementById('ask-title').textContent = title;
  const all = [
    ...fields,
    { name: 'requestedBy', label: 'Requested by', value: session.user?.username ?? '' },
    { name: 'reason', label: 'Reason', value: '' },
  ];
  holder.replaceChildren(
    ...all.map((f) =>
      h(
        'label',
        {},
        f.label,
        f.options
          ? h(
              'select',
              { name: f.name },
              f.options.map((o) => h('option', { value: o }, o)),
            )
          : h('input', {
              name: f.name,
              value: f.value ?? '',
              type: f.type ?? 'text',
              required: f.optional ? undefined : true,
              min: f.min,
            }),
      ),
    ),
  );
  return new Promise((resolve) => {
    dialog.onclose = () => {
      if (dialog.returnValue !== 'ok') return resolve(null);
      const values = {};
      for (const f of all) {
        const raw = holder.querySelector(`[name="${f.name}"]`).value;
        values[f.name] = f.type === 'number' ? Number(raw) : raw;
      }
      resolve(values);
    };
    dialog.returnValue = '';
    dialog.showModal();
  });
}

// ---------------------------------------------------------------------------------------------
// Login

function renderLogin() {
  const form = h(
    'form',
    { class: 'login', id: 'login-form' },
    h('h2', {}, 'Log in'),
    h(
      'label',
      {},
      'Username',
      h('input', { name: 'username', autocomplete: 'username', required: true }),
    ),
    h(
      'label',
      {},
      'Password',
      h('input', {
        name: 'password',
        type: 'password',
        autocomplete: 'current-password',
        required: true,
      }),
    ),
    h('button', { type: 'submit' }, 'Log in'),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    try {
      await login(String(data.get('username')), String(data.get('password')));
      go('#/groups');
    } catch (error) {
      showError(error, form);
    }
  });
  main.replaceChildren(form);
}

// ---------------------------------------------------------------------------------------------
// Lag (docs/operations.md#lag): read by each group's owner from the streams themselves

/** A group's lag reading, `{ lag }`, or why there is none, `{ error }` (an expired login throws). */
async function readLag(path) {
  try {
    return { lag: await get(`/monitoring${path}/lag`) };
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) throw error;
    return { error };
  }
}

/** Entries and seconds behind, coloured when behind; `n/a` with the reason as its tooltip. */
function lagCell(reading) {
  if (!reading) return h('span', { class: 'lag loading' }, '…');
  if (reading.error) {
    return h(
      'span',
      { class: 'lag na', title: errorText(reading.error), dataset: { lag: 'error' } },
      'n/a',
    );
  }
  const { lag } = reading;
  if (!lag.available || !lag.totals) {
    return h(
      'span',
      { class: 'lag na', title: lag.reason ?? 'not available', dataset: { lag: 'unavailable' } },
      'n/a',
    );
  }
  const t = lag.totals;
  const behind = t.lagEntries > 0;
  return h(
    'span',
    {
      class: `lag ${behind ? 'behind' : 'caught-up'}`,
      dataset: { lagEntries: t.lagEntries, lagSeconds: t.maxLagSeconds },
      title: `${count(t.pending)} pending, ${t.shardsBehind} of ${lag.shards.length} shards behind; measured ${when(lag.measuredAt)}`,
    },
    behind ? `${count(t.lagEntries)} entries · ${duration(t.maxLagSeconds * 1000)}` : 'caught up',
  );
}

// ---------------------------------------------------------------------------------------------
// Groups

/** How often the groups list reads its groups' lag again. */
const LIST_LAG_MS = 5000;

async function renderGroups(params) {
  const shown = routed;
  const cursors = params.get('trail')?.split(',').filter(Boolean) ?? [];
  const cursor = cursors.at(-1);
  const query = new URLSearchParams({ limit: '50' });
  if (cursor) query.set('cursor', cursor);
  const page = await get(`/monitoring/groups?${query}`);
  if (shown !== routed) return; // left while the list was read: start nothing
  const filter = h('input', {
    type: 'search',
    placeholder: 'filter by name, status or phase',
    id: 'group-filter',
    value: params.get('filter') ?? '',
  });
  const holder = h('div');
  // Each group's lag, read a few at a time and again every LIST_LAG_MS while the list shows.
  const lags = new Map();
  const keyOf = (g) => `${g.streamPrefix}:${g.consumerGroup}`;
  let gone = false;
  const readLags = async () => {
    const queue = [...page.groups];
    const worker = async () => {
      for (let g = queue.shift(); g && !gone; g = queue.shift()) {
        lags.set(keyOf(g), await readLag(groupPath(g.streamPrefix, g.consumerGroup)));
        if (!gone) draw();
      }
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
  };
  const draw = () => {
    const needle = filter.value.trim().toLowerCase();
    const rows = page.groups.filter((g) =>
      `${g.streamPrefix}:${g.consumerGroup} ${g.status} ${g.phase}`.toLowerCase().includes(needle),
    );
    holder.replaceChildren(
      table(
        [
          [
            'Group',
            (g) =>
              h(
                'a',
                {
                  href: `#/groups/${encodeURIComponent(g.streamPrefix)}/${encodeURIComponent(g.consumerGroup)}`,
                },
                `${g.streamPrefix}:${g.consumerGroup}`,
              ),
          ],
          ['Status', (g) => h('span', { class: `status ${g.status}` }, g.status)],
          ['Phase', (g) => g.phase],
          ['Shards', (g) => g.shardCount],
          ['Members', (g) => g.memberCount],
          ['Version', (g) => g.metadataVersion],
          ['Lag', (g) => lagCell(lags.get(keyOf(g)))],
          ['Owner', (g) => g.owner ?? '–'],
        ],
        rows,
        { id: 'groups-table' },
      ),
    );
  };
  filter.addEventListener('input', draw);
  draw();
  const failed = (error) => {
    if (error instanceof ApiError && error.status === 401) return route();
    showError(error);
  };
  let reading = null; // one round at a time
  const again = () => {
    reading ??= readLags()
      .catch(failed)
      .finally(() => {
        reading = null;
      });
  };
  again();
  const timer = setInterval(again, LIST_LAG_MS);
  leave = () => {
    gone = true;
    clearInterval(timer);
  };
  const trail = (list) => `#/groups?trail=${list.map(encodeURIComponent).join(',')}`;
  main.replaceChildren(
    h('h2', {}, 'Groups'),
    filter,
    holder,
    h(
      'p',
      { class: 'pager' },
      cursors.length > 0 ? h('a', { href: trail(cursors.slice(0, -1)) }, '← Previous') : null,
      page.nextCursor
        ? h('a', { href: trail([...cursors, page.nextCursor]), id: 'next-page' }, 'Next →')
        : null,
    ),
  );
}

// ---------------------------------------------------------------------------------------------
// One group

/** Mermaid ids of the active leaf states of a state value, e.g. `group_membership_stable`. */
function activeStateIds(machineId, value) {
  const ids = [];
  const walk = (node, path) => {
    if (typeof node === 'string') {
      ids.push([...path, node].join('.'));
      return;
    }
    // Only leaves are marked: a marked composite would fill its whole box.
    for (const [key, child] of Object.entries(node ?? {})) walk(child, [...path, key]);
  };
  walk(value, [machineId]);
  return ids.map((id) => id.replace(/[^A-Za-z0-9_]/g, '_'));
}

let diagramCount = 0;
/** The statechart's zoom: `'fit'` (each region as wide as its column) or a factor of its size. */
let chartZoom = 'fit';
/** Fitting never blows a small region up beyond this. */
const FIT_MAX = 1.6;
const ZOOM_STEPS = [0.5, 0.75, 1, 1.25, 1.5, 2, 2.5, 3];

/**
 * Sizes the regions' diagrams to the zoom: their natural size times the factor, or fitted, all
 * at one scale (the one that fits each in its column), so that text is the same size in all.
 */
function sizeDiagrams(holder) {
  const diagrams = [...holder.querySelectorAll('figure.region')]
    .map((figure) => {
      const svg = figure.querySelector('svg');
      const room = figure.querySelector('.diagram').clientWidth - 8;
      return { figure, svg, room, natural: svg?.viewBox?.baseVal };
    })
    .filter((d) => d.natural && d.natural.width > 0 && d.room > 0);
  const fit = Math.min(FIT_MAX, ...diagrams.map((d) => d.room / d.natural.width));
  const factor = chartZoom === 'fit' ? fit : chartZoom;
  for (const { figure, svg, natural } of diagrams) {
    svg.style.maxWidth = 'none';
    svg.setAttribute('width', String(Math.round(natural.width * factor)));
    svg.setAttribute('height', String(Math.round(natural.height * factor)));
    figure.dataset.scale = factor.toFixed(2);
  }
  const shown = document.getElementById('chart-zoom');
  if (shown) shown.textContent = chartZoom === 'fit' ? 'fit' : `${Math.round(chartZoom * 100)} %`;
}

/** The zoom after one step in or out (-1, +1) from what is shown now. */
function zoomStep(holder, direction) {
  const now =
    chartZoom === 'fit'
      ? Number(holder.querySelector('figure.region')?.dataset.scale ?? 1)
      : chartZoom;
  const next =
    direction > 0
      ? ZOOM_STEPS.find((z) => z > now + 0.01)
      : ZOOM_STEPS.findLast((z) => z < now - 0.01);
  return next ?? now;
}

/**
 * Draws the statechart one region at a time (lifecycle, membership, consumption, migration),
 * each a diagram legible in its column, with the group's current states marked.
 */
async function drawStatechart(holder, chart) {
  const active = activeStateIds(chart.machineId, chart.value);
  holder.dataset.active = active.join(' ');
  const regions =
    chart.regions && chart.regions.length > 0
      ? chart.regions
      : [{ region: chart.machineId, mermaid: chart.mermaid }];
  for (const { region, mermaid } of regions) {
    let figure = [...holder.children].find((f) => f.dataset.region === region);
    if (!figure) {
      figure = h(
        'figure',
        { class: 'region', dataset: { region } },
        h('figcaption', {}, region),
        h('div', { class: 'diagram' }),
      );
      holder.append(figure);
    }
    const diagram = figure.querySelector('.diagram');
    const text = mermaid.includes('classDef current')
      ? mermaid
      : `${mermaid}  classDef current fill:#ffd166,stroke:#b35c00,stroke-width:3px\n${active
          .map((id) => `  class ${id} current\n`)
          .join('')}`;
    if (diagram.dataset.source === text) continue;
    diagram.dataset.source = text;
    try {
      const { svg } = await window.mermaid.render(`statechart-${++diagramCount}`, text);
      diagram.innerHTML = svg; // mermaid's own SVG output, rendered with securityLevel 'strict'
    } catch (error) {
      diagram.replaceChildren(h('pre', {}, text));
      showError(error, diagram);
    }
  }
  sizeDiagrams(holder);
}

// What just happened: the group's recent transitions, kept by its owner, then live.

/** The migration region's states as the migrations API names them. */
const MIGRATION_STATES = { idle: 'none active', inProgress: 'IN_PROGRESS', converged: 'CONVERGED' };
const regionState = (region, state) =>
  region === 'migration' ? (MIGRATION_STATES[state] ?? state) : state;

/** Who or what caused a transition, in words. */
function causeText(cause) {
  switch (cause?.kind) {
    case 'member':
      return `heartbeat of ${cause.memberId ?? 'a member'}`;
    case 'admin': {
      const who = cause.principal ?? 'an admin request';
      const asked =
        cause.requestedBy && cause.requestedBy !== cause.principal
          ? `, requested by ${cause.requestedBy}`
          : '';
      const id = cause.requestId ? ` (request ${cause.requestId})` : '';
      return `${cause.principal ? `by ${who}` : who}${asked}${id}`;
    }
    case 'timer':
      return 'timer';
    case 'producer':
      return "a producer's routing read";
    case 'replica':
      return `replica: ${cause.detail}`;
    default:
      return '–';
  }
}

/** An effect of a transition, in words. */
function effectText(e) {
  switch (e.type) {
    case 'MEMBER_JOINED':
      return `${e.memberId} joined`;
    case 'MEMBER_LEFT':
      return `${e.memberId} left`;
    case 'MEMBER_EXPIRED':
      return `${e.memberId} expired (no heartbeat within its session)`;
    case 'MEMBER_FENCED':
      return `${e.memberId} fenced (${e.reason})`;
    case 'REBALANCE_STARTED':
      return 'rebalance started';
    case 'REBALANCE_COMPLETED':
      return `rebalance completed in ${duration(e.durationMs)}`;
    case 'ASSIGNMENT_RECOMPUTED':
      return `targets recomputed (assignment epoch ${e.assignmentEpoch})`;
    case 'MIGRATION_STARTED':
      return `${e.kind} migration started: IN_PROGRESS`;
    case 'MIGRATION_CONVERGED':
      return `migration CONVERGED after ${duration(e.durationMs)}`;
    case 'MIGRATION_COMPLETED':
      return 'migration COMPLETED';
    case 'MIGRATION_ROLLED_BACK':
      return 'migration ROLLED_BACK';
    case 'ROLLBACK_SIGNAL':
      return `rollback signal: a ${e.source} reported ${e.field} ${e.reported}, stored ${e.stored}`;
    case 'FAILED_CLOSED':
      return `failed closed: ${e.reason}`;
    case 'INVARIANT_VIOLATION':
      return `invariant ${e.invariant} violated: ${e.detail}`;
    case 'EVENT_FAILED':
      return `${e.event} failed: ${e.message}`;
    default:
      return String(e.type ?? 'effect');
  }
}

function transitionItem(t) {
  const changes = (t.changes ?? []).map((c) =>
    c.from === null
      ? `${c.region} ${regionState(c.region, c.to)}`
      : `${c.region}: ${regionState(c.region, c.from)} → ${regionState(c.region, c.to)}`,
  );
  const effects = (t.effects ?? []).map(effectText);
  return h(
    'li',
    {
      class: `transition${t.stateChanged ? ' changed' : ''}`,
      dataset: { seq: t.seq, event: t.event, cause: t.cause?.kind ?? '' },
    },
    h('span', { class: 'when' }, time(t.at, { ms: true })),
    h(
      'span',
      { class: 'what' },
      h('b', { class: 'event' }, t.event ?? 'transition'),
      t.raised && t.raised.length > 0 ? h('span', { class: 'raised' }, t.raised.join(', ')) : null,
      h('span', { class: 'cause' }, causeText(t.cause)),
    ),
    changes.length > 0
      ? h(
          'span',
          { class: 'changes' },
          changes.map((c) => h('span', { class: 'change' }, c)),
        )
      : null,
    effects.length > 0 ? h('span', { class: 'effects' }, effects.join(' · ')) : null,
  );
}

/** The timeline: transitions newest first, each once (the list on load and the live ones). */
function timeline(list) {
  const items = [];
  const seen = new Set();
  const draw = () =>
    list.replaceChildren(
      ...(items.length === 0
        ? [
            h(
              'li',
              { class: 'none' },
              'Nothing kept yet: no transition since this replica took the group.',
            ),
          ]
        : items.map(transitionItem)),
    );
  return {
    add(transitions) {
      for (const t of transitions) {
        const key = `${t.seq}@${t.at}`;
        if (seen.has(key)) continue;
        seen.add(key);
        items.push(t);
      }
      items.sort((a, b) => b.seq - a.seq || (b.at > a.at ? 1 : -1));
      items.length = Math.min(items.length, TIMELINE_LENGTH);
      draw();
    },
  };
}
const TIMELINE_LENGTH = 100;

// The group's lag: per shard, and its total over the last minutes as sampled by this page.

/** How long the page keeps its lag samples (in the tab's sessionStorage, per group). */
const LAG_WINDOW_MS = 10 * 60_000;
/** The chart shows at least this much time, however recent its first sample. */
const LAG_MIN_SPAN_MS = 60_000;

function lagSamples(key) {
  try {
    const list = JSON.parse(sessionStorage.getItem(key) ?? '[]');
    return Array.isArray(list) ? list : [];
  } catch {
    return [];
  }
}

/** Adds a sample (one a second at most) and forgets those older than the window. */
function keepLagSample(key, sample) {
  const list = lagSamples(key).filter((s) => sample.t - s.t < LAG_WINDOW_MS && s.t <= sample.t);
  const last = list.at(-1);
  if (last && sample.t - last.t < 1000) list[list.length - 1] = sample;
  else list.push(sample);
  sessionStorage.setItem(key, JSON.stringify(list));
  return list;
}

const SVG = 'http://www.w3.org/2000/svg';
function svg(tag, attrs = {}) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, String(value));
  return el;
}

/** A small chart of the total lag (entries) over the window, newest at the right. */
function lagChart(samples, now) {
  const W = 360;
  const H = 80;
  const max = Math.max(1, ...samples.map((s) => s.entries));
  // From the first sample kept (at least the last LAG_MIN_SPAN_MS), up to the whole window.
  const span = Math.min(LAG_WINDOW_MS, Math.max(LAG_MIN_SPAN_MS, now - (samples[0]?.t ?? now)));
  const x = (t) => ((t - (now - span)) / span) * W;
  const y = (v) => H - 2 - (v / max) * (H - 6);
  const chart = svg('svg', {
    viewBox: `0 0 ${W} ${H}`,
    width: W,
    height: H,
    role: 'img',
    'aria-label': `total lag over the last ${duration(span)}`,
  });
  chart.append(svg('rect', { x: 0, y: 0, width: W, height: H, class: 'plot' }));
  for (const f of [0.25, 0.5, 0.75])
    chart.append(svg('line', { x1: 0, x2: W, y1: y(max * f), y2: y(max * f), class: 'grid' }));
  if (samples.length > 0) {
    const points = samples.map((s) => `${x(s.t).toFixed(1)},${y(s.entries).toFixed(1)}`);
    const first = samples[0];
    const last = samples.at(-1);
    chart.append(
      svg('path', {
        d: `M${x(first.t).toFixed(1)},${H} L${points.join(' L')} L${x(last.t).toFixed(1)},${H} Z`,
        class: `area${last.entries > 0 ? ' behind' : ''}`,
      }),
      svg('polyline', {
        points: points.join(' '),
        class: `line${last.entries > 0 ? ' behind' : ''}`,
      }),
      svg('circle', { cx: x(last.t), cy: y(last.entries), r: 3, class: 'last' }),
    );
  }
  const last = samples.at(-1);
  return h(
    'figure',
    {
      id: 'lag-chart',
      class: 'lag-chart',
      dataset: { samples: samples.length, last: last ? last.entries : '' },
    },
    h('span', { class: 'y-max' }, `${count(max)} entries`),
    chart,
    h('span', { class: 'x-axis' }, h('span', {}, `−${duration(span)}`), h('span', {}, 'now')),
    h(
      'figcaption',
      {},
      last
        ? `Total lag ${count(last.entries)} entries, oldest undelivered ${duration(last.seconds * 1000)} (sampled by this page every 2 s while it is open)`
        : 'Total lag: sampled by this page every 2 s while it is open.',
    ),
  );
}

/** A shard's lag as a bar (its share of the largest) with the entries and seconds behind. */
function lagBar(s, max) {
  const fill = h('span', { class: 'fill' });
  fill.style.width = `${Math.max(s.lagEntries > 0 ? 2 : 0, (100 * s.lagEntries) / max)}%`;
  return h(
    'span',
    {
      class: `lag-bar ${s.lagEntries > 0 ? 'behind' : 'caught-up'}`,
      dataset: { lagEntries: s.lagEntries },
      title: s.lagExact ? undefined : 'at least this many (counting stopped)',
    },
    h('span', { class: 'track' }, fill),
    h(
      'span',
      { class: 'amount' },
      s.lagEntries > 0
        ? `${count(s.lagEntries)}${s.lagExact ? '' : '+'} · ${duration(s.lagSeconds * 1000)}`
        : '0',
    ),
  );
}

/** The lag section: totals, the chart, one row per shard; or why there is no reading. */
function lagPanel(reading, samples, now) {
  const chart = lagChart(samples, now);
  if (reading.error) {
    return [
      h(
        'p',
        { class: 'error', id: 'lag-problem' },
        `Lag cannot be read: ${errorText(reading.error)}`,
      ),
      chart,
    ];
  }
  const { lag } = reading;
  if (!lag.available || !lag.totals) {
    return [
      h('p', { class: 'na', id: 'lag-problem' }, `Lag is not available: ${lag.reason ?? ''}`),
    ];
  }
  const t = lag.totals;
  const max = Math.max(1, ...lag.shards.map((s) => s.lagEntries));
  return [
    h(
      'div',
      { class: 'lag-top' },
      chart,
      h(
        'dl',
        { class: 'lag-totals', id: 'lag-totals' },
        h('dt', {}, 'Behind'),
        h('dd', {}, lagCell(reading)),
        h('dt', {}, 'Pending'),
        h('dd', {}, count(t.pending)),
        h('dt', {}, 'Shards behind'),
        h('dd', {}, `${t.shardsBehind} of ${lag.shards.length}`),
        h('dt', {}, 'Measured'),
        h('dd', {}, time(lag.measuredAt), lag.streams ? ` on ${lag.streams}` : ''),
      ),
    ),
    table(
      [
        ['Shard', (s) => (s.retiring ? `${s.shard} (retiring)` : s.shard)],
        ['Owner', (s) => s.owner ?? '–'],
        ['Lag', (s) => lagBar(s, max)],
        ['Pending', (s) => count(s.pending)],
        ['Stuck (oldest pending)', (s) => duration(s.oldestPendingMs)],
        [
          'Dead letters',
          (s) => h('span', { class: s.deadLetters > 0 ? 'dead' : '' }, count(s.deadLetters)),
        ],
        [
          'Stream',
          (s) => [
            s.stream,
            s.missing ? h('small', {}, ' (missing)') : null,
            s.noConsumerGroup ? h('small', {}, ' (not read yet: no consumer group)') : null,
            s.error ? h('small', { class: 'dead' }, ` (unreadable: ${s.error})`) : null,
          ],
        ],
      ],
      lag.shards,
      { id: 'lag-table' },
      (s) => ({ dataset: { shard: s.shard } }),
    ),
  ];
}

/**
 * The shards as tiles: state, owner and target; a paused one is marked, and each has a small
 * control to pause or resume it (`onToggle(shard, pause)`).
 */
function shardGrid(assignments, pausedShards, onToggle) {
  const paused = new Set(pausedShards);
  return h(
    'div',
    { class: 'shard-grid', id: 'shard-grid' },
    assignments.shards.map((s) =>
      h(
        'div',
        {
          class: `shard ${s.state}${paused.has(s.shard) ? ' paused' : ''}`,
          dataset: {
            shard: s.shard,
            state: s.state,
            owner: s.owner ?? '',
            paused: paused.has(s.shard),
          },
          title: `shard ${s.shard}: ${s.state}${paused.has(s.shard) ? ', paused' : ''}, owner ${s.owner ?? 'none'}, target ${s.target ?? 'none'}`,
        },
        h(
          'span',
          { class: 'shard-head' },
          h('b', {}, s.shard),
          paused.has(s.shard) ? h('small', { class: 'paused-mark' }, 'paused') : null,
          changeButton(
            {
              class: 'shard-toggle',
              dataset: { action: paused.has(s.shard) ? 'resume' : 'pause' },
              'aria-label': `${paused.has(s.shard) ? 'Resume' : 'Pause'} shard ${s.shard}`,
              title: `${paused.has(s.shard) ? 'Resume' : 'Pause'} consumption of shard ${s.shard}…`,
              onclick: () => onToggle(s.shard, !paused.has(s.shard)),
            },
            paused.has(s.shard) ? '▶' : '⏸',
          ),
        ),
        h('small', {}, s.owner ?? '—'),
        s.target && s.target !== s.owner ? h('small', { class: 'target' }, `→ ${s.target}`) : null,
      ),
    ),
  );
}

// Consumption control (docs/operations.md#pausing-consumption, docs/operations.md#replay-or-skip)

/** Where a position reset moves the group, in words. */
function targetText(to) {
  if (typeof to === 'string') return to;
  if (to && 'timestamp' in to) return when(new Date(to.timestamp).toISOString());
  return Object.entries(to?.ids ?? {})
    .map(([shard, id]) => `${shard}=${id}`)
    .join(', ');
}

const sum = (items, field) => items.reduce((n, item) => n + item[field], 0);
/** A count, with `+` when counting stopped at its bound. */
const counted = (n, exact) => `${count(n)}${exact ? '' : '+'}`;

/** The consumption state, the paused shards, a reset under way with its progress, the last one. */
function consumptionStatus(c) {
  const reset = c.reset;
  const moved = reset ? reset.moves.filter((m) => m.moved).length : 0;
  const last = c.lastReset;
  const lastMoved = last ? last.moves.filter((m) => m.moved) : [];
  return [
    h(
      'p',
      {},
      'State ',
      h(
        'b',
        {
          id: 'consumption-state',
          class: `consumption-state ${c.state}`,
          dataset: { state: c.state },
        },
        c.state,
      ),
      ' · paused shards ',
      h('span', { id: 'paused-shards' }, list(c.pausedShards)),
    ),
    reset
      ? h(
          'div',
          { id: 'reset-progress', class: 'reset', dataset: { stage: reset.stage, moved } },
          h(
            'p',
            {},
            `Reset ${reset.resetId} to ${targetText(reset.to)}: `,
            h('b', { class: 'reset-stage' }, reset.stage),
            reset.stage === 'pausing' ? ' (waiting for members to give the shards up)' : '',
            `, ${moved} of ${reset.moves.length} shards moved`,
          ),
          h('progress', { max: reset.moves.length, value: moved }),
          h(
            'p',
            { class: 'hint-text' },
            `Requested by ${reset.requestedBy}: ${reset.reason}; started `,
            time(reset.startedAt),
          ),
        )
      : null,
    last
      ? h(
          'p',
          { id: 'last-reset', dataset: { resetId: last.resetId } },
          `Last reset ${last.resetId} to ${targetText(last.to)}: ${last.cancelled ? 'cancelled' : 'done'} `,
          time(last.completedAt),
          `, ${lastMoved.length} of ${last.moves.length} shard(s) moved: ${count(sum(lastMoved, 'redeliver'))} entries delivered again, ${count(sum(lastMoved, 'skip'))} skipped (requested by ${last.requestedBy}: ${last.reason})`,
        )
      : null,
  ].filter(Boolean);
}

/** A plan of a reset: per shard the position now and the new one, entries again and skipped. */
function planView(reply) {
  const changing = reply.plan.filter((p) => p.from !== p.to);
  return [
    table(
      [
        ['Shard', (p) => p.shard],
        ['From', (p) => p.from ?? '(no consumer group)'],
        ['To', (p) => p.to],
        ['Redeliver', (p) => counted(p.redeliver, p.exact)],
        ['Skip', (p) => counted(p.skip, p.exact)],
        ['Pending skipped', (p) => count(p.pendingSkipped)],
      ],
      reply.plan,
      { id: 'reset-plan-table' },
      (p) => ({ dataset: { shard: p.shard, changes: p.from !== p.to } }),
    ),
    h(
      'p',
      { id: 'reset-plan-summary' },
      reply.changes === 0
        ? 'Nothing to change: every shard is at that position.'
        : `${reply.changes} of ${reply.plan.length} shard(s) change: ${count(sum(changing, 'redeliver'))} entries delivered again, ${count(sum(changing, 'skip'))} skipped.`,
    ),
  ];
}

/**
 * The "Reset positions" dialog: where to and which shards, then Plan (a dry run that changes
 * nothing) and only then Execute, which asks once more and starts the reset with the plan's
 * request id (a second click answers the same reset). `onStarted` gets the API's answer.
 */
function openResetDialog({ label, admin, onStarted }) {
  let dialog = document.getElementById('reset-dialog');
  if (!dialog) {
    dialog = h('dialog', { id: 'reset-dialog' });
    document.body.append(dialog);
  }
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const to = h(
    'select',
    { name: 'to' },
    h('option', { value: 'earliest' }, 'earliest: every entry again'),
    h('option', { value: 'latest' }, 'latest: skip every entry there now'),
    h('option', { value: 'datetime' }, 'a date and time: from the first entry at or after it'),
  );
  const at = h('input', { name: 'at', type: 'datetime-local', step: 1, disabled: true });
  const shards = h('input', { name: 'shards', placeholder: 'every shard, or e.g. 0,2' });
  const requestedBy = h('input', {
    name: 'requestedBy',
    required: true,
    value: session.user?.username ?? '',
  });
  const reason = h('input', { name: 'reason', required: true });
  const result = h('div', { id: 'reset-plan-result' });
  const planButton = h('button', { type: 'button', id: 'reset-plan' }, 'Plan');
  const executeButton = h(
    'button',
    { type: 'button', id: 'reset-execute', disabled: true },
    'Execute…',
  );
  const form = h(
    'form',
    { method: 'dialog', id: 'reset-form' },
    h('h3', {}, `Reset positions of ${label}`),
    h(
      'p',
      { class: 'hint-text' },
      'Moving back delivers entries again, moving forward skips them. Plan first: it changes nothing.',
    ),
    h('label', {}, 'To', to),
    h('label', {}, `Date and time (${zone})`, at),
    h('label', {}, 'Shards', shards),
    h('label', {}, 'Requested by', requestedBy),
    h('label', {}, 'Reason', reason),
    result,
    h(
      'menu',
      {},
      h('button', { value: 'cancel', formnovalidate: true }, 'Close'),
      planButton,
      executeButton,
    ),
  );
  dialog.replaceChildren(form);
  let plan = null; // the plan shown: { body, reply, requestId }
  const say = (error) =>
    result.replaceChildren(
      h(
        'p',
        { class: 'error', role: 'alert' },
        typeof error === 'string' ? error : errorText(error),
      ),
    );
  form.addEventListener('input', (event) => {
    at.disabled = to.value !== 'datetime';
    at.required = to.value === 'datetime';
    // Who and why may change after the plan; where to and which shards may not.
    if (event.target === reason || event.target === requestedBy) return;
    plan = null;
    executeButton.disabled = true;
    result.replaceChildren();
  });
  const bodyOf = () => {
    const target = to.value === 'datetime' ? { timestamp: new Date(at.value).getTime() } : to.value;
    if (typeof target === 'object' && !Number.isFinite(target.timestamp))
      return 'Choose the date and time.';
    const text = shards.value.trim();
    const parts = text === '' ? null : text.split(',').map((part) => part.trim());
    if (parts && parts.some((part) => !/^\d{1,7}$/.test(part)))
      return 'Shards: shard numbers separated by commas, e.g. 0,2 (or empty for every shard).';
    return { to: target, ...(parts ? { shards: parts.map(Number) } : {}) };
  };
  const who = () => ({ requestedBy: requestedBy.value, reason: reason.value });
  planButton.addEventListener('click', async () => {
    if (!form.reportValidity()) return;
    const body = bodyOf();
    if (typeof body === 'string') return say(body);
    planButton.disabled = true;
    try {
      const reply = await post(`${admin}/positions`, { ...body, ...who(), dryRun: true });
      result.replaceChildren(...planView(reply));
      plan = reply.changes > 0 ? { body, reply, requestId: newRequestId() } : null;
      executeButton.disabled = plan === null;
    } catch (error) {
      plan = null;
      executeButton.disabled = true;
      say(error);
    } finally {
      planButton.disabled = false;
    }
  });
  executeButton.addEventListener('click', async () => {
    if (!plan || !form.reportValidity()) return;
    const changing = plan.reply.plan.filter((p) => p.from !== p.to);
    const question =
      `Move ${changing.length} shard(s) of ${label}? ${count(sum(changing, 'redeliver'))} entries ` +
      `will be delivered again and ${count(sum(changing, 'skip'))} skipped; the shards are ` +
      'paused while they move.';
    if (!window.confirm(question)) return;
    executeButton.disabled = true;
    try {
      const reply = await post(
        `${admin}/positions`,
        { ...plan.body, ...who(), dryRun: false },
        { 'x-request-id': plan.requestId },
      );
      if (reply.reset === null) {
        result.replaceChildren(...planView(reply));
        return;
      }
      dialog.close();
      onStarted(reply);
    } catch (error) {
      executeButton.disabled = false;
      say(error);
    }
  });
  dialog.returnValue = '';
  dialog.showModal();
}

function migrationsPanel(migrations, onRollback) {
  const active = migrations.active;
  const p = active?.progress;
  // Converged shards and members reporting exactly their assignment, as one fraction.
  const total = p ? p.shardsTotal + p.membersTotal : 0;
  const percent =
    p && total > 0 ? Math.round((100 * (p.shardsConverged + p.membersReporting)) / total) : 100;
  return h(
    'section',
    { id: 'migrations' },
    h('h3', {}, 'Migrations'),
    active
      ? h(
          'div',
          { class: 'migration', id: 'active-migration', dataset: { state: active.state } },
          h(
            'p',
            {},
            `${active.kind} ${active.fromShardCount} → ${active.toShardCount}: `,
            h('b', { class: `migration-state ${active.state}` }, active.state),
            ', started ',
            time(active.startedAt),
            ` by ${active.requestedBy}`,
            active.rollbackAllowedUntil && active.state === 'CONVERGED'
              ? [', rollback allowed until ', time(active.rollbackAllowedUntil)]
              : null,
          ),
          h('progress', { max: 100, value: percent, id: 'migration-progress' }),
          p
            ? h(
                'p',
                { class: 'progress' },
                `shards converged ${p.shardsConverged}/${p.shardsTotal}, members reporting ${p.membersReporting}/${p.membersTotal}`,
                p.removedShardsRemaining.length > 0
                  ? `, removed shards retiring: ${list(p.removedShardsRemaining)}`
                  : '',
              )
            : null,
          active.rollbackAllowed
            ? changeButton({ id: 'rollback', onclick: () => onRollback(active) }, 'Roll back')
            : null,
        )
      : h('p', {}, 'No active migration.'),
    table(
      [
        ['Kind', (m) => m.kind],
        ['From → to', (m) => `${m.fromShardCount} → ${m.toShardCount}`],
        ['State', (m) => h('span', { class: `migration-state ${m.state}` }, m.state)],
        ['Started', (m) => time(m.startedAt)],
        ['Converged', (m) => time(m.convergedAt)],
        ['Completed', (m) => time(m.completedAt)],
        ['By', (m) => m.requestedBy],
        ['Reason', (m) => m.reason],
      ],
      migrations.migrations ?? [],
      { id: 'migration-history' },
    ),
  );
}

async function renderGroup(sp, cg) {
  const path = groupPath(sp, cg);
  const admin = `/admin${path}`;
  const parts = {
    hints: h('span', { class: 'hints', id: 'hints' }),
    summary: h('section', { id: 'summary' }),
    actions: h('div', { class: 'actions' }),
    consumption: h('section', { id: 'consumption' }),
    members: h('section', { id: 'members' }),
    shards: h('section', { id: 'shards' }),
    lag: h('div', { id: 'lag-panel' }),
    migrations: h('div'),
    chart: h('div', { id: 'statechart', class: 'statechart' }),
    transitions: h('ol', { id: 'transitions', class: 'timeline' }),
  };
  // Said once while the group cannot be read (its owner died, the coordinator is down), gone
  // once it can: what the page shows stays, marked as old, with when it was read.
  const problem = h('p', { class: 'error', id: 'refresh-problem', role: 'alert', hidden: true });
  let readAt = null;
  // Whether the transitions below are live: `live`, `connecting`, or `reconnecting` (with why).
  const liveStatus = h(
    'small',
    { id: 'live-status', class: 'live-status', dataset: { state: 'connecting' } },
    'connecting…',
  );
  const chartTool = (id, label, title, onclick) =>
    h('button', { type: 'button', id, title, onclick }, label);
  const zoomTo = (zoom) => {
    chartZoom = zoom;
    sizeDiagrams(parts.chart);
  };
  main.replaceChildren(
    h('h2', {}, `${sp}:${cg} `, parts.hints),
    problem,
    parts.summary,
    parts.actions,
    parts.consumption,
    h(
      'section',
      { id: 'what-happened' },
      h('h3', {}, 'What just happened ', liveStatus),
      h(
        'p',
        { class: 'hint-text' },
        "The group's recent transitions as its owner keeps them, newest first, then live: " +
          'the command, what it changed, and who or what caused it.',
      ),
      parts.transitions,
    ),
    h('section', { id: 'lag' }, h('h3', {}, 'Lag'), parts.lag),
    parts.members,
    parts.shards,
    parts.migrations,
    h(
      'section',
      { id: 'statechart-section' },
      h(
        'h3',
        {},
        'Statechart ',
        h(
          'span',
          { class: 'chart-tools' },
          chartTool('chart-zoom-out', '−', 'Zoom out', () => zoomTo(zoomStep(parts.chart, -1))),
          chartTool('chart-fit', 'Fit', 'Fit each region to its column', () => zoomTo('fit')),
          chartTool('chart-actual', '100 %', 'Natural size', () => zoomTo(1)),
          chartTool('chart-zoom-in', '+', 'Zoom in', () => zoomTo(zoomStep(parts.chart, +1))),
          h('output', { id: 'chart-zoom' }, 'fit'),
        ),
      ),
      parts.chart,
    ),
  );
  const history = timeline(parts.transitions);
  const lagKey = `coord.lag:${sp}:${cg}`;
  let gone = false;

  const change = async (title, call, fields) => {
    if (!canWrite()) return showError(new ApiError(403, 'FORBIDDEN', NEEDS_WRITE));
    const values = await ask(title, fields);
    if (!values) return;
    try {
      await call(values);
      await refresh();
    } catch (error) {
      if (!loginEnded(error)) showError(error);
    }
  };

  // Consumption: the state is drawn at each load; the buttons are made once (a click is never
  // lost to a refresh), each asking for the reason the audit records.
  const consumption = (title, body) =>
    change(title, (v) =>
      post(`${admin}/consumption`, { ...body, requestedBy: v.requestedBy, reason: v.reason }),
    );
  const toggleShard = (shard, pause) =>
    consumption(`${pause ? 'Pause' : 'Resume'} consumption of shard ${shard}`, {
      action: pause ? 'PAUSE' : 'RESUME',
      shards: [shard],
    });
  const consumptionState = h('div', { id: 'consumption-status' });
  // Enabled while a reset is under way (set at each load).
  const cancelReset = changeButton(
    {
      id: 'cancel-reset',
      disabled: true,
      onclick: () =>
        consumption('Cancel the position reset where it got to', { action: 'CANCEL_RESET' }),
    },
    'Cancel reset…',
  );
  parts.consumption.append(
    h('h3', {}, 'Consumption'),
    consumptionState,
    h(
      'div',
      { class: 'actions' },
      changeButton(
        {
          id: 'pause-all',
          onclick: () => consumption('Pause consumption of every shard', { action: 'PAUSE' }),
        },
        'Pause all…',
      ),
      changeButton(
        {
          id: 'resume-all',
          onclick: () => consumption('Resume consumption of every shard', { action: 'RESUME' }),
        },
        'Resume all…',
      ),
      changeButton(
        {
          id: 'reset-positions',
          onclick: () =>
            openResetDialog({
              label: `${sp}:${cg}`,
              admin,
              onStarted: () => refresh().catch((error) => loginEnded(error) || showError(error)),
            }),
        },
        'Reset positions…',
      ),
      cancelReset,
    ),
    h(
      'p',
      { class: 'hint-text' },
      'A paused shard is taken from its member (which finishes what it has in hand) and read by ' +
        'nobody until resumed; pause or resume one shard with its control in the shard grid. ' +
        'Cancelling a reset ends it where it got to: shards moved so far stay moved, the others ' +
        'keep their positions, and all are read again.',
    ),
  );

  const load = async () => {
    const [group, members, assignments, migrations, chart, lag] = await Promise.all([
      get(`/monitoring${path}`),
      get(`/monitoring${path}/members`),
      get(`/monitoring${path}/assignments`),
      get(`/monitoring${path}/migrations`),
      get(`/monitoring${path}/statechart`),
      readLag(path),
    ]);
    if (gone) return;
    readAt = new Date().toISOString();
    parts.hints.replaceChildren(
      ...(group.hints ?? []).map((hint) =>
        h(
          'span',
          {
            class: `hint ${hint}`,
            title: hint === 'FALLING_BEHIND' ? 'its lag grew at each of the last refreshes' : '',
          },
          hint,
        ),
      ),
    );
    const now = Date.now();
    const samples =
      lag.lag?.available && lag.lag.totals
        ? keepLagSample(lagKey, {
            t: now,
            entries: lag.lag.totals.lagEntries,
            seconds: lag.lag.totals.maxLagSeconds,
          })
        : lagSamples(lagKey);
    parts.lag.replaceChildren(...lagPanel(lag, samples, now));
    parts.summary.replaceChildren(
      h(
        'dl',
        { class: 'summary' },
        [
          [
            'Status',
            h('span', { class: `status ${group.status}`, id: 'group-status' }, group.status),
          ],
          ['Phase', h('span', { id: 'group-phase' }, group.phase)],
          ['Shards', h('span', { id: 'shard-count' }, group.shardCount)],
          ['Metadata version', group.metadataVersion],
          ['Assignment epoch', group.assignmentEpoch],
          ['Owner', group.owner ?? '–'],
          ['Producers', group.producersPaused ? 'paused' : 'running'],
          ['Lifecycle', group.lifecycleId],
          group.failureReason ? ['Failure', group.failureReason] : null,
        ]
          .filter(Boolean)
          .map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]),
      ),
    );
    const failed = group.status === 'FAILED_CLOSED';
    // The buttons are made again only when what they offer changes: a click is never lost to
    // a refresh.
    const offer = `${group.status}:${group.shardCount}`;
    if (parts.actions.dataset.offer !== offer) {
      parts.actions.dataset.offer = offer;
      parts.actions.replaceChildren(
        failed
          ? changeButton(
              {
                id: 'recover',
                onclick: () =>
                  change(
                    'Recover the group',
                    (v) =>
                      post(
                        `${admin}/recovery`,
                        v.action === 'RESUME'
                          ? { action: v.action, requestedBy: v.requestedBy, reason: v.reason }
                          : v,
                      ),
                    [
                      { name: 'action', label: 'Action', options: ['RESUME', 'RECREATE'] },
                      {
                        name: 'shardCount',
                        label: 'Shard count (RECREATE)',
                        type: 'number',
                        value: group.shardCount || 1,
                        min: 1,
                      },
                    ],
                  ),
              },
              'Recover…',
            )
          : changeButton(
              {
                id: 'scale',
                onclick: () =>
                  change('Scale the group', (v) => post(`${admin}/scale`, v), [
                    {
                      name: 'shardCount',
                      label: 'New shard count',
                      type: 'number',
                      value: group.shardCount,
                      min: 1,
                    },
                  ]),
              },
              'Scale…',
            ),
        failed
          ? null
          : group.status === 'FROZEN'
            ? changeButton(
                {
                  id: 'unfreeze',
                  onclick: () =>
                    change('Unfreeze admin changes', (v) => post(`${admin}/unfreeze`, v)),
                },
                'Unfreeze…',
              )
            : changeButton(
                {
                  id: 'freeze',
                  onclick: () => change('Freeze admin changes', (v) => post(`${admin}/freeze`, v)),
                },
                'Freeze…',
              ),
      );
    }
    parts.members.replaceChildren(
      h('h3', {}, `Members (${members.members.length})`),
      table(
        [
          ['Member', (m) => m.memberId],
          // The member's chart state, as the coordinator derives it (`memberState`).
          ['State', (m) => h('span', { class: `member-state ${m.state}` }, m.state)],
          ['Epoch', (m) => m.memberEpoch],
          ['Assigned', (m) => list(m.assignedShards)],
          ['Revoking', (m) => list(m.revokeShards)],
          ['Retiring', (m) => list(m.retireShards)],
          ['Target', (m) => list(m.targetShards)],
          ['Last heartbeat', (m) => time(m.lastHeartbeatAt)],
          ['Expires', (m) => time(m.sessionExpiresAt)],
          ['Client', (m) => m.clientId ?? '–'],
        ],
        members.members,
        { id: 'members-table' },
      ),
    );
    consumptionState.replaceChildren(...consumptionStatus(group.consumption));
    cancelReset.disabled = !canWrite() || group.consumption.reset === null;
    // Drawn again only when it changed, so a click on a shard's control is not lost.
    const grid = JSON.stringify([assignments.shards, group.consumption.pausedShards]);
    if (parts.shards.dataset.grid !== grid) {
      parts.shards.dataset.grid = grid;
      parts.shards.replaceChildren(
        h('h3', {}, 'Shards'),
        h(
          'p',
          { class: 'legend' },
          ['assigned', 'revoking', 'released', 'retiring'].map((s) =>
            h('span', { class: `shard ${s}` }, s),
          ),
          h('span', { class: 'shard released paused' }, 'paused'),
        ),
        shardGrid(assignments, group.consumption.pausedShards, toggleShard),
      );
    }
    parts.migrations.replaceChildren(
      migrationsPanel(migrations, (active) =>
        change(`Roll back ${active.kind} ${active.fromShardCount} → ${active.toShardCount}`, (v) =>
          post(`${admin}/migrations/${encodeURIComponent(active.migrationId)}/rollback`, v),
        ),
      ),
    );
    await drawStatechart(parts.chart, chart);
  };

  // One load at a time, in order: a load asked for while one runs starts after it (so what a
  // change did is what the page shows), and everyone asking meanwhile shares that one.
  let running = null;
  let next = null;
  const refresh = () => {
    if (!running) {
      running = load().finally(() => {
        running = null;
      });
      return running;
    }
    next ??= running
      .catch(() => undefined)
      .then(() => {
        next = null;
        return refresh();
      });
    return next;
  };

  const fresh = () => {
    problem.hidden = true;
    delete main.dataset.stale;
  };
  const stale = (error) => {
    if (gone) return;
    problem.replaceChildren(
      `Not up to date: the group could not be read (${errorText(error)}); shown as read at `,
      time(readAt),
      `, trying again every ${LAG_SAMPLE_MS / 1000} s.`,
    );
    problem.hidden = false;
    main.dataset.stale = '';
  };
  let pending = null;
  const soon = () => {
    pending ??= setTimeout(() => {
      pending = null;
      refresh().then(fresh, (error) => loginEnded(error) || stale(error));
    }, 200);
  };
  // The live stream first, so that nothing between the kept list and the stream is missed. A
  // stream that ends (the group moved to another replica, the owner died, the connection was
  // cut) is opened again after a pause, growing while it keeps failing; once it is open again
  // the kept list is read again, so what happened meanwhile shows too (each transition once).
  const early = [];
  let kept = false;
  let stop = () => {};
  let retry = null;
  let failures = 0;
  const setLive = (state, text) => {
    liveStatus.dataset.state = state;
    liveStatus.textContent = text;
  };
  const catchUp = () =>
    get(`/monitoring${path}/transitions`)
      .then((reply) => !gone && history.add(reply.transitions))
      .catch(() => undefined); // the next reconnection or refresh says what is wrong
  const connect = () => {
    retry = null;
    let opened = false;
    stop = follow(
      `/monitoring${path}/events`,
      (name, data) => {
        if (name === 'snapshot' && !opened) {
          opened = true;
          failures = 0;
          setLive('live', 'live');
          if (kept) {
            void catchUp();
            soon();
          }
        }
        if (name !== 'transition') return;
        if (kept) history.add([data]);
        else early.push(data);
        soon();
      },
      (error) => {
        if (gone || loginEnded(error)) return;
        failures += 1;
        const wait = Math.min(RECONNECT_MAX_MS, RECONNECT_MS * 2 ** (failures - 1));
        setLive(
          'reconnecting',
          `not live: ${error ? errorText(error) : 'the stream ended'}; reconnecting…`,
        );
        retry = setTimeout(connect, wait);
      },
    );
  };
  connect();
  const onResize = () => chartZoom === 'fit' && sizeDiagrams(parts.chart);
  window.addEventListener('resize', onResize);
  let timer = null;
  leave = () => {
    gone = true;
    clearInterval(timer);
    clearTimeout(pending);
    clearTimeout(retry);
    stop();
    window.removeEventListener('resize', onResize);
  };
  try {
    const [, transitions] = await Promise.all([refresh(), get(`/monitoring${path}/transitions`)]);
    history.add([...transitions.transitions, ...early]);
    kept = true;
  } catch (error) {
    leave();
    throw error;
  }
  if (gone) return; // left while it loaded: start no timer that nothing would stop
  timer = setInterval(soon, LAG_SAMPLE_MS); // liveness and lag change without transitions
}

/** How often the group page reads the group again (and samples its lag). */
const LAG_SAMPLE_MS = 2000;
/** The pause before the live stream is opened again; doubled at each failure, up to the max. */
const RECONNECT_MS = 1000;
const RECONNECT_MAX_MS = 15_000;

// ---------------------------------------------------------------------------------------------
// Audit log and replicas

async function renderAudit(params) {
  const query = new URLSearchParams({ limit: params.get('limit') ?? '100' });
  for (const key of ['streamPrefix', 'consumerGroup'])
    if (params.get(key)) query.set(key, params.get(key));
  const shown = routed;
  const reply = await get(`/monitoring/audit?${query}`);
  if (shown !== routed) return; // left meanwhile: another page shows
  const records = reply.records ?? reply.audit ?? reply.entries ?? [];
  const form = h(
    'form',
    { class: 'filters' },
    h('input', {
      name: 'streamPrefix',
      placeholder: 'stream prefix',
      value: params.get('streamPrefix') ?? '',
    }),
    h('input', {
      name: 'consumerGroup',
      placeholder: 'consumer group',
      value: params.get('consumerGroup') ?? '',
    }),
    h('button', { type: 'submit' }, 'Filter'),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const next = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) next.set(k, String(v));
    location.hash = `#/audit?${next}`;
  });
  main.replaceChildren(
    h('h2', {}, 'Audit log'),
    form,
    table(
      [
        ['Time', (r) => time(r.timestamp)],
        ['Operation', (r) => r.operation],
        ['Outcome', (r) => h('span', { class: `outcome ${r.outcome}` }, r.outcome)],
        ['Status', (r) => r.status],
        ['Principal', (r) => r.principal ?? '–'],
        ['Group', (r) => (r.streamPrefix ? `${r.streamPrefix}:${r.consumerGroup ?? ''}` : '–')],
        ['Requested by', (r) => r.requestedBy ?? '–'],
        ['Reason', (r) => r.reason ?? '–'],
      ],
      records,
      { id: 'audit-table' },
    ),
  );
}

/** A replica's leases: each group it holds, linked to its page, with how long it has held it. */
function leaseList(replica) {
  if (!('leases' in replica)) {
    return h('span', { class: 'muted' }, 'no leases: one replica serves every group');
  }
  const leases = replica.leases ?? [];
  const shown =
    leases.length === 0
      ? h('span', { class: 'muted' }, 'none')
      : h(
          'ul',
          { class: 'leases' },
          leases.map((l) =>
            h(
              'li',
              { dataset: { group: `${l.streamPrefix}:${l.consumerGroup}` } },
              h(
                'a',
                {
                  href: `#/groups/${encodeURIComponent(l.streamPrefix)}/${encodeURIComponent(l.consumerGroup)}`,
                },
                `${l.streamPrefix}:${l.consumerGroup}`,
              ),
              h('small', {}, ` held ${duration(l.ageMs)}`),
            ),
          ),
        );
  const more = (replica.groupsOwned ?? 0) - leases.length;
  return [shown, more > 0 ? h('small', { class: 'muted' }, `and ${more} more`) : null];
}

async function renderReplicas() {
  const shown = routed;
  try {
    const reply = await get('/monitoring/replicas');
    if (shown !== routed) return; // left meanwhile: another page shows
    main.replaceChildren(
      h('h2', {}, 'Replicas'),
      table(
        [
          [
            'Replica',
            (r) => [
              r.replicaId ?? r.id,
              r.replicaId === reply.self ? h('small', { class: 'self' }, ' (this one)') : null,
            ],
          ],
          ['URL', (r) => r.advertisedUrl ?? r.url ?? '–'],
          ['Groups owned', (r) => r.groupsOwned ?? (r.groups ? r.groups.length : '–')],
          ['Groups and leases (held longest first)', leaseList],
          [
            'Last registry heartbeat',
            (r) => time(r.lastHeartbeatAt ?? r.lastSeenAt ?? r.heartbeatAt),
          ],
        ],
        reply.replicas ?? [],
        { id: 'replicas-table' },
        (r) => ({ dataset: { replica: r.replicaId ?? r.id } }),
      ),
    );
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 404)) throw error;
    const info = await get('/monitoring/info');
    if (shown !== routed) return;
    main.replaceChildren(
      h('h2', {}, 'Replicas'),
      h('p', {}, `One replica: ${info.replicaId ?? info.replica ?? 'this coordinator'}.`),
    );
  }
}

// ---------------------------------------------------------------------------------------------
// Router

/**
 * Shows `hash`: setting it routes (through `hashchange`), unless it is already shown, which
 * routes here. Never both: two pages built at once would leave one of them running unseen.
 */
function go(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

/** Counts the pages routed to: a page whose number is no longer this one was left meanwhile. */
let routed = 0;

async function route() {
  routed += 1;
  leave();
  leave = () => {};
  delete main.dataset.stale;
  const [path, search = ''] = location.hash.replace(/^#/, '').split('?');
  const params = new URLSearchParams(search);
  const user = session.user;
  document.getElementById('whoami').textContent = user
    ? `${user.username} (${user.roles.join(', ')})`
    : '';
  document.getElementById('logout').hidden = !session.token;
  if (!session.token) return renderLogin();
  let parts;
  try {
    parts = (path ?? '').split('/').filter(Boolean).map(decodeURIComponent);
  } catch {
    // A link cut in the middle of an escape: say so, rather than leave the last page up.
    main.replaceChildren();
    return showError(`Not a page of this UI: ${location.hash} (a broken %-escape)`);
  }
  try {
    if (parts[0] === 'groups' && parts.length === 3) await renderGroup(parts[1], parts[2]);
    else if (parts[0] === 'audit') await renderAudit(params);
    else if (parts[0] === 'replicas') await renderReplicas();
    else await renderGroups(params);
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return renderLogin();
    main.replaceChildren();
    showError(error);
  }
}

// Edge labels get a margin of their own: mermaid lays labels out by their boxes, and without
// it two long labels of opposite edges can end up touching; a little more room between ranks
// keeps the labels of the consumption region's edges, which join every state to every other,
// apart. The Fit zoom then scales the regions to their columns.
window.mermaid.initialize({
  startOnLoad: false,
  securityLevel: 'strict',
  theme: 'neutral',
  themeVariables: { fontSize: '14px' },
  themeCSS: '.edgeLabel p { padding: 4px 8px; }',
  state: { rankSpacing: 60 },
});
document.getElementById('logout').addEventListener('click', () => {
  session.clear();
  go('#/');
});
window.addEventListener('hashchange', route);
route();
