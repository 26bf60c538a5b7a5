// The operator's web UI: a hash-routed single page on the coordinator's own API. Everything it
// shows comes from the monitoring endpoints; every change goes through the admin API (and so is
// audited) with the `requestedBy` and `reason` the operator types in.
import { ApiError, follow, get, groupPath, login, post, session } from './api.js';

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

const time = (iso) => (iso ? new Date(iso).toLocaleTimeString() : '–');
const list = (shards) => (shards && shards.length > 0 ? shards.join(', ') : '–');

function table(columns, rows, attrs = {}) {
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
              {},
              columns.map(([, cell]) => h('td', {}, cell(row))),
            ),
          ),
    ),
  );
}

function showError(error, where = main) {
  const text = error instanceof ApiError ? `${error.code}: ${error.message}` : String(error);
  where.prepend(h('p', { class: 'error', role: 'alert' }, text));
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
      location.hash = '#/groups';
      route();
    } catch (error) {
      showError(error, form);
    }
  });
  main.replaceChildren(form);
}

// ---------------------------------------------------------------------------------------------
// Groups

async function renderGroups(params) {
  const cursors = params.get('trail')?.split(',').filter(Boolean) ?? [];
  const cursor = cursors.at(-1);
  const query = new URLSearchParams({ limit: '50' });
  if (cursor) query.set('cursor', cursor);
  const page = await get(`/monitoring/groups?${query}`);
  const filter = h('input', {
    type: 'search',
    placeholder: 'filter by name, status or phase',
    id: 'group-filter',
    value: params.get('filter') ?? '',
  });
  const holder = h('div');
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
          ['Owner', (g) => g.owner ?? '–'],
        ],
        rows,
        { id: 'groups-table' },
      ),
    );
  };
  filter.addEventListener('input', draw);
  draw();
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
async function drawStatechart(holder, chart) {
  const active = activeStateIds(chart.machineId, chart.value);
  const text = chart.mermaid.includes('classDef current')
    ? chart.mermaid
    : `${chart.mermaid}  classDef active fill:#ffd166,stroke:#b35c00,stroke-width:3px\n${active
        .map((id) => `  class ${id} active\n`)
        .join('')}`;
  holder.dataset.active = active.join(' ');
  if (holder.dataset.source === text) return;
  holder.dataset.source = text;
  try {
    const { svg } = await window.mermaid.render(`statechart-${++diagramCount}`, text);
    holder.innerHTML = svg; // mermaid's own SVG output, rendered with securityLevel 'strict'
  } catch (error) {
    holder.replaceChildren(h('pre', {}, text));
    showError(error, holder);
  }
}

function memberState(m) {
  if (m.state) return m.state;
  if (m.revokeShards.length > 0) return 'revoking';
  if (m.targetShards.some((s) => !m.assignedShards.includes(s))) return 'waiting';
  return 'stable';
}

