// The coordinator's HTTP API as the web UI uses it: the token lives in sessionStorage (gone when
// the tab closes), every call sends it, and errors come back as the API's own code and message.
// Nothing is taken from the browser's cache: a page opened right after a change shows it.

const BASE = '/coord/v1';
const TOKEN_KEY = 'coord.token';
const USER_KEY = 'coord.user';

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export const session = {
  get token() {
    return sessionStorage.getItem(TOKEN_KEY);
  },
  get user() {
    return JSON.parse(sessionStorage.getItem(USER_KEY) ?? 'null');
  },
  save(token, user) {
    sessionStorage.setItem(TOKEN_KEY, token);
    sessionStorage.setItem(USER_KEY, JSON.stringify(user));
  },
  clear() {
    sessionStorage.removeItem(TOKEN_KEY);
    sessionStorage.removeItem(USER_KEY);
  },
};

async function call(method, path, body, extraHeaders = {}) {
  const headers = { accept: 'application/json', ...extraHeaders };
  if (session.token) headers.authorization = `Bearer ${session.token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(BASE + path, {
    method,
    headers,
    cache: 'no-store',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  const data = text ? JSON.parse(text) : null;
  if (!res.ok) {
    const error = data?.error ?? {};
    if (res.status === 401) session.clear();
    throw new ApiError(
      res.status,
      error.code ?? `HTTP_${res.status}`,
      error.message ?? res.statusText,
    );
  }
  return data;
}

export const get = (path) => call('GET', path);
/** A POST; `headers` adds headers, e.g. the `x-request-id` that makes a repeat answer the same. */
export const post = (path, body, headers) => call('POST', path, body, headers);

/** A new request id (`X-Request-Id`): a change sent again with it is not made twice. */
export const newRequestId = () =>
  globalThis.crypto?.randomUUID?.() ??
  `ui-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 12)}`;

export async function login(username, password) {
  const reply = await post('/auth/login', { username, password });
  session.save(reply.accessToken, { username, roles: reply.roles ?? [] });
  return reply;
}

/** `/streams/{sp}/groups/{cg}` with both names percent-encoded. */
export const groupPath = (sp, cg) =>
  `/streams/${encodeURIComponent(sp)}/groups/${encodeURIComponent(cg)}`;

/**
 * Follows a server-sent events stream with the bearer token (EventSource cannot send headers).
 * Calls `onEvent(name, data)` per event, and `onEnd(error)` once when the stream ends by itself
 * (`error` null when the server closed it); returns a function that stops it (no `onEnd` then).
 */
export function follow(path, onEvent, onEnd) {
  const abort = new AbortController();
  (async () => {
    const res = await fetch(BASE + path, {
      headers: { authorization: `Bearer ${session.token}`, accept: 'text/event-stream' },
      cache: 'no-store',
      signal: abort.signal,
    });
    if (!res.ok || !res.body)
      throw new ApiError(res.status, `HTTP_${res.status}`, 'stream refused');
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.indexOf('\n\n')) !== -1) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        let name = 'message';
        const data = [];
        for (const line of block.split('\n')) {
          if (line.startsWith('event: ')) name = line.slice(7);
          else if (line.startsWith('data: ')) data.push(line.slice(6));
        }
        if (data.length > 0) onEvent(name, JSON.parse(data.join('\n')));
      }
    }
  })().then(
    () => {
      if (!abort.signal.aborted) onEnd?.(null);
    },
    (error) => {
      if (!abort.signal.aborted) onEnd?.(error);
    },
  );
  return () => abort.abort();
}
