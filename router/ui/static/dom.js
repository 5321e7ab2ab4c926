// DOM helpers. Card text is untrusted: it only ever becomes text nodes (never HTML), inside
// <bdi> so bidi controls cannot reorder the page, and links only if they are http(s).

const SAFE_SCHEMES = new Set(['http:', 'https:']);

/** An http(s) URL from a card, or null (javascript:, data:, relative ... are refused). */
export function externalUrl(value) {
  if (typeof value !== 'string' || value.length > 2048) return null;
  try {
    const url = new URL(value);
    return SAFE_SCHEMES.has(url.protocol) ? url.href : null;
  } catch {
    return null;
  }
}

function safeHref(value) {
  if (typeof value !== 'string') return null;
  if (value.startsWith('/') && !value.startsWith('//')) return value; // the console's own
  if (value.startsWith('#') || value.startsWith('?')) return value;
  return externalUrl(value);
}

/** Build an element: h('a', {href: '/ui/', class: 'x', onclick: fn}, 'text', child, ...). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on')) {
      if (typeof value === 'function') el.addEventListener(key.slice(2), value);
    } else if (key === 'class') {
      el.className = value;
    } else if (key === 'href' || key === 'src' || key === 'action') {
      const safe = safeHref(value);
      if (safe !== null) el.setAttribute(key, safe);
    } else {
      el.setAttribute(key, value === true ? '' : String(value));
    }
  }
  add(el, children);
  return el;
}

/** Append children (nodes, strings, numbers, nested arrays; null and false are skipped). */
export function add(el, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Remove every child of el, then append children. */
export function replace(el, ...children) {
  el.replaceChildren();
  return add(el, children);
}

/** Untrusted text (from a card): isolated from the surrounding text direction. */
export function t(text, max) {
  let value = text === null || text === undefined ? '' : String(text);
  if (max && value.length > max) value = value.slice(0, max) + '…';
  return h('bdi', null, value);
}

/** A link out of the console (a card's URL): only http(s), no referrer, no opener. */
export function outLink(url, label) {
  const href = externalUrl(url);
  if (href === null) return url ? t(url, 200) : null;
  return h('a', {href, rel: 'noopener noreferrer', target: '_blank'}, t(label || url, 200));
}

const STATUS = /^[a-z0-9-]{1,32}$/;

/** A status badge: verified/unsigned/invalid/untrusted-key, healthy/degraded/... */
export function badge(status, label) {
  const word = STATUS.test(String(status)) ? String(status) : 'other';
  return h('span', {class: `badge badge-${word}`}, label ? `${label}: ${status}` : String(status));
}

/** A button that copies text() to the clipboard and says so. */
export function copyButton(text, label = 'Copy') {
  const button = h('button', {type: 'button', class: 'copy'}, label);
  button.addEventListener('click', async () => {
    const value = typeof text === 'function' ? text() : text;
    try {
      await navigator.clipboard.writeText(value);
    } catch {
      const area = h('textarea', {class: 'visually-hidden', 'aria-hidden': 'true'});
      area.value = value;
      document.body.append(area);
      area.select();
      document.execCommand('copy');
      area.remove();
    }
    button.textContent = 'Copied';
    announce('Copied to the clipboard');
    setTimeout(() => { button.textContent = label; }, 1500);
  });
  return button;
}

/** A date from the API, readable, with the exact value in a tooltip. */
export function when(iso) {
  if (!iso) return h('span', {class: 'muted'}, 'never');
  const date = new Date(iso);
  const shown = Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
  return h('time', {datetime: String(iso), title: String(iso)}, shown);
}

/** A definition list from [term, value] pairs (values: nodes or text). */
export function facts(pairs) {
  return h('dl', {class: 'facts'}, pairs.filter(Boolean).map(([term, value]) => [
    h('dt', null, term), h('dd', null, value),
  ]));
}

/** Chips for a list of strings (tags, media types). */
export function chips(values, cls = 'chip') {
  if (!Array.isArray(values) || values.length === 0) return h('span', {class: 'muted'}, 'none');
  return h('ul', {class: 'chips'}, values.map((v) => h('li', {class: cls}, t(v, 120))));
}

/** Say something to screen readers (the polite live region). */
export function announce(message) {
  const region = document.getElementById('announce');
  if (region) region.textContent = message;
}

/** A message box: kind is "error", "ok" or "info". */
export function notice(kind, ...children) {
  return h('div', {class: `notice notice-${kind}`, role: kind === 'error' ? 'alert' : 'status'},
    children);
}

/** A labelled form field; the input gets id and name. */
export function field(label, input, hint) {
  const id = input.id || `f-${input.name || Math.random().toString(36).slice(2)}`;
  input.id = id;
  const hintId = hint ? `${id}-hint` : null;
  if (hintId) input.setAttribute('aria-describedby', hintId);
  return h('div', {class: 'field'}, h('label', {for: id}, label), input,
    hint ? h('small', {id: hintId, class: 'muted'}, hint) : null);
}

/** The API's error for people; a 401 points at the sign-in box. */
export function errorNotice(error) {
  if (error && error.status === 401) {
    return notice('error', 'This Switchboard needs a credential to show this: ',
      'enter an admin token, read token, API key or JWT in the sign-in box above.');
  }
  const code = error && error.code ? ` (${error.code})` : '';
  return notice('error', `${error && error.message ? error.message : String(error)}${code}`);
}
