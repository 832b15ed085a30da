// A typed client for the provisioning service. Requests go through openapi-fetch with the types
// openapi-typescript generates from the served OpenAPI document (src/schema.d.ts); `unwrap` turns an
// answer into its envelope's `data`, or throws an ApiError carrying the status, the message, every
// invalid field (400) and Retry-After (429, 502).
import createClient, { type Client } from "openapi-fetch";
import type { components, paths } from "./schema.js";

export type { components, paths };

/** One invalid field of a 400 answer. */
export type FieldError = components["schemas"]["FieldError"];

/** An answer outside 2xx, with what the envelope said. */
export class ApiError extends Error {
  readonly status: number;
  /** Every invalid field (400); empty otherwise. */
  readonly fieldErrors: FieldError[];
  /** Seconds to wait before retrying (429, 502 of a provider in backoff), when the service said. */
  readonly retryAfter: number | undefined;
  /** The envelope's data: the resource as stored on a 502, null otherwise. */
  readonly data: unknown;
  readonly requestId: string | undefined;

  constructor(response: Response, body: unknown) {
    const envelope = (body ?? {}) as { message?: unknown; errors?: unknown; data?: unknown };
    const message = typeof envelope.message === "string" ? envelope.message : response.statusText;
    super(`${response.status} ${message}`);
    this.name = "ApiError";
    this.status = response.status;
    this.fieldErrors = Array.isArray(envelope.errors) ? (envelope.errors as FieldError[]) : [];
    this.data = envelope.data ?? null;
    const after = response.headers.get("Retry-After");
    this.retryAfter = after !== null && /^\d+$/.test(after) ? Number(after) : undefined;
    this.requestId = response.headers.get("X-Request-Id") ?? undefined;
  }

  /** The message of the given field's error, if that field was refused. */
  field(name: string): string | undefined {
    return this.fieldErrors.find((e) => e.field === name)?.message;
  }
}

export interface ClientOptions {
  /** The service's address, e.g. "https://provisioner.example.com". */
  baseUrl: string;
  /** The current access token; called before each request (return undefined to send none). */
  token?: () => string | undefined;
  fetch?: typeof globalThis.fetch;
}

/** A client whose methods are typed by path: client.GET("/api/me/databases"). */
export type ProvisionerClient = Client<paths>;

export function createProvisionerClient(options: ClientOptions): ProvisionerClient {
  const client = createClient<paths>({ baseUrl: options.baseUrl, fetch: options.fetch });
  const token = options.token;
  if (token) {
    client.use({
      onRequest({ request }) {
        const t = token();
        if (t) request.headers.set("Authorization", `Bearer ${t}`);
        return request;
      },
    });
  }
  return client;
}

/** What a successful answer's envelope carries in `data`. */
export type DataOf<T> = T extends { data: infer D } ? D : never;

type Answer<T> = { data?: T; error?: unknown; response: Response };

/** Awaits a call and answers its envelope's data; throws ApiError for any status outside 2xx. */
export async function unwrap<T>(call: Promise<Answer<T>>): Promise<DataOf<T>> {
  const { data, error, response } = await call;
  if (!response.ok || data === undefined) {
    throw new ApiError(response, error);
  }
  return (data as { data: DataOf<T> }).data;
}
