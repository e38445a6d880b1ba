// Signing the page in with the organisation's identity provider (SPEC §12): authorization code
// with PKCE, all in the browser (the page is a public client: no secret). GET /v1/signin says
// whether the server has a `pageClientId` and where the issuer's endpoints are; the access token
// is kept in sessionStorage (this tab only) until it expires or the user signs out. Registered
// as the page's `signin` hook: ready() finishes a sign-in coming back from the issuer before the
// page connects, authorize() gives the bearer (the API key when not signed in), mount(slot)
// shows Sign in / Sign out.
import { state } from "./api.js";
import { hooks } from "./hooks.js";
import { notify } from "./ui.js";

const TOKEN_STORE = "agentd.token";
const PENDING_STORE = "agentd.signin";
let settings = null;

function b64url(bytes) {
  let text = "";
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function random(length) {
  const bytes = new Uint8Array(length);
  crypto.getRandomValues(bytes);
  return b64url(bytes);
}

async function challengeOf(verifier) {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  return b64url(new Uint8Array(digest));
}

function redirectUri() {
  return location.origin + "/";
}

function storedToken() {
  try {
    const token = JSON.parse(sessionStorage.getItem(TOKEN_STORE) || "null");
    if (token && token.access_token && token.expires_at > Date.now()) return token;
  } catch (_) { /* not JSON: dropped below */ }
  sessionStorage.removeItem(TOKEN_STORE);
  return null;
}

function say(text) {
  notify(text);
}

async function signIn() {
  const verifier = random(32);
  const nonce = random(16);
  sessionStorage.setItem(PENDING_STORE, JSON.stringify({ verifier, state: nonce }));
  const params = new URLSearchParams({
    response_type: "code",
    client_id: settings.client_id,
    redirect_uri: redirectUri(),
    scope: settings.scope,
    state: nonce,
    code_challenge: await challengeOf(verifier),
    code_challenge_method: "S256",
  });
  if (settings.resource) params.set("resource", settings.resource);
  location.assign(settings.authorization_endpoint + "?" + params.toString());
}

// Back from the issuer with `?code=…&state=…`: trade the code for a token.
async function finish(query) {
  const pending = JSON.parse(sessionStorage.getItem(PENDING_STORE) || "null");
  sessionStorage.removeItem(PENDING_STORE);
  history.replaceState(null, "", "/");
  if (query.get("error")) {
    return say("Sign-in failed at the identity provider: " + (query.get("error_description") || query.get("error")));
  }
  if (!pending || pending.state !== query.get("state")) {
    return say("Sign-in failed: the answer does not belong to this page's sign-in. Sign in again.");
  }
  const body = new URLSearchParams({
    grant_type: "authorization_code",
    code: query.get("code"),
    redirect_uri: redirectUri(),
    client_id: settings.client_id,
    code_verifier: pending.verifier,
  });
  if (settings.resource) body.set("resource", settings.resource);
  let answer;
  try {
    const response = await fetch(settings.token_endpoint, { method: "POST", body });
    answer = await response.json();
    if (!response.ok) throw new Error(answer.error_description || answer.error || response.status);
  } catch (error) {
    return say("Sign-in failed: the identity provider did not give a token (" + error.message + ").");
  }
  const lifetime = Number(answer.expires_in || 300) * 1000;
  sessionStorage.setItem(TOKEN_STORE, JSON.stringify({
    access_token: answer.access_token,
    expires_at: Date.now() + lifetime,
  }));
}

function signOut() {
  sessionStorage.removeItem(TOKEN_STORE);
  if (!settings.end_session_endpoint) return location.assign("/");
  const params = new URLSearchParams({ client_id: settings.client_id, post_logout_redirect_uri: redirectUri() });
  location.assign(settings.end_session_endpoint + "?" + params.toString());
}

function render(slot) {
  if (!slot || !settings || !settings.enabled) return;
  const signedIn = !!storedToken();
  const button = document.createElement("button");
  button.type = "button";
  button.id = signedIn ? "sign-out" : "sign-in";
  button.textContent = signedIn ? "Sign out" : "Sign in";
  button.addEventListener("click", signedIn ? signOut : signIn);
  slot.replaceChildren(button);
}

async function start() {
  try {
    const response = await fetch("/v1/signin");
    settings = response.ok ? await response.json() : null;
  } catch (_) {
    settings = null;
  }
  if (!settings || !settings.enabled) return;
  const query = new URLSearchParams(location.search);
  if (query.has("code") || query.has("error")) await finish(query);
}

const started = start();

// For tests and scripts in the page: the bearer the page sends once signed in.
window.agentdSignIn = { token: () => (storedToken() || {}).access_token || "" };

hooks.register("signin", {
  ready: () => started,
  mount: (slot) => started.then(() => render(slot)),
  authorize: () => {
    const token = (storedToken() || {}).access_token || state.key;
    return token ? { Authorization: "Bearer " + token } : {};
  },
  user: () => "",
});
