// One agent (/ui/agents/{id}): its card for people, signature, health, whether a message would
// reach it (explain, in the playground's terms), revisions with their diffs side by side, the
// raw card, and how to call it through the router.

import {api} from './api.js';
import {
  badge, chips, copyButton, errorNotice, facts, field, h, notice, outLink, replace, t, when,
} from './dom.js';
import {candidatesTable, decision, explain, message, thresholdLine} from './explainview.js';

export async function render(ctx) {
  const {main, arg: id} = ctx;
  replace(main, h('p', {class: 'muted'}, 'Loading…'));
  const path = `/api/v1/agents/${encodeURIComponent(id)}`;
  let agent;
  try {
    agent = await api(path);
  } catch (error) {
    replace(main, h('h1', null, t(id, 200)), errorNotice(error));
    return {title: id};
  }
  const revisions = h('section', {'aria-labelledby': 'h-revisions'},
    h('h2', {id: 'h-revisions'}, 'Revision history'), h('p', {class: 'muted'}, 'Loading…'));
  replace(main,
    h('nav', {class: 'crumbs', 'aria-label': 'Breadcrumb'}, h('a', {href: '/ui/'}, 'Catalog'), ' / ',
      t(agent.id)),
    h('h1', null, t(agent.name || agent.id, 300)),
    h('div', {class: 'badges'}, badge(agent.verification?.status || 'unknown'),
      badge(agent.health?.status || 'unknown'), agent.routable ? badge('routable')
        : badge('not-routable')),
    h('div', {class: 'long desc'}, t(agent.description)),
    h('div', {class: 'two'}, about(agent), signature(agent)),
    skillsSection(agent),
    reaching(agent),
    h('div', {class: 'two'}, health(agent), interfaces(agent)),
    useIt(agent),
    revisions,
    rawCard(agent));
  drawRevisions(revisions, path);
  return {title: agent.name || agent.id};
}

function about(agent) {
  const caps = agent.capabilities || {};
  return h('section', {'aria-labelledby': 'h-about'}, h('h2', {id: 'h-about'}, 'About'), facts([
    ['Id', t(agent.id)],
    ['Version', t(agent.version)],
    ['Provider', agent.provider ? [t(agent.provider.organization, 200), ' ',
      outLink(agent.provider.url)] : 'not given'],
    ['Documentation', agent.documentation_url ? outLink(agent.documentation_url) : 'not given'],
    agent.icon_url ? ['Icon', outLink(agent.icon_url)] : null,
    ['Card format', `A2A ${agent.card_format}`],
    ['Streaming', caps.streaming ? 'yes' : 'no'],
    ['Push notifications', caps.push_notifications ? 'yes' : 'no'],
    ['State history', caps.state_transition_history ? 'yes' : 'no'],
    ['Extended card', caps.extended_card ? 'yes' : 'no'],
    ['Extensions', chips((caps.extensions || []).map((e) => e.uri || JSON.stringify(e)))],
    ['Accepts by default', chips(agent.default_input_modes)],
    ['Produces by default', chips(agent.default_output_modes)],
    ['Source', [t(agent.source?.kind), ' ', agent.source?.url ? outLink(agent.source.url) : '']],
    ['Card fetched', when(agent.fetched_at)],
    ['Card changed', when(agent.updated_at)],
  ]));
}

function decodeProtected(signature) {
  try {
    const text = String(signature.protected).replace(/-/g, '+').replace(/_/g, '/');
    const json = new TextDecoder().decode(Uint8Array.from(atob(text), (c) => c.charCodeAt(0)));
    const header = JSON.parse(json);
    return header && typeof header === 'object' ? header : {};
  } catch {
    return {};
  }
}

function signature(agent) {
  const v = agent.verification || {};
  const sigs = Array.isArray(agent.card?.signatures) ? agent.card.signatures : [];
  const headers = sigs.map(decodeProtected);
  const meaning = {
    verified: 'The card is signed, and the signature checks out with a trusted key.',
    unsigned: 'The card carries no signature: anyone who can serve it could have changed it.',
    invalid: 'A signature is there but does not match the card (or is malformed).',
    'untrusted-key': 'The card is signed with a key Switchboard does not trust.',
  }[v.status] || '';
  return h('section', {'aria-labelledby': 'h-signature'}, h('h2', {id: 'h-signature'}, 'Signature'),
    h('p', null, badge(v.status || 'unknown'), ' ', meaning),
    facts([
      ['Key id (kid)', v.kid ? t(v.kid, 200) : 'none'],
      ['Algorithm', headers.length ? headers.map((x) => t(x.alg || '?', 40)).flatMap((n, i) =>
        (i ? [', ', n] : [n])) : 'none'],
      ['Key source', v.key_source ? t(v.key_source, 300) : 'none'],
      ['Signed payload', v.payload_form ? t(v.payload_form) : 'none'],
      v.reason ? ['Why not verified', h('div', {class: 'clip'}, t(v.reason, 2000))] : null,
      v.uncovered_fields?.length ? ['Not covered by the signature', chips(v.uncovered_fields)] : null,
      ['Signatures on the card', String(sigs.length)],
    ]));
}

