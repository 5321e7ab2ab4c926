// Route playground: what would the router do with this message (POST /api/v1/route/explain,
// with the method it is then sent with), and, on request, send it for real (POST / JSON-RPC
// SendStreamingMessage, A2A 1.0) and show the streamed events as they arrive.

import {authHeaders} from './api.js';
import {badge, errorNotice, field, h, notice, replace, t} from './dom.js';
import {
  SEND_METHOD, candidatesTable, decision, explain, message, thresholdLine,
} from './explainview.js';

function list(text) {
  return String(text || '').split(',').map((v) => v.trim()).filter(Boolean);
}

export async function render(ctx) {
  const {main, params} = ctx;
  const text = h('textarea', {name: 'message', rows: 3, required: true}, params.get('message') || '');
  const attach = h('input', {name: 'attachments', type: 'text', autocomplete: 'off'});
  const accepted = h('input', {name: 'accepted', type: 'text', autocomplete: 'off'});
  const explained = h('section', {'aria-label': 'Explanation', 'aria-live': 'polite'});
  const live = h('section', {'aria-label': 'Answer'});
  const send = h('button', {type: 'button', class: 'secondary'}, 'Send it for real');
  const form = h('form', {class: 'playground'},
    field('Message', text, 'What a user would ask, e.g. "convert 100 USD to EUR"'),
    h('div', {class: 'filter-grid'},
      field('Attachment media types', attach, 'Optional, comma-separated, e.g. image/png'),
      field('Accepted output modes', accepted, 'Optional, comma-separated, e.g. text/plain')),
    h('div', {class: 'actions'}, h('button', {type: 'submit'}, 'Explain'), send));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    replace(explained, h('p', {class: 'muted'}, 'Asking the router…'));
    const modes = list(accepted.value);
    const configuration = modes.length ? {acceptedOutputModes: modes} : null;
    try {
      replace(explained, explanation(await explain(message(text.value, list(attach.value)), configuration)));
    } catch (error) {
      replace(explained, errorNotice(error));
    }
  });
  send.addEventListener('click', () => stream(live, text.value, list(attach.value), list(accepted.value)));
  replace(main, h('h1', null, 'Route playground'),
    h('p', null, 'Type a message to see which agent the router would pick, and why.'),
    form, explained, live);
  return {title: 'Route playground'};
}

function explanation(answer) {
  const candidates = answer.candidates || [];
  return [
    h('h2', null, 'Decision'),
    decision(answer),
    thresholdLine(answer),
    h('p', {class: 'muted'}, `${answer.total_candidates} candidate skill(s).`),
    candidatesTable(candidates),
  ];
}

function eventText(result) {
  const texts = (parts) => (parts || []).filter((p) => typeof p.text === 'string').map((p) => p.text).join('');
  if (result.statusUpdate) {
    const s = result.statusUpdate.status || {};
    return [s.state || 'status', texts(s.message?.parts)];
  }
  if (result.artifactUpdate) return ['artifact', texts(result.artifactUpdate.artifact?.parts)];
  if (result.task) return [result.task.status?.state || 'task', ''];
  if (result.message) return ['message', texts(result.message.parts)];
  return ['event', JSON.stringify(result)];
}

async function stream(live, text, attachments, accepted) {
  const events = h('ol', {class: 'events'});
  const answer = h('output', {class: 'answer long'});
  replace(live, h('h2', null, 'Answer'), answer, h('h3', null, 'Events'), events);
  const params = {message: message(text, attachments)};
  if (accepted.length) params.configuration = {acceptedOutputModes: accepted};
  const body = {jsonrpc: '2.0', id: 1, method: SEND_METHOD, params};
  let resp;
  try {
    resp = await fetch('/', {
      method: 'POST', credentials: 'omit', cache: 'no-store',
      headers: {'Content-Type': 'application/json', Accept: 'text/event-stream',
        'A2A-Version': '1.0', ...authHeaders()},
      body: JSON.stringify(body),
    });
  } catch (error) {
    replace(live, errorNotice(error));
    return;
  }
  const decoder = new TextDecoder();
  let buffer = '';
  const artifacts = new Map();
  const handle = (data) => {
    let frame;
    try {
      frame = JSON.parse(data);
    } catch {
      return;
    }
    if (frame.error) {
      events.append(h('li', {class: 'event error'}, badge('error'), ' ', t(frame.error.message, 2000)));
      answer.append(notice('error', t(frame.error.message, 2000)));
      return;
    }
    const result = frame.result || {};
    const [kind, shown] = eventText(result);
    events.append(h('li', {class: 'event'}, h('span', {class: 'badge badge-version'}, t(kind, 40)), ' ', t(shown, 2000)));
    const artifact = result.artifactUpdate?.artifact;
    if (artifact) {
      const before = result.artifactUpdate.append ? artifacts.get(artifact.artifactId) || '' : '';
      artifacts.set(artifact.artifactId, before + eventText(result)[1]);
      answer.textContent = [...artifacts.values()].join('\n');
    } else if (result.message) {
      answer.textContent = shown;
    }
  };
  if (!(resp.headers.get('Content-Type') || '').includes('text/event-stream')) {
    handle(await resp.text()); // a JSON-RPC error answered at once
    live.setAttribute('data-done', 'true');
    return;
  }
  const reader = resp.body.getReader();
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, {stream: true});
    const blocks = buffer.split(/\r?\n\r?\n/);
    buffer = blocks.pop();
    for (const block of blocks) {
      const data = block.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
      if (data) handle(data);
    }
  }
  if (!resp.ok && events.childElementCount === 0) {
    replace(live, notice('error', `The router answered ${resp.status}`));
    return;
  }
  events.append(h('li', {class: 'event muted'}, 'stream ended'));
  live.setAttribute('data-done', 'true');
}
