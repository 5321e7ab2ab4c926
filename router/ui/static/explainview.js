// The terms of an explain answer (POST /api/v1/route/explain), shown alike on the route
// playground and on an agent's page: the decision, the one threshold that decided and where it
// comes from, and each candidate's score, features (each on 0 to 1) and reason.

import {api} from './api.js';
import {badge, h, notice, t} from './dom.js';

/** The method the console sends messages with (the playground's "Send it for real"). */
export const SEND_METHOD = 'SendStreamingMessage';

const SOURCES = {
  calibrated: 'calibrated on the evaluation set',
  operator: 'set by SWITCHBOARD_MATCH_THRESHOLD',
  default: 'the default of matching by words',
};
const FEATURES = [
  ['skill', 'skill'], ['agent', 'agent'], ['example', 'example'], ['learned', 'learned'],
  ['lexical', 'words'],
];

function number(value, digits = 3) {
  return typeof value === 'number' ? value.toFixed(digits) : '—';
}

/** An A2A 1.0 user message: the text, and an empty file part per attachment media type. */
export function message(text, attachments = []) {
  const parts = [];
  if (text.trim()) parts.push({text});
  for (const mediaType of attachments) parts.push({raw: '', mediaType, filename: 'attachment'});
  return {role: 'ROLE_USER', messageId: uuid(), parts};
}

function uuid() { // crypto.randomUUID needs a secure context; this does not
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const x = [...b].map((n) => n.toString(16).padStart(2, '0')).join('');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

/** What the router would do with a message (explain, with the console's send method). */
export function explain(message, configuration) {
  const body = {method: SEND_METHOD, message};
  if (configuration) body.configuration = configuration;
  return api('/api/v1/route/explain', {method: 'POST', body});
}

/** The decision: the chosen agent and why, or the error the send would get. */
export function decision(answer) {
  const choice = answer.choice;
  if (!choice) return notice('error', 'No agent would be chosen: ', t(answer.error?.message || 'refused', 1000));
  return notice('ok', 'Chosen: ', h('a', {href: `/ui/agents/${encodeURIComponent(choice.agent_id)}`, class: 'chosen'},
    t(choice.agent_id, 120)), ' (skill ', h('code', null, t(choice.skill_id, 120)), '), decided by the ',
  h('strong', {class: 'tier'}, t(choice.tier || choice.via, 40)), ' tier',
  typeof choice.score === 'number' ? `, score ${number(choice.score)}` : '',
  typeof choice.margin === 'number' ? `, margin ${number(choice.margin, 4)}` : '',
  choice.reason ? [': ', t(choice.reason, 500)] : '');
}

/** The threshold that decided, where it comes from, and the scale of the scores. */
export function thresholdLine(answer) {
  const source = SOURCES[answer.threshold_source] || answer.threshold_source;
  const meaning = String(answer.scale || '').startsWith('fused');
  return h('p', {class: 'muted threshold'},
    `Threshold ${number(answer.threshold)} (${source}`,
    meaning ? `; SWITCHBOARD_REFUSE=${answer.refuse}). ` : '). ',
    `Scores: ${answer.scale}. `,
    answer.margin_needed ? `The best agent must lead the next by ${number(answer.margin_needed, 4)}. ` : '',
    answer.uncertain ? `Unsure: ${answer.uncertain}. ` : '',
    `Matcher: ${answer.matcher}. Method: ${answer.method}.`);
}

function features(candidate) {
  const f = candidate.features;
  if (!f) return '—';
  return FEATURES.map(([key, label]) => `${label} ${number(f[key], 2)}`).join(', ');
}

/** The candidates as a table: agent, skill, score, kept, the features of its score, why. */
export function candidatesTable(candidates) {
  return h('div', {class: 'scroll-x'}, h('table', {class: 'candidates'},
    h('thead', null, h('tr', null, ['Agent', 'Skill', 'Score', 'Kept', 'Features (0 to 1)', 'Reason'].map((c) =>
      h('th', {scope: 'col'}, c)))),
    h('tbody', null, candidates.map((c) => h('tr', {class: c.kept ? 'kept' : 'dropped'},
      h('td', null, h('a', {href: `/ui/agents/${encodeURIComponent(c.agent_id)}`}, t(c.agent_id, 120))),
      h('td', null, t(c.skill_id, 120)),
      h('td', {class: 'num'}, number(c.score)),
      h('td', null, c.kept ? badge('kept') : badge('dropped')),
      h('td', {class: 'features'}, features(c)),
      h('td', null, t(c.reason, 500)))))));
}
