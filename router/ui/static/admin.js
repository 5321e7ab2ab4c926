// Admin: register an agent by URL, refresh or delete agents, manage the trusted keys. Every
// action is a call of the admin API with the viewer's admin credential (a header, no cookie).

import {api, query} from './api.js';
import {announce, badge, errorNotice, field, h, notice, replace, t, when} from './dom.js';

export async function render(ctx) {
  const {main, role} = ctx;
  if (role !== 'admin') {
    replace(main, h('h1', null, 'Admin'), notice('info',
      'Sign in with an admin credential (the admin token, or an API key or JWT with the admin ',
      'role) in the box at the top to register, refresh and delete agents and manage trusted keys.'));
    return {title: 'Admin'};
  }
  const status = h('div', {class: 'status', 'aria-live': 'polite'});
  const agents = h('section', {'aria-labelledby': 'h-agents'}, h('h2', {id: 'h-agents'}, 'Agents'));
  const keys = h('section', {'aria-labelledby': 'h-keys'}, h('h2', {id: 'h-keys'}, 'Trusted keys'));
  const say = (node) => {
    replace(status, node);
    announce(node.textContent);
  };
  replace(main, h('h1', null, 'Admin'), registerForm(ctx, say), status, agents, keys);
  await Promise.all([drawAgents(agents, say, null), drawKeys(keys, say)]);
  return {title: 'Admin'};
}

function registerForm(ctx, say) {
  const url = h('input', {name: 'url', type: 'url', required: true, autocomplete: 'off',
    placeholder: 'https://agents.example.com/currency'});
  const id = h('input', {name: 'id', type: 'text', autocomplete: 'off', pattern: '[a-z0-9][a-z0-9._-]{0,63}'});
  const form = h('form', {class: 'register'},
    h('h2', null, 'Register an agent'),
    h('div', {class: 'filter-grid'},
      field('Agent URL', url, 'Its base URL (the card is found at /.well-known/agent-card.json) or its card URL'),
      field('Id (optional)', id, 'Lower-case letters, digits, . _ -; default: from the card\'s name')),
    h('div', {class: 'actions'}, h('button', {type: 'submit'}, 'Register')));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const body = {url: url.value.trim()};
    if (id.value.trim()) body.id = id.value.trim();
    say(h('p', {class: 'muted'}, 'Fetching the card…'));
    try {
      const agent = await api('/api/v1/agents', {method: 'POST', body});
      say(notice('ok', 'Registered ', h('a', {href: `/ui/agents/${encodeURIComponent(agent.id)}`},
        t(agent.name || agent.id, 200)), ` as ${agent.id}.`));
      form.reset();
      const section = document.querySelector('[aria-labelledby="h-agents"]');
      if (section) await drawAgents(section, say, null);
    } catch (error) {
      say(errorNotice(error));
    }
  });
  return form;
}

async function drawAgents(section, say, cursor) {
  let page;
  try {
    page = await api(`/api/v1/agents${query({limit: 50, cursor})}`);
  } catch (error) {
    replace(section, section.firstChild, errorNotice(error));
    return;
  }
  const rows = (page.agents || []).map((a) => agentRow(a, section, say));
  const body = h('tbody', null, rows);
  const table = h('div', {class: 'scroll-x'}, h('table', {class: 'admin-agents'},
    h('thead', null, h('tr', null, ['Agent', 'Source', 'Health', 'Signature', 'Actions'].map((c) =>
      h('th', {scope: 'col'}, c)))), body));
  const more = page.next_cursor ? h('button', {type: 'button', onclick: () => drawAgents(section, say, page.next_cursor)},
    'Next page') : null;
  replace(section, section.firstChild, rows.length ? table : notice('info', 'No agent is registered.'), more);
}

