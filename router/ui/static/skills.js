// Skills: every skill across agents (a page of /api/v1/skills), searchable, grouped by tag,
// with close skills of different agents side by side (same tag and similar names): the
// overlaps that make routing hesitate.

import {api, query} from './api.js';
import {chips, errorNotice, field, h, notice, replace, t} from './dom.js';

const PAGE_SIZE = 200;
const STOP = new Set(['a', 'an', 'and', 'the', 'of', 'to', 'for', 'in', 'on', 'with']);

function words(text) {
  return new Set(String(text || '').toLowerCase().split(/[^\p{L}\p{N}]+/u)
    .filter((w) => w && !STOP.has(w)).map((w) => w.replace(/s$/, '')));
}

/** How alike two skill names are: the share of words they have in common (Jaccard). */
export function similarity(a, b) {
  const x = words(a.name || a.id);
  const y = words(b.name || b.id);
  if (x.size === 0 || y.size === 0) return 0;
  let both = 0;
  for (const w of x) if (y.has(w)) both += 1;
  return both / (x.size + y.size - both);
}

/** Pairs of skills of different agents sharing a tag, with similar names or the same id. */
export function overlaps(skills) {
  const pairs = [];
  const seen = new Set();
  for (let i = 0; i < skills.length && pairs.length < 50; i += 1) {
    for (let j = i + 1; j < skills.length; j += 1) {
      const a = skills[i];
      const b = skills[j];
      if (a.agent.id === b.agent.id) continue;
      const tags = (a.tags || []).map((x) => x.toLowerCase());
      const shared = (b.tags || []).filter((x) => tags.includes(x.toLowerCase()));
      const score = a.id === b.id ? 1 : similarity(a, b);
      if (shared.length === 0 || score < 0.5) continue;
      const key = `${a.agent.id}/${a.id}|${b.agent.id}/${b.id}`;
      if (!seen.has(key)) {
        seen.add(key);
        pairs.push({a, b, shared, score});
      }
    }
  }
  return pairs;
}

function skillBox(s) {
  return h('div', {class: 'card'},
    h('h4', {class: 'card-title'}, t(s.name || s.id, 200)),
    h('p', {class: 'muted'}, 'of ', h('a', {href: `/ui/agents/${encodeURIComponent(s.agent.id)}`},
      t(s.agent.name || s.agent.id, 120))),
    h('p', {class: 'desc'}, t(s.description, 300)));
}

export async function render(ctx) {
  const {main, params} = ctx;
  const input = h('input', {name: 'q', type: 'search', value: params.get('q') || '', autocomplete: 'off'});
  const form = h('form', {class: 'search', role: 'search', action: '/ui/skills'},
    h('div', {class: 'search-main'}, field('Search skills', input), h('button', {type: 'submit'}, 'Search')));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    ctx.navigate(`/ui/skills${query({q: input.value})}`);
  });
  const body = h('div', null, h('p', {class: 'muted'}, 'Loading…'));
  replace(main, h('h1', null, 'Skills'), form, body);
  let page;
  try {
    page = await api(`/api/v1/skills${query({q: params.get('q'), cursor: params.get('cursor'), limit: PAGE_SIZE})}`);
  } catch (error) {
    replace(body, errorNotice(error));
    return {title: 'Skills'};
  }
  const skills = page.skills || [];
  const byTag = new Map();
  for (const s of skills) {
    const tags = s.tags && s.tags.length ? s.tags : ['(no tag)'];
    for (const tag of new Set(tags.map((x) => String(x).toLowerCase()))) {
      if (!byTag.has(tag)) byTag.set(tag, []);
      byTag.get(tag).push(s);
    }
  }
  const pairs = overlaps(skills);
  const next = page.next_cursor
    ? h('nav', {class: 'pager', 'aria-label': 'Pages'}, h('a', {rel: 'next',
      href: `/ui/skills${query({q: params.get('q'), cursor: page.next_cursor})}`}, 'Next page'))
    : null;
  replace(body,
    skills.length === 0 ? notice('info', 'No skill matches.') : h('p', {class: 'muted'},
      `${skills.length} skill${skills.length === 1 ? '' : 's'} on this page, ${byTag.size} tags`),
    h('section', {'aria-labelledby': 'h-overlaps'}, h('h2', {id: 'h-overlaps'}, 'Close skills of different agents'),
      pairs.length === 0 ? h('p', {class: 'muted'}, 'No two agents offer close skills on this page.')
        : h('ul', {class: 'plain'}, pairs.map((p) => h('li', {class: 'pair'},
          h('p', {class: 'muted'}, 'Both tagged ', chips(p.shared)),
          h('div', {class: 'side-by-side'}, skillBox(p.a), skillBox(p.b)))))),
    h('section', {'aria-labelledby': 'h-tags'}, h('h2', {id: 'h-tags'}, 'By tag'),
      [...byTag.entries()].sort((a, b) => a[0].localeCompare(b[0])).map(([tag, list]) =>
        h('details', {class: 'tag-group', open: byTag.size <= 12},
          h('summary', null, t(tag, 80), ` (${list.length})`),
          h('ul', {class: 'plain'}, list.map((s) => h('li', null,
            h('a', {href: `/ui/agents/${encodeURIComponent(s.agent.id)}`}, t(s.name || s.id, 120)),
            ' — ', t(s.agent.name || s.agent.id, 80), h('div', {class: 'muted'}, t(s.description, 200)))))))),
    next);
  return {title: 'Skills'};
}
