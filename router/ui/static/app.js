// The console's router: the URL is the state. Each page module exports
// render(ctx) → {title} and draws into ctx.main; links under /ui/ navigate without reloading.

import {credential, role as askRole, setCredential} from './api.js';
import {errorNotice, h, notice, replace} from './dom.js';
import * as admin from './admin.js';
import * as agent from './agent.js';
import * as catalog from './catalog.js';
import * as overview from './overview.js';
import * as playground from './playground.js';
import * as skills from './skills.js';

const PAGES = [
  [/^\/ui\/?$/, catalog],
  [/^\/ui\/overview\/?$/, overview],
  [/^\/ui\/agents\/([^/]+)\/?$/, agent],
  [/^\/ui\/skills\/?$/, skills],
  [/^\/ui\/playground\/?$/, playground],
  [/^\/ui\/admin\/?$/, admin],
];

const state = {role: 'anonymous', rendering: 0};

/** Go to a console URL (pushes history) and draw it. */
export function navigate(url, {replaceState = false} = {}) {
  if (replaceState) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  render(true);
}

async function render(moved) {
  const token = ++state.rendering;
  const main = document.getElementById('main');
  const path = location.pathname;
  const found = PAGES.map(([pattern, page]) => [path.match(pattern), page]).find(([m]) => m);
  markNav(path);
  if (!found) {
    replace(main, h('h1', null, 'Not found'),
      notice('info', 'No console page here. ', h('a', {href: '/ui/'}, 'Open the catalog')));
    document.title = 'Not found · Switchboard';
    return;
  }
  const [match, page] = found;
  const ctx = {
    main,
    params: new URLSearchParams(location.search),
    arg: match[1] ? decodeURIComponent(match[1]) : null,
    role: state.role,
    navigate,
    current: () => token === state.rendering,
    refreshSession,
  };
  main.setAttribute('aria-busy', 'true');
  try {
    const shown = await page.render(ctx);
    if (token === state.rendering) document.title = `${shown?.title || 'Console'} · Switchboard`;
  } catch (error) {
    if (token !== state.rendering) return;
    replace(main, h('h1', null, 'Something went wrong'), errorNotice(error));
  } finally {
    if (token === state.rendering) main.removeAttribute('aria-busy');
  }
  if (moved && token === state.rendering) main.focus({preventScroll: false});
}

function markNav(path) {
  for (const link of document.querySelectorAll('#nav a')) {
    const target = link.getAttribute('href');
    const here = target === '/ui/' ? path === '/ui/' || path === '/ui' || path.startsWith('/ui/agents/')
      : path.startsWith(target);
    if (here) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
}

async function refreshSession() {
  state.role = await askRole();
  drawSession();
  return state.role;
}

function drawSession() {
  const box = document.getElementById('session');
  if (credential()) {
    const label = {admin: 'admin', viewer: 'signed in', rejected: 'credential refused'}[state.role]
      || 'signed in';
    replace(box,
      h('span', {class: `who who-${state.role}`}, label),
      h('button', {type: 'button', onclick: async () => {
        setCredential('');
        await refreshSession();
        render(false);
      }}, 'Sign out'));
    return;
  }
  const input = h('input', {id: 'credential', name: 'credential', type: 'password',
    autocomplete: 'off', spellcheck: 'false', placeholder: 'token, API key or JWT'});
  const form = h('form', {class: 'signin', onsubmit: async (event) => {
    event.preventDefault();
    setCredential(input.value.trim());
    await refreshSession();
    render(false);
  }},
  h('label', {for: 'credential', class: 'visually-hidden'}, 'Credential'),
  input, h('button', {type: 'submit'}, 'Sign in'));
  replace(box, form);
}

document.addEventListener('click', (event) => {
  if (event.defaultPrevented || event.button !== 0) return;
  if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const link = event.target.closest && event.target.closest('a[href]');
  if (!link || link.target === '_blank' || link.origin !== location.origin) return;
  if (!link.pathname.startsWith('/ui/') && link.pathname !== '/ui') return;
  event.preventDefault();
  navigate(link.pathname + link.search + link.hash);
});

window.addEventListener('popstate', () => render(true));

refreshSession().finally(() => render(false));