function skillsSection(agent) {
  const skills = agent.skills || [];
  return h('section', {'aria-labelledby': 'h-skills'}, h('h2', {id: 'h-skills'}, `Skills (${skills.length})`),
    skills.length === 0 ? notice('info', 'This agent lists no skills.')
      : h('ul', {class: 'cards'}, skills.map((s) => h('li', {class: 'card'},
        h('h3', {class: 'card-title'}, t(s.name || s.id, 200)),
        h('p', {class: 'muted'}, 'id ', h('code', null, t(s.id, 200))),
        h('div', {class: 'long'}, t(s.description)),
        chips(s.tags),
        s.examples?.length ? [h('h4', null, 'Examples'),
          h('ul', {class: 'examples'}, s.examples.slice(0, 20).map((e) => h('li', null, t(e, 500))))] : null,
        facts([['Accepts', chips(s.input_modes)], ['Produces', chips(s.output_modes)]])))));
}

function reaching(agent) {
  const text = h('textarea', {name: 'message', rows: 2, required: true});
  const out = h('div', {'aria-live': 'polite'});
  const form = h('form', {class: 'reach'}, field('Message', text,
    'What a user would ask: the router explains where it would go, as the playground does'),
  h('div', {class: 'actions'}, h('button', {type: 'submit'}, 'Would it come here?')));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    replace(out, h('p', {class: 'muted'}, 'Asking the router…'));
    try {
      const answer = await explain(message(text.value));
      const mine = (answer.candidates || []).filter((c) => c.agent_id === agent.id);
      replace(out, decision(answer), thresholdLine(answer),
        mine.length ? candidatesTable(mine) : h('p', {class: 'muted'}, 'None of its skills was a candidate.'));
    } catch (error) {
      replace(out, errorNotice(error));
    }
  });
  return h('section', {'aria-labelledby': 'h-reach'}, h('h2', {id: 'h-reach'}, 'Would a message reach it?'),
    form, out);
}

function health(agent) {
  const x = agent.health || {};
  return h('section', {'aria-labelledby': 'h-health'}, h('h2', {id: 'h-health'}, 'Health'),
    h('p', null, badge(x.status || 'unknown'),
      x.consecutive_failures ? ` ${x.consecutive_failures} failure(s) in a row` : ''),
    facts([
      ['Last check', when(x.last_checked)],
      ['Last success', when(x.last_success)],
      ['Last failure', when(x.last_failure)],
      x.last_error ? ['Last error', h('div', {class: 'clip'}, t(x.last_error, 2000))] : null,
      x.card_error ? ['Card fetch error', h('div', {class: 'clip'}, t(x.card_error, 2000))] : null,
      ['Next check', when(x.next_check_at)],
      ['Next card fetch', x.next_card_at ? when(x.next_card_at) : 'not crawled'],
    ]));
}

function interfaces(agent) {
  const rows = agent.interfaces || [];
  return h('section', {'aria-labelledby': 'h-interfaces'}, h('h2', {id: 'h-interfaces'}, 'Interfaces'),
    h('div', {class: 'scroll-x'}, h('table', null,
      h('thead', null, h('tr', null, ['URL', 'Binding', 'Version', 'Tenant'].map((c) =>
        h('th', {scope: 'col'}, c)))),
      h('tbody', null, rows.map((i) => h('tr', null,
        h('td', null, t(i.url, 300)), h('td', null, t(i.binding)), h('td', null, t(i.protocol_version)),
        h('td', null, i.tenant ? t(i.tenant) : '—')))))));
}

function snippetBox(label, text) {
  return h('div', {class: 'snippet'}, h('div', {class: 'snippet-head'}, h('span', null, label),
    copyButton(text, `Copy ${label}`)), h('pre', null, h('code', null, text)));
}

