// Runs against a live service at PROVISIONER_URL (test/tsclient starts one): the calls an SPA makes
// first, through the typed client.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";

import { ApiError, createProvisionerClient, unwrap } from "../src/index.js";

const baseUrl = process.env.PROVISIONER_URL;
if (!baseUrl) throw new Error("PROVISIONER_URL is not set");
const engine = process.env.PROVISIONER_ENGINE === "mysql" ? "mysql" : "postgres";

let token: string | undefined;
const api = createProvisionerClient({ baseUrl, token: () => token });
const email = `ts-${randomBytes(6).toString("hex")}@example.com`;
const password = `Ts-client-${randomBytes(8).toString("hex")}`;

test("register, then sign in with the same password", async () => {
  const registered = await unwrap(
    api.POST("/api/auth/register", { body: { fullName: "TS Client", organization: "Acme", email, password } }),
  );
  assert.equal(registered.user.email, email);
  const session = await unwrap(api.POST("/api/auth/login", { body: { email, password } }));
  assert.ok(session.accessToken, "a login without a second factor answers an access token");
  token = session.accessToken ?? undefined;
  const me = await unwrap(api.GET("/api/me"));
  assert.equal(me.email, email);
});

test("create a database and find it in the list", async () => {
  const created = await unwrap(api.POST("/api/me/databases", { body: { engine, name: "ts client data" } }));
  assert.equal(created.engine, engine);
  const list = (await unwrap(api.GET("/api/me/databases"))) ?? [];
  const found = list.find((d) => d.databaseInstanceId === created.databaseInstanceId);
  assert.ok(found, "the new database is listed");
  assert.equal(found.name, "ts client data");
});

test("a 400 lists every invalid field", async () => {
  const err = await unwrap(
    api.POST("/api/auth/register", { body: { fullName: "", organization: "Acme", email: "not-an-email", password: "x" } }),
  ).then(
    () => assert.fail("an invalid registration was accepted"),
    (e: unknown) => e,
  );
  assert.ok(err instanceof ApiError);
  assert.equal(err.status, 400);
  assert.ok(err.field("email"), `email is named: ${JSON.stringify(err.fieldErrors)}`);
  assert.ok(err.field("password"), `password is named: ${JSON.stringify(err.fieldErrors)}`);
});

test("a 429 says when to retry", async () => {
  // The service under test allows few forgot-password calls per address (RateLimit:ForgotPasswordPerIp).
  let limited: ApiError | undefined;
  for (let i = 0; i < 50 && !limited; i++) {
    try {
      await unwrap(api.POST("/api/auth/forgot-password", { body: { email } }));
    } catch (e) {
      if (e instanceof ApiError && e.status === 429) limited = e;
      else throw e;
    }
  }
  assert.ok(limited, "the limit was reached");
  assert.ok(limited.retryAfter !== undefined && limited.retryAfter > 0, `Retry-After: ${limited.retryAfter}`);
});
