// The OpenID provider the identity tests run against (tests/api/identity.rs): the npm package
// oidc-provider (OpenID-certified), on 127.0.0.1 at a free port, issuing JWT access tokens for
// the resource AUDIENCE (RFC 8707). Prints `ISSUER=<url>` once it listens, then serves until
// killed.
//
// Clients:
// - `svc-rs256`, `svc-es256`, `svc-eddsa` (secret `svc-secret`): client_credentials, their
//   tokens signed with that algorithm; `sub` is the client id.
// - `page`: the web page's public client (no secret, PKCE), a native app on a loopback redirect
//   URI of any port (RFC 8252), signing users in through the provider's development login form.
//
// Environment: AUDIENCE (default https://agentd.test).
import http from "node:http";
import { generateKeyPair, exportJWK } from "jose";
import Provider from "oidc-provider";

const AUDIENCE = process.env.AUDIENCE || "https://agentd.test";
const SCOPES = "openid agents:*:run agents:chat:run runs:read keys:manage agentd:admin";
const ALG_OF_CLIENT = { "svc-rs256": "RS256", "svc-es256": "ES256", "svc-eddsa": "EdDSA", page: "RS256" };

async function privateJwk(alg, options) {
  const { privateKey } = await generateKeyPair(alg, { extractable: true, ...options });
  return { ...(await exportJWK(privateKey)), alg, use: "sig", kid: `key-${alg.toLowerCase()}` };
}

const keys = [await privateJwk("RS256"), await privateJwk("ES256"), await privateJwk("EdDSA", { crv: "Ed25519" })];

const server = http.createServer();
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const serviceClient = (id) => ({
  client_id: id,
  client_secret: "svc-secret",
  grant_types: ["client_credentials"],
  response_types: [],
  redirect_uris: [],
  scope: SCOPES,
});

const provider = new Provider(issuer, {
  jwks: { keys },
  scopes: SCOPES.split(" "),
  clients: [
    serviceClient("svc-rs256"),
    serviceClient("svc-es256"),
    serviceClient("svc-eddsa"),
    {
      client_id: "page",
      application_type: "native",
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code"],
      response_types: ["code"],
      redirect_uris: ["http://127.0.0.1/"],
      post_logout_redirect_uris: ["http://127.0.0.1/"],
      scope: SCOPES,
    },
  ],
  pkce: { required: () => true },
  // The page is served from agentd's origin, another port: let it call the token endpoint.
  clientBasedCORS: () => true,
  features: {
    devInteractions: { enabled: true },
    clientCredentials: { enabled: true },
    rpInitiatedLogout: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: async () => AUDIENCE,
      useGrantedResource: async () => true,
      getResourceServerInfo: async (_ctx, resource, client) => ({
        scope: SCOPES,
        audience: resource,
        accessTokenFormat: "jwt",
        accessTokenTTL: 600,
        jwt: { sign: { alg: ALG_OF_CLIENT[client.clientId] || "RS256" } },
      }),
    },
  },
  findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
});
provider.proxy = false;
server.on("request", provider.callback());
process.stdout.write(`ISSUER=${issuer}\n`);