function useIt(agent) {
  const base = `${location.origin}/agents/${encodeURIComponent(agent.id)}`;
  const curl = [
    `curl -s -X POST ${base} \\`,
    "  -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' \\",
    `  -d '{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message":`,
    `       {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "hello"}]}}}'`,
  ].join('\n');
  const python = [
    'import asyncio',
    'import uuid',
    '',
    'import httpx',
    'from a2a.client import A2ACardResolver, ClientConfig, ClientFactory',
    'from a2a.types import Message, Part, Role, SendMessageRequest',
    '',
    '',
    'async def main() -> None:',
    '    async with httpx.AsyncClient(timeout=60) as http:',
    `        card = await A2ACardResolver(http, "${base}").get_agent_card()`,
    '        client = ClientFactory(ClientConfig(httpx_client=http)).create(card)',
    '        message = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()),',
    '                          parts=[Part(text="hello")])',
    '        async for event in client.send_message(SendMessageRequest(message=message)):',
    '            print(event)',
    '',
    '',
    'asyncio.run(main())',
  ].join('\n');
  return h('section', {'aria-labelledby': 'h-use'}, h('h2', {id: 'h-use'}, 'Call it through the router'),
    facts([['Router URL', [h('code', null, base), ' ', copyButton(base, 'Copy URL')]],
      ['Card', h('a', {href: `/agents/${encodeURIComponent(agent.id)}/.well-known/agent-card.json`},
        `${base}/.well-known/agent-card.json`)]]),
    h('div', {class: 'two'}, snippetBox('curl', curl), snippetBox('a2a-sdk (Python)', python)));
}

function rawCard(agent) {
  const text = JSON.stringify(agent.card, null, 2);
  return h('section', {'aria-labelledby': 'h-raw'}, h('h2', {id: 'h-raw'}, 'Raw card'),
    h('details', {class: 'raw'}, h('summary', null, `Card JSON (${text.length.toLocaleString()} characters)`),
      copyButton(text, 'Copy card JSON'), h('pre', {class: 'long'}, h('code', null, text))));
}

async function drawRevisions(section, path) {
  let page;
  try {
    page = await api(`${path}/revisions`);
  } catch (error) {
    replace(section, section.firstChild, errorNotice(error));
    return;
  }
  const revisions = page.revisions || [];
  replace(section, section.firstChild,
    h('ol', {class: 'revisions'}, revisions.map((r) => h('li', {class: 'revision'},
      h('p', null, when(r.fetched_at), ' ', badge(r.verification_status || 'unknown'), ' ',
        h('code', {title: r.sha256}, String(r.sha256 || '').slice(0, 12)),
        ` ${r.size ?? '?'} bytes`, r.initial ? ' · registered' : ''),
      diffView(r)))));
}

function show(value) {
  if (value === null || value === undefined || value === '') return h('span', {class: 'muted'}, 'none');
  if (typeof value === 'object') return h('code', null, t(JSON.stringify(value), 2000));
  return t(value, 2000);
}

/** A revision's diff as a table: what changed, before, after. */
export function diffView(revision) {
  const diff = revision.diff;
  if (revision.initial) return null;
  if (diff === null || diff === undefined) return h('p', {class: 'muted'}, 'No diff was recorded.');
  const rows = [];
  for (const [name, change] of Object.entries(diff.fields || {})) rows.push([name, change.from, change.to]);
  for (const [name, change] of Object.entries(diff.capabilities || {})) {
    rows.push([`capability ${name}`, change.from, change.to]);
  }
  if (diff.verification) rows.push(['verification', diff.verification.from, diff.verification.to]);
  const listed = (label, part) => {
    if (!part) return;
    if ((part.removed || []).length || (part.added || []).length) {
      rows.push([label, list(part.removed), list(part.added)]);
    }
  };
  listed('skills', diff.skills);
  for (const c of diff.skills?.changed || []) rows.push([`skill ${c.id}`, 'changed', list(c.fields)]);
  listed('interfaces', diff.interfaces);
  listed('default input modes', diff.default_input_modes);
  listed('default output modes', diff.default_output_modes);
  if (rows.length === 0) return h('p', {class: 'muted'}, 'The bytes changed, not the meaning.');
  return h('div', {class: 'scroll-x'}, h('table', {class: 'diff'},
    h('thead', null, h('tr', null, h('th', {scope: 'col'}, 'What'), h('th', {scope: 'col'}, 'Before'),
      h('th', {scope: 'col'}, 'After'))),
    h('tbody', null, rows.map(([what, before, after]) => h('tr', null, h('th', {scope: 'row'}, t(what, 200)),
      h('td', {class: 'before'}, h('div', {class: 'clip'}, before instanceof Node ? before : show(before))),
      h('td', {class: 'after'}, h('div', {class: 'clip'}, after instanceof Node ? after : show(after))))))));
}

function list(values) {
  const items = (values || []).map((v) => (typeof v === 'string' ? v : JSON.stringify(v)));
  return items.length ? chips(items) : h('span', {class: 'muted'}, 'none');
}