function shardGrid(assignments) {
  return h(
    'div',
    { class: 'shard-grid', id: 'shard-grid' },
    assignments.shards.map((s) =>
      h(
        'div',
        {
          class: `shard ${s.state}`,
          dataset: { shard: s.shard, state: s.state, owner: s.owner ?? '' },
          title: `shard ${s.shard}: ${s.state}, owner ${s.owner ?? 'none'}, target ${s.target ?? 'none'}`,
        },
        h('b', {}, s.shard),
        h('small', {}, s.owner ?? '—'),
        s.target && s.target !== s.owner ? h('small', { class: 'target' }, `→ ${s.target}`) : null,
      ),
    ),
  );
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
            h('b', {}, active.state),
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
            ? h(
                'button',
                { type: 'button', id: 'rollback', onclick: () => onRollback(active) },
                'Roll back',
              )
            : null,
        )
      : h('p', {}, 'No active migration.'),
    table(
      [
        ['Kind', (m) => m.kind],
        ['From → to', (m) => `${m.fromShardCount} → ${m.toShardCount}`],
        ['State', (m) => m.state],
        ['Started', (m) => time(m.startedAt)],
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
    summary: h('section', { id: 'summary' }),
    actions: h('div', { class: 'actions' }),
    members: h('section', { id: 'members' }),
    shards: h('section', { id: 'shards' }),
    migrations: h('div'),
    chart: h('div', { id: 'statechart', class: 'statechart' }),
    transitions: h('ol', { id: 'transitions', reversed: true }),
  };
  main.replaceChildren(
    h('h2', {}, `${sp}:${cg}`),
    parts.summary,
    parts.actions,
    parts.members,
    parts.shards,
    parts.migrations,
    h('section', {}, h('h3', {}, 'Statechart'), parts.chart),
    h('section', {}, h('h3', {}, 'Transitions (live)'), parts.transitions),
  );

  const change = async (title, call, fields) => {
    const values = await ask(title, fields);
    if (!values) return;
    try {
      await call(values);
      await refresh();
    } catch (error) {
      showError(error);
    }
  };

  const refresh = async () => {
    const [group, members, assignments, migrations, chart] = await Promise.all([
      get(`/monitoring${path}`),
      get(`/monitoring${path}/members`),
      get(`/monitoring${path}/assignments`),
      get(`/monitoring${path}/migrations`),
      get(`/monitoring${path}/statechart`),
    ]);
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
    parts.actions.replaceChildren(
      failed
        ? h(
            'button',
            {
              type: 'button',
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
        : h(
            'button',
            {
              type: 'button',
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
          ? h(
              'button',
              {
                type: 'button',
                id: 'unfreeze',
                onclick: () =>
                  change('Unfreeze admin changes', (v) => post(`${admin}/unfreeze`, v)),
              },
              'Unfreeze…',
            )
          : h(
              'button',
              {
                type: 'button',
                id: 'freeze',
                onclick: () => change('Freeze admin changes', (v) => post(`${admin}/freeze`, v)),
              },
              'Freeze…',
            ),
    );
    parts.members.replaceChildren(
      h('h3', {}, `Members (${members.members.length})`),
      table(
        [
          ['Member', (m) => m.memberId],
          ['State', (m) => h('span', { class: `member-state ${memberState(m)}` }, memberState(m))],
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
    parts.shards.replaceChildren(
      h('h3', {}, 'Shards'),
      h(
        'p',
        { class: 'legend' },
        ['assigned', 'revoking', 'released', 'retiring'].map((s) =>
          h('span', { class: `shard ${s}` }, s),
        ),
      ),
      shardGrid(assignments),
    );
    parts.migrations.replaceChildren(
      migrationsPanel(migrations, (active) =>
        change(`Roll back ${active.kind} ${active.fromShardCount} → ${active.toShardCount}`, (v) =>
          post(`${admin}/migrations/${encodeURIComponent(active.migrationId)}/rollback`, v),
        ),
      ),
    );
    await drawStatechart(parts.chart, chart);
  };

  let pending = null;
  const soon = () => {
    pending ??= setTimeout(() => {
      pending = null;
      refresh().catch((error) => showError(error));
    }, 200);
  };
  await refresh();
  const timer = setInterval(soon, 2000); // liveness changes without transitions
  const stop = follow(
    `/monitoring${path}/events`,
    (name, data) => {
      if (name !== 'transition') return;
      const effects = (data.effects ?? []).map((e) => e.type ?? JSON.stringify(e)).join(', ');
      parts.transitions.prepend(
        h(
          'li',
          { class: data.stateChanged ? 'changed' : '' },
          `${time(data.at)} `,
          h('code', {}, JSON.stringify(data.state)),
          effects ? ` — ${effects}` : '',
        ),
      );
      while (parts.transitions.children.length > 100) parts.transitions.lastChild.remove();
      soon();
    },
    (error) => error && showError(error),
  );
  leave = () => {
    clearInterval(timer);
    clearTimeout(pending);
    stop();
  };
}

// ---------------------------------------------------------------------------------------------
// Audit log and replicas

async function renderAudit(params) {
  const query = new URLSearchParams({ limit: params.get('limit') ?? '100' });
  for (const key of ['streamPrefix', 'consumerGroup'])
    if (params.get(key)) query.set(key, params.get(key));
  const reply = await get(`/monitoring/audit?${query}`);
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
        ['Time', (r) => new Date(r.timestamp).toLocaleString()],
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

async function renderReplicas() {
  try {
    const reply = await get('/monitoring/replicas');
    main.replaceChildren(
      h('h2', {}, 'Replicas'),
      table(
        [
          ['Replica', (r) => r.replicaId ?? r.id],
          ['URL', (r) => r.advertisedUrl ?? r.url ?? '–'],
          ['Groups owned', (r) => r.groupsOwned ?? (r.groups ? r.groups.length : '–')],
          ['Last seen', (r) => time(r.lastHeartbeatAt ?? r.lastSeenAt ?? r.heartbeatAt)],
        ],
        reply.replicas ?? [],
        { id: 'replicas-table' },
      ),
    );
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 404)) throw error;
    const info = await get('/monitoring/info');
    main.replaceChildren(
      h('h2', {}, 'Replicas'),
      h('p', {}, `One replica: ${info.replicaId ?? info.replica ?? 'this coordinator'}.`),
    );
  }
}

// ---------------------------------------------------------------------------------------------
// Router

async function route() {
  leave();
  leave = () => {};
  const [path, search = ''] = location.hash.replace(/^#/, '').split('?');
  const params = new URLSearchParams(search);
  const user = session.user;
  document.getElementById('whoami').textContent = user
    ? `${user.username} (${user.roles.join(', ')})`
    : '';
  document.getElementById('logout').hidden = !session.token;
  if (!session.token) return renderLogin();
  const parts = (path ?? '').split('/').filter(Boolean).map(decodeURIComponent);
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

window.mermaid.initialize({ startOnLoad: false, securityLevel: 'strict', theme: 'neutral' });
document.getElementById('logout').addEventListener('click', () => {
  session.clear();
  location.hash = '#/';
  route();
});
window.addEventListener('hashchange', route);
route();
