// Overview: the catalog's counts by health and verification (/api/v1/stats), recent card
// changes, and the refresh failures of /api/v1/status when the viewer may read it.

import {api} from './api.js';
import {badge, errorNotice, h, notice, replace, t, when} from './dom.js';

export async function render(ctx) {
  const {main} = ctx;
  const stats = h('section', {'aria-labelledby': 'h-counts'}, h('h2', {id: 'h-counts'}, 'Agents'),
    h('p', {class: 'muted'}, 'Loading…'));
  const changes = h('section', {'aria-labelledby': 'h-changes'},
    h('h2', {id: 'h-changes'}, 'Recent card changes'), h('p', {class: 'muted'}, 'Loading…'));
  const failures = h('section', {'aria-labelledby': 'h-failures'},
    h('h2', {id: 'h-failures'}, 'Recent refresh failures'), h('p', {class: 'muted'}, 'Loading…'));
  replace(main, h('h1', null, 'Overview'), stats, h('div', {class: 'two'}, changes, failures));
  await Promise.all([drawStats(stats), drawChanges(changes), drawStatus(failures)]);
  return {title: 'Overview'};
}

function counts(title, values, link) {
  const entries = Object.entries(values || {}).sort((a, b) => b[1] - a[1]);
  return h('div', {class: 'tile'}, h('h3', null, title),
    entries.length === 0 ? h('p', {class: 'muted'}, 'none') : h('ul', {class: 'counts'},
      entries.map(([status, n]) => h('li', null,
        link ? h('a', {href: `/ui/?${link}=${encodeURIComponent(status)}`}, badge(status)) : badge(status),
        h('span', {class: 'count'}, String(n))))));
}

async function drawStats(section) {
  try {
    const stats = await api('/api/v1/stats');
    replace(section, section.firstChild,
      h('p', {class: 'big'}, h('strong', null, String(stats.agents)), ' agents, ',
        h('strong', null, String(stats.skills)), ' skills'),
      h('div', {class: 'tiles'},
        counts('Health', stats.by_health, 'health'),
        counts('Signatures', stats.by_verification, 'verification'),
        counts('Protocol versions', stats.by_protocol_version, 'protocol_version')));
  } catch (error) {
    replace(section, section.firstChild, errorNotice(error));
  }
}

async function drawChanges(section) {
  try {
    const page = await api('/api/v1/agents?limit=200');
    const recent = (page.agents || [])
      .filter((a) => a.updated_at)
      .sort((a, b) => String(b.updated_at).localeCompare(String(a.updated_at)))
      .slice(0, 10);
    replace(section, section.firstChild, recent.length === 0 ? notice('info', 'No agents yet.')
      : h('ol', {class: 'plain'}, recent.map((a) => h('li', null,
        h('a', {href: `/ui/agents/${encodeURIComponent(a.id)}`}, t(a.name || a.id, 120)),
        ' ', when(a.updated_at)))),
    page.next_cursor ? h('p', {class: 'muted'}, 'Among the first 200 agents.') : null);
  } catch (error) {
    replace(section, section.firstChild, errorNotice(error));
  }
}

async function drawStatus(section) {
  let status;
  try {
    status = await api('/api/v1/status');
  } catch (error) {
    const why = error.status === 403
      ? notice('info', 'Refresh failures need the reader or admin role.') : errorNotice(error);
    replace(section, section.firstChild, why);
    return;
  }
  const rows = status.refresh_failures || [];
  replace(section, section.firstChild,
    rows.length === 0 ? notice('ok', 'No agent failed its last check.')
      : h('ul', {class: 'plain'}, rows.map((f) => h('li', null,
        h('a', {href: `/ui/agents/${encodeURIComponent(f.agent_id)}`}, t(f.agent_id, 80)), ' ',
        badge(f.health), ' ', when(f.last_failure),
        h('div', {class: 'muted clip'}, t(f.last_error, 400))))),
    h('h3', null, `Routing decisions (last ${status.decisions?.minutes ?? '?'} minutes)`),
    h('ul', {class: 'counts'}, Object.entries(status.decisions?.by_tier || {}).map(([tier, n]) =>
      h('li', null, h('span', {class: 'badge badge-version'}, tier), h('span', {class: 'count'}, String(n))))));
}