function agentRow(agent, section, say) {
  const actions = h('td', {class: 'actions'});
  const row = h('tr', {'data-agent': agent.id},
    h('td', null, h('a', {href: `/ui/agents/${encodeURIComponent(agent.id)}`}, t(agent.name || agent.id, 120)),
      h('div', {class: 'muted'}, t(agent.id))),
    h('td', null, t(agent.source?.kind), h('div', {class: 'muted clip'}, t(agent.source?.url || '', 200))),
    h('td', {class: 'health'}, badge(agent.health?.status || 'unknown'), h('div', {class: 'muted'}, when(agent.health?.last_checked))),
    h('td', null, badge(agent.verification?.status || 'unknown')),
    actions);
  const label = agent.name || agent.id;
  const refresh = h('button', {type: 'button', 'aria-label': `Refresh ${label}`}, 'Refresh');
  refresh.addEventListener('click', async () => {
    refresh.disabled = true;
    try {
      const answer = await api(`/api/v1/agents/${encodeURIComponent(agent.id)}/refresh`, {method: 'POST'});
      say(notice('ok', `Refreshed ${agent.id}: `, answer.changed ? 'the card changed.' : 'the card is unchanged.'));
      row.replaceWith(agentRow(answer.agent, section, say));
    } catch (error) {
      say(errorNotice(error));
      refresh.disabled = false;
    }
  });
  const remove = h('button', {type: 'button', class: 'danger', 'aria-label': `Delete ${label}`}, 'Delete');
  remove.addEventListener('click', () => {
    const confirm = h('button', {type: 'button', class: 'danger', 'aria-label': `Really delete ${label}`}, 'Really delete');
    const cancel = h('button', {type: 'button'}, 'Cancel');
    replace(actions, confirm, cancel);
    confirm.focus();
    cancel.addEventListener('click', () => {
      replace(actions, refresh, remove);
      remove.focus();
    });
    confirm.addEventListener('click', async () => {
      try {
        await api(`/api/v1/agents/${encodeURIComponent(agent.id)}`, {method: 'DELETE'});
        row.remove();
        say(notice('ok', `Deleted ${agent.id}.`));
      } catch (error) {
        say(errorNotice(error));
      }
    });
  });
  replace(actions, refresh, remove);
  return row;
}

async function drawKeys(section, say) {
  let answer;
  try {
    answer = await api('/api/v1/keys');
  } catch (error) {
    replace(section, section.firstChild, errorNotice(error));
    return;
  }
  const keys = answer.keys || [];
  const jwk = h('textarea', {name: 'jwk', rows: 4, spellcheck: 'false',
    placeholder: '{"kty": "EC", "crv": "P-256", "x": "...", "y": "...", "kid": "..."}'});
  const jwksUrl = h('input', {name: 'jwks_url', type: 'url', autocomplete: 'off'});
  const form = h('form', {class: 'keys'},
    h('h3', null, 'Trust a key'),
    h('div', {class: 'filter-grid'}, field('Public JWK (JSON)', jwk), field('or a JWKS URL', jwksUrl)),
    h('div', {class: 'actions'}, h('button', {type: 'submit'}, 'Trust')));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    let body;
    if (jwk.value.trim()) {
      try {
        body = {jwk: JSON.parse(jwk.value)};
      } catch (error) {
        say(notice('error', `The JWK is not valid JSON: ${error.message}`));
        return;
      }
    } else {
      body = {jwks_url: jwksUrl.value.trim()};
    }
    try {
      const key = await api('/api/v1/keys', {method: 'POST', body});
      say(notice('ok', `Trusted key ${key.id}; every card was checked again.`));
      await drawKeys(section, say);
    } catch (error) {
      say(errorNotice(error));
    }
  });
  replace(section, section.firstChild,
    keys.length === 0 ? h('p', {class: 'muted'}, 'No trusted keys: signed cards are untrusted-key.')
      : h('div', {class: 'scroll-x'}, h('table', null,
        h('thead', null, h('tr', null, ['Key', 'Kind', 'kid / URL', 'Source', 'Added', ''].map((c) =>
          h('th', {scope: 'col'}, c)))),
        h('tbody', null, keys.map((k) => {
          const del = h('button', {type: 'button', class: 'danger', 'aria-label': `Stop trusting ${k.id}`}, 'Remove');
          del.addEventListener('click', async () => {
            try {
              await api(`/api/v1/keys/${encodeURIComponent(k.id)}`, {method: 'DELETE'});
              say(notice('ok', `Key ${k.id} removed; every card was checked again.`));
              await drawKeys(section, say);
            } catch (error) {
              say(errorNotice(error));
            }
          });
          return h('tr', null, h('td', null, h('code', {class: 'clip'}, t(k.id, 80))), h('td', null, t(k.kind)),
            h('td', null, t(k.kid || k.jwks_url || '', 300)), h('td', null, t(k.source)),
            h('td', null, when(k.created_at)), h('td', null, del));
        })))),
    form);
}
