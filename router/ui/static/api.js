// The console's only way to data: the public REST API, with the viewer's credential in the
// Authorization header (never a cookie, never in a URL), kept in sessionStorage.

const KEY = 'switchboard.credential';

export function credential() {
  return sessionStorage.getItem(KEY) || '';
}

export function setCredential(value) {
  if (value) sessionStorage.setItem(KEY, value);
  else sessionStorage.removeItem(KEY);
}

/** An API error: status, the API's code and message, its details. */
export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

/** The headers every request carries (the credential, when there is one). */
export function authHeaders() {
  const value = credential();
  return value ? {Authorization: `Bearer ${value}`} : {};
}

/** Call the API: the parsed JSON answer, null for 204, ApiError for anything else. */
export async function api(path, {method = 'GET', body, signal} = {}) {
  const headers = {Accept: 'application/json', ...authHeaders()};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let resp;
  try {
    resp = await fetch(path, {
      method, headers, signal, credentials: 'omit', cache: 'no-store', redirect: 'error',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (error) {
    if (error.name === 'AbortError') throw error;
    throw new ApiError(0, 'network_error', `Switchboard did not answer (${error.message})`);
  }
  if (resp.status === 204) return null;
  const text = await resp.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!resp.ok) {
    const error = (data && data.error) || {};
    throw new ApiError(resp.status, error.code || 'http_error',
      error.message || `${resp.status} ${resp.statusText}`, error.details);
  }
  return data;
}

/** A query string from an object (arrays repeat the name; empty values are left out). */
export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    for (const one of [value].flat()) {
      if (one !== undefined && one !== null && String(one).trim() !== '') {
        search.append(name, String(one).trim());
      }
    }
  }
  const text = search.toString();
  return text ? `?${text}` : '';
}

/** What the viewer may do: "admin" (an admin read answers), else "viewer". Only asked
 * with a credential: without one, the API's admin routes are closed anyway. */
export async function role() {
  if (!credential()) return 'anonymous';
  try {
    await api('/api/v1/audit?limit=1');
    return 'admin';
  } catch (error) {
    if (error.status === 401) return 'rejected';
    return 'viewer';
  }
}
