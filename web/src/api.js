// agentd's public API as the page uses it: the key, errors in words, and SSE frames.
export const state = {
  key: localStorage.getItem("agentd.key") || "",
  user: localStorage.getItem("agentd.user") || "",
  me: null,
  agents: [],
  conversationId: null,
  conversation: null,
  active: null, // {runId, conversationId, seq, events: [[kind, data]]}
  controller: null,
};

export class ApiError extends Error {
  constructor(status, message, retryAfter, code) {
    super(message);
    this.status = status;
    this.retryAfter = retryAfter;
    this.code = code;
  }
}

// Extra request headers from the sign-in hook (a token), else the API key.
let authorize = () => (state.key ? { Authorization: "Bearer " + state.key } : {});
export function setAuthorizer(fn) { authorize = fn; }

export function userId() {
  return (state.me && state.me.user_id) || state.user.trim();
}

export function userPath(rest) {
  return `/api/${encodeURIComponent(userId())}${rest}`;
}

export async function api(path, options) {
  const opts = Object.assign({}, options || {});
  opts.headers = Object.assign({}, authorize(), opts.headers || {});
  if (opts.json !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(opts.json);
    delete opts.json;
  }
  let response;
  try {
    response = await fetch(path, opts);
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(0, "network");
  }
  if (!response.ok) throw await errorOf(response);
  return response;
}

export async function apiJson(path, options) {
  return (await api(path, options)).json();
}

async function errorOf(response) {
  let message = response.statusText;
  let code;
  try {
    const body = await response.json();
    if (body && body.error && body.error.message) message = body.error.message;
    if (body && body.error) code = body.error.code || body.error.type;
  } catch (_) { /* not JSON */ }
  return new ApiError(response.status, message, response.headers.get("Retry-After"), code);
}

// Every failure in words, with what to do about it.
export function describe(error) {
  if (!(error instanceof ApiError)) return "Something went wrong: " + (error && error.message ? error.message : error);
  const wait = error.retryAfter ? ` Try again in ${error.retryAfter} s.` : " Try again in a moment.";
  switch (error.status) {
    case 0: return "The connection to agentd dropped. Check that the server is running and reachable, then reload the page.";
    case 401: return state.key
      ? "The API key was refused (401): enter a valid key under Key and press Connect."
      : "This server needs an API key (401): enter yours under Key and press Connect.";
    case 403: return "This API key may not do that (403): " + error.message;
    case 404: return "Not found (404): " + error.message;
    case 409: return "Not now (409): " + error.message;
    case 413: return error.code === "attachment_too_large"
      ? "An attached file is too large (413): " + error.message
      : "That message is too large (413): shorten it.";
    case 415: return "An attached file's type is not accepted (415): " + error.message;
    case 429: return "Too many requests (429): " + error.message + "." + wait;
    case 503: return "agentd is busy or restarting (503): " + error.message + "." + wait;
    default: return `The request failed (${error.status}): ${error.message}`;
  }
}

// Reads SSE frames, calling onEvent(seq, kind, data); true once run.finished arrived.
export async function readFrames(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let finished = false;
  for (;;) {
    let chunk;
    try {
      chunk = await reader.read();
    } catch (e) {
      if (e.name === "AbortError") throw e;
      return finished;
    }
    if (chunk.done) return finished;
    buffer += decoder.decode(chunk.value, { stream: true }).replace(/\r\n/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let id = null, kind = "message";
      const data = [];
      for (const line of frame.split("\n")) {
        if (line.startsWith("id:")) id = Number(line.slice(3).trim());
        else if (line.startsWith("event:")) kind = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (!data.length) continue;
      let parsed;
      try { parsed = JSON.parse(data.join("\n")); } catch (_) { continue; }
      onEvent(id === null ? 0 : id, kind, parsed);
      if (kind === "run.finished") finished = true;
    }
  }
}
