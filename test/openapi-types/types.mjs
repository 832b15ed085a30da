// Checks that the TypeScript types openapi-typescript generates from the served OpenAPI document
// stay as precise as the golden ones (golden/operations.d.ts): for each operation below, the type
// of its parameters, body and every response (status, headers and which of them are optional,
// content) must be the same type, whatever the document shares through components and $ref.
//
//   node types.mjs check  <openapi.json> <work dir>   generate, compare with tsc; exit 1 on a difference
//   node types.mjs golden <openapi.json>              rewrite golden/operations.d.ts from the document
//
// Only the operations listed are kept (with what they refer to), so the golden file stays small
// and the generation quick; a change to one of them that is meant must rewrite the golden file.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import openapiTS, { astToString } from "openapi-typescript";
import ts from "typescript";

const here = dirname(fileURLToPath(import.meta.url));
const golden = join(here, "golden", "operations.d.ts");

// Operations covering every kind of answer: bearer and admin operations (401 with
// WWW-Authenticate, 403), the public login (401 without it), pagination, a body with 409/429/503,
// a custom 502 with its own Retry-After, the OAuth redirect (302 with Location), an operation
// without a body (413/415 all the same), the X-API-Key and OpenAI-format ones and the probes
// (no rate-limit headers).
const operations = [
  ["/api/me/databases", "get"],
  ["/api/me/databases", "post"],
  ["/api/me/databases/{id}", "delete"],
  ["/api/me/dns", "post"],
  ["/api/auth/login", "post"],
  ["/api/auth/login/{provider}", "get"],
  ["/api/users", "get"],
  ["/api/ai/generate", "post"],
  ["/api/ai/v1/chat/completions", "post"],
  ["/healthz", "get"],
  ["/metrics", "get"],
];

// keep returns doc with only the listed operations and the components they refer to.
function keep(doc) {
  const paths = {};
  for (const [path, method] of operations) {
    const op = doc.paths?.[path]?.[method];
    if (!op) throw new Error(`the document has no ${method.toUpperCase()} ${path}`);
    (paths[path] ??= {})[method] = op;
  }
  const components = {};
  const seen = new Set();
  const walk = (node) => {
    if (Array.isArray(node)) return node.forEach(walk);
    if (node === null || typeof node !== "object") return;
    const ref = node.$ref;
    if (typeof ref === "string" && ref.startsWith("#/components/") && !seen.has(ref)) {
      seen.add(ref);
      const [kind, name] = ref.slice("#/components/".length).split("/").map(unescape);
      const target = doc.components?.[kind]?.[name];
      if (target === undefined) throw new Error(`${ref} is not in the document`);
      (components[kind] ??= {})[name] = target;
      walk(target);
    }
    Object.values(node).forEach(walk);
  };
  walk(paths);
  return { openapi: doc.openapi, info: doc.info, paths, components };
}

const unescape = (token) => decodeURIComponent(token).replaceAll("~1", "/").replaceAll("~0", "~");

// typesOf is the types of the listed operations of the document in file, without the comments
// (the descriptions) openapi-typescript writes: only the types are compared.
async function typesOf(file) {
  const doc = keep(JSON.parse(readFileSync(file, "utf8")));
  const source = ts.createSourceFile("operations.d.ts", astToString(await openapiTS(doc)), ts.ScriptTarget.ES2022);
  return ts.createPrinter({ removeComments: true }).printFile(source);
}

// check writes the types of the document next to a file asserting, operation by operation, that
// they are the golden ones, and compiles both with tsc.
async function check(file, work) {
  mkdirSync(work, { recursive: true });
  const current = join(work, "operations.d.ts");
  writeFileSync(current, await typesOf(file));
  const lines = [
    `import type { paths as Golden } from ${JSON.stringify(importPath(work, golden))};`,
    `import type { paths as Current } from "./operations";`,
    "// Deep expands aliases and $ref'd components, so that two ways of writing one type compare equal.",
    "type Deep<T> = T extends object ? { [K in keyof T]: Deep<T[K]> } : T;",
    "// Same is true only for identical types: optional and required members, any and unknown differ.",
    "type Same<A, B> = (<T>() => T extends Deep<A> ? 1 : 2) extends (<T>() => T extends Deep<B> ? 1 : 2) ? true : false;",
    "type Assert<T extends true> = T;",
  ];
  operations.forEach(([path, method], i) => {
    const p = `[${JSON.stringify(path)}][${JSON.stringify(method)}]`;
    lines.push(`export type Op${i} = Assert<Same<Golden${p}, Current${p}>>; // ${method.toUpperCase()} ${path}`);
  });
  const checkFile = join(work, "check.ts");
  writeFileSync(checkFile, lines.join("\n") + "\n");
  const program = ts.createProgram([checkFile], {
    strict: true, noEmit: true, skipLibCheck: false, target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Bundler, types: [],
  });
  const diagnostics = ts.getPreEmitDiagnostics(program);
  for (const d of diagnostics) {
    const message = ts.flattenDiagnosticMessageText(d.messageText, "\n").split("\n")[0];
    if (d.file?.fileName === checkFile) {
      // The line names the operation whose types differ.
      const line = lines[d.file.getLineAndCharacterOfPosition(d.start).line] ?? "";
      console.error(`${line.replace(/^.*\/\/ /, "")}: its generated types are not the golden ones`);
    } else {
      const where = d.file ? `${relative(process.cwd(), d.file.fileName)}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}: ` : "";
      console.error(where + message);
    }
  }
  if (diagnostics.length > 0) {
    console.error(`the generated types differ from ${relative(process.cwd(), golden)} (see ${relative(process.cwd(), checkFile)})`);
    process.exit(1);
  }
  console.log(`the types of ${operations.length} operations are the golden ones`);
}

function importPath(from, to) {
  const p = relative(from, to).replace(/\.d\.ts$/, "");
  return p.startsWith(".") ? p : "./" + p;
}

const [mode, file, work] = process.argv.slice(2);
if (mode === "golden" && file) {
  mkdirSync(dirname(golden), { recursive: true });
  writeFileSync(golden, await typesOf(file));
} else if (mode === "check" && file && work) {
  await check(file, work);
} else {
  console.error("usage: node types.mjs check <openapi.json> <work dir> | golden <openapi.json>");
  process.exit(2);
}
