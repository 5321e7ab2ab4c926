// Catalog: search the agents with the API's own parameter names; the URL is the query
// (/ui/?q=...&tag=...&cursor=...), so a search can be shared.

import {api, query} from './api.js';
import {badge, chips, errorNotice, field, h, notice, replace, t} from './dom.js';

const PAGE_SIZE = 20;
const TEXT = ['q', 'tag', 'skill', 'input_mode', 'output_mode', 'protocol_version'];
const CHOICES = {
  verification: ['verified', 'unsigned', 'invalid', 'untrusted-key'],
  health: ['healthy', 'degraded', 'unreachable', 'unknown'],
};
const LABELS = {
  q: 'Search', tag: 'Tag', skill: 'Skill id', input_mode: 'Accepts (media type)',
  output_mode: 'Produces (media type)', protocol_version: 'Protocol version',
  verification: 'Signature', health: 'Health',
};
const HINTS = {
  q: 'Words from names, descriptions, tags and examples',
  tag: 'Several: separate with commas',
  input_mode: 'e.g. image/* or text/plain',
};

export async function render(ctx) {
  const {main, params} = ctx;
  const form = searchForm(ctx);
  const results = h('section', {'aria-label': 'Results', class: 'results'},
    h('p', {class: 'muted'}, 'Searching…'));
  replace(main, h('h1', null, 'Agents'), form, results);
  const wanted = {limit: PAGE_SIZE};
  for (const name of [...TEXT, 'verification', 'health', 'cursor']) {
    const values = params.getAll(name).filter((v) => v.trim() !== '');
    if (values.length) wanted[name] = name === 'tag' ? values : values[0];
  }
  let page;
  try {
    page = await api(`/api/v1/agents${query(wanted)}`);
  } catch (error) {
    replace(results, errorNotice(error));
    return {title: 'Catalog'};
  }
  if (!ctx.current()) return {title: 'Catalog'};
  const agents = page.agents || [];
  const searched = TEXT.some((n) => params.get(n)) || params.get('verification') || params.get('health');
  replace(results,
    agents.length === 0
      ? notice('info', searched ? 'No agent matches this search.' : 'No agent is registered yet.')
      : h('p', {class: 'muted'}, `${agents.length} agent${agents.length === 1 ? '' : 's'} on this page`),
    howFound(page),
    h('ul', {class: 'cards'}, agents.map((agent) => agentCard(agent, page.match))),
    pager(params, page.next_cursor));
  return {title: params.get('q') ? `Search: ${params.get('q')}` : 'Catalog'};
}

function searchForm(ctx) {
  const {params} = ctx;
  const inputs = {};
  for (const name of TEXT) {
    const value = name === 'tag' ? params.getAll('tag').join(', ') : params.get(name) || '';
    inputs[name] = h('input', {name, type: name === 'q' ? 'search' : 'text', value,
      autocomplete: 'off'});
  }
  for (const [name, options] of Object.entries(CHOICES)) {
    const select = h('select', {name}, h('option', {value: ''}, 'any'),
      options.map((o) => h('option', {value: o, selected: params.get(name) === o}, o)));
    inputs[name] = select;
  }
  const form = h('form', {class: 'search', role: 'search', action: '/ui/'},
    h('div', {class: 'search-main'}, field(LABELS.q, inputs.q, HINTS.q),
      h('button', {type: 'submit'}, 'Search')),
    h('details', {class: 'filters', open: Object.keys(LABELS).some((n) => n !== 'q' && params.get(n))},
      h('summary', null, 'Filters'),
      h('div', {class: 'filter-grid'},
        Object.keys(LABELS).filter((n) => n !== 'q').map((n) => field(LABELS[n], inputs[n], HINTS[n])))));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const wanted = {};
    for (const [name, input] of Object.entries(inputs)) {
      wanted[name] = name === 'tag'
        ? input.value.split(',').map((v) => v.trim()).filter(Boolean) : input.value;
    }
    ctx.navigate(`/ui/${query(wanted)}`);
  });
  return form;
}

/** How the text was ranked (the API's default: the router's matcher), and why by words when
 * it was to go by meaning (the model is loading, say). */
function howFound(page) {
  if (!page.match) return null;
  const how = page.match === 'semantic' ? 'Found by meaning.' : 'Found by words.';
  const why = page.match_fallback ? ` Not by meaning: ${page.match_fallback}.` : '';
  return h('p', {class: 'muted match-mode'}, how + why);
}

function pager(params, next) {
  const links = [];
  if (params.get('cursor')) {
    const first = new URLSearchParams(params);
    first.delete('cursor');
    const text = first.toString();
    links.push(h('a', {href: `/ui/${text ? `?${text}` : ''}`}, 'First page'));
  }
  if (next) {
    const more = new URLSearchParams(params);
    more.set('cursor', next);
    links.push(h('a', {href: `/ui/?${more.toString()}`, rel: 'next'}, 'Next page'));
  }
  return links.length ? h('nav', {class: 'pager', 'aria-label': 'Pages'}, links) : null;
}

/** One agent in the results: name, badges, provider, description, skills and tags; its score
 * when the search ranked text (`match`: by meaning, 0 to 1; by words, a BM25 score). */
export function agentCard(agent, match) {
  const skills = agent.skills || [];
  const tags = [...new Set(skills.flatMap((s) => s.tags || []))];
  const matched = new Set(agent.matched_skills || []);
  return h('li', {class: 'card'},
    h('h2', {class: 'card-title'},
      h('a', {href: `/ui/agents/${encodeURIComponent(agent.id)}`}, t(agent.name || agent.id, 200))),
    h('div', {class: 'badges'}, badge(agent.verification?.status || 'unknown'),
      badge(agent.health?.status || 'unknown'),
      agent.routable === false ? badge('not-routable', null) : null,
      (agent.protocol_versions || []).map((v) => h('span', {class: 'badge badge-version'}, `A2A ${v}`))),
    agent.provider?.organization
      ? h('p', {class: 'provider'}, 'by ', t(agent.provider.organization, 120)) : null,
    h('p', {class: 'desc'}, t(agent.description, 280)),
    h('p', {class: 'skills-line'}, h('strong', null, 'Skills: '),
      skills.slice(0, 8).map((s, i) => [i ? ', ' : '',
        h(matched.has(s.id) ? 'mark' : 'span', null, t(s.name || s.id, 80))]),
      skills.length > 8 ? ` and ${skills.length - 8} more` : ''),
    tags.length ? chips(tags.slice(0, 12)) : null,
    agent.score !== undefined ? h('p', {class: 'muted'}, match === 'semantic'
      ? `match ${agent.score.toFixed(2)} of 1` : `word score ${agent.score}`) : null);
}
