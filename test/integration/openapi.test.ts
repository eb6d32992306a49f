import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type AnyRoute, documentedResponses } from '../../api-server/core/http/route.js';
import { allRoutes } from '../../api-server/routes.js';
import { startTestServer, type TestServer } from '../helpers/test-server.js';

let t: TestServer;
let doc: any;

beforeAll(async () => {
  t = await startTestServer();
  const res = await t.request('GET', '/openapi.json');
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  doc = res.body;
});
afterAll(() => t.stop());

const openApiPath = (route: AnyRoute) => route.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
const operation = (route: AnyRoute) => doc.paths[openApiPath(route)]?.[route.method];
const label = (route: AnyRoute) => `${route.method.toUpperCase()} ${route.path}`;

/** Every `$ref` anywhere in a JSON value, with where it was found. */
function collectRefs(value: unknown, at = '#', out: [string, string][] = []): [string, string][] {
  if (Array.isArray(value)) {
    value.forEach((item, i) => {
      collectRefs(item, `${at}/${i}`, out);
    });
  } else if (value !== null && typeof value === 'object') {
    for (const [key, child] of Object.entries(value)) {
      if (key === '$ref' && typeof child === 'string') out.push([at, child]);
      else collectRefs(child, `${at}/${key}`, out);
    }
  }
  return out;
}

function resolvePointer(root: unknown, ref: string): unknown {
  if (!ref.startsWith('#/')) return undefined;
  return ref
    .slice(2)
    .split('/')
    .map((part) => decodeURIComponent(part).replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce<unknown>(
      (node, part) => (node !== null && typeof node === 'object' ? (node as Record<string, unknown>)[part] : undefined),
      root,
    );
}

/**
 * A schema with every reference replaced by its target, so two documents that name their components
 * differently compare by meaning. A reference back into its own chain (recursion) is cut.
 */
function inline(schema: unknown, lookup: (ref: string) => unknown, chain: string[] = []): unknown {
  if (Array.isArray(schema)) return schema.map((item) => inline(item, lookup, chain));
  if (schema === null || typeof schema !== 'object') return schema;
  const { $ref, ...rest } = schema as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(rest)) out[key] = inline(value, lookup, chain);
  if (typeof $ref !== 'string') return out;
  if (chain.includes($ref)) return { ...out, recursive: true };
  return { ...(inline(lookup($ref), lookup, [...chain, $ref]) as object), ...out };
}

/** The JSON Schema zod itself makes of a schema, fully inlined. */
function zodSchema(schema: z.ZodType, io: 'input' | 'output'): unknown {
  const raw = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as Record<string, any>;
  const { $schema: _schema, $defs = {}, ...root } = raw;
  return inline(root, (ref) => $defs[ref.replace('#/$defs/', '')]);
}

const documentedSchema = (schema: unknown) => inline(schema, (ref) => resolvePointer(doc, ref));

/** The refs reachable from a response, following components transitively. */
function documentedSchemaRefsOnly(root: unknown): unknown {
  const seen = new Set<string>();
  const reachable: unknown[] = [root];
  for (let i = 0; i < reachable.length; i++) {
    for (const [, ref] of collectRefs(reachable[i])) {
      if (seen.has(ref)) continue;
      seen.add(ref);
      reachable.push(resolvePointer(doc, ref));
    }
  }
  return reachable;
}

describe('GET /openapi.json', () => {
  it('is served without credentials as an OpenAPI 3.1 document', () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    expect(doc.info).toMatchObject({ title: expect.any(String), version: expect.any(String) });
    expect(doc.components.securitySchemes).toMatchObject({
      bearer: { type: 'http', scheme: 'bearer' },
      adminToken: { type: 'http', scheme: 'bearer' },
    });
  });

  it('has exactly the registered routes, each with its method, operationId and credential', () => {
    const documented: string[] = [];
    for (const [path, item] of Object.entries<Record<string, any>>(doc.paths)) {
      expect(path, 'Koa-style parameters must not leak into the document').not.toContain(':');
      for (const method of Object.keys(item)) documented.push(`${method} ${path}`);
    }
    expect(documented.sort()).toEqual(allRoutes.map((route) => `${route.method} ${openApiPath(route)}`).sort());

    for (const route of allRoutes) {
      const op = operation(route);
      expect(op, label(route)).toBeDefined();
      expect(op.operationId, label(route)).toBe(route.operationId);
      expect(op.summary, label(route)).toBe(route.summary);
      expect(op.tags, label(route)).toEqual([route.tag]);
      // Webhooks carry no bearer: their body's signature is checked instead.
      const security = route.auth === 'signature' ? [] : [{ [route.auth === 'admin' ? 'adminToken' : 'bearer']: [] }];
      expect(op.security, label(route)).toEqual(security);
    }
    const ids = allRoutes.map((route) => route.operationId);
    expect(new Set(ids).size, 'operationIds are unique').toBe(ids.length);
  });

  it('declares every path parameter in braces, required, and the query parameters of list routes', () => {
    for (const route of allRoutes) {
      const op = operation(route);
      const names = [...route.path.matchAll(/:([A-Za-z0-9_]+)/g)].map((m) => m[1]);
      for (const name of names) expect(openApiPath(route), label(route)).toContain(`{${name}}`);
      const pathParams = (op.parameters ?? []).filter((p: any) => p.in === 'path');
      expect(pathParams.map((p: any) => p.name).sort(), label(route)).toEqual([...names].sort());
      for (const param of pathParams) {
        expect(param.required, `${label(route)} ${param.name}`).toBe(true);
        expect(param.schema, `${label(route)} ${param.name}`).toBeDefined();
      }
      if (route.query) {
        const queryNames = (op.parameters ?? []).filter((p: any) => p.in === 'query').map((p: any) => p.name);
        expect(queryNames.length, label(route)).toBeGreaterThan(0);
      }
      const idempotencyHeader = (op.parameters ?? []).some((p: any) => p.in === 'header' && p.name === 'Idempotency-Key');
      expect(idempotencyHeader, label(route)).toBe(Boolean(route.idempotent));
    }
    const list = allRoutes.find((route) => route.operationId === 'listTenants')!;
    const query = operation(list).parameters.filter((p: any) => p.in === 'query');
    expect(query.find((p: any) => p.name === 'limit')).toMatchObject({ required: false, schema: { minimum: 1, maximum: 100 } });
    expect(query.map((p: any) => p.name)).toEqual(expect.arrayContaining(['starting_after', 'ending_before']));
  });

  it('has a JSON request body exactly where the route takes one', () => {
    for (const route of allRoutes) {
      const op = operation(route);
      if (route.body) {
        expect(op.requestBody?.content?.['application/json']?.schema, label(route)).toBeDefined();
        expect(op.requestBody.required, label(route)).toBe(true);
      } else {
        expect(op.requestBody, label(route)).toBeUndefined();
      }
    }
  });

  it('documents every declared status, success bodies with their schema and errors as problems', () => {
    for (const route of allRoutes) {
      const op = operation(route);
      const declared = documentedResponses(route);
      expect(Object.keys(op.responses).sort(), label(route)).toEqual(Object.keys(declared).sort());
      if (route.auth !== 'admin') expect(declared[429]?.description, `${label(route)} 429`).toMatch(/rate-limited, with Retry-After$/);
      const success = Object.keys(route.responses).filter((status) => Number(status) >= 200 && Number(status) < 300);
      expect(success.length, `${label(route)} has a 2xx response`).toBeGreaterThan(0);
      for (const [status, spec] of Object.entries(declared)) {
        const documented = op.responses[status];
        expect(documented.description, `${label(route)} ${status}`).toBe(spec.description);
        if (Number(status) >= 400) {
          expect(documented.content['application/problem+json'].schema, `${label(route)} ${status}`).toEqual({
            $ref: '#/components/schemas/Problem',
          });
        } else if (spec.schema) {
          const schema = documented.content?.[spec.contentType ?? 'application/json']?.schema;
          expect(schema, `${label(route)} ${status}`).toBeDefined();
          expect(Object.keys(schema).length, `${label(route)} ${status}`).toBeGreaterThan(0);
        } else {
          expect(Number(status), `${label(route)} ${status} has no body schema`).toBe(204);
        }
      }
      // Every credentialed route says how it fails authentication.
      expect(route.responses[401], `${label(route)} declares 401`).toBeDefined();
      if (route.auth === 'service') expect(route.responses[403], `${label(route)} declares 403`).toBeDefined();
    }
  });

  it('documents each body with the very schema that validates it (inputs as accepted, outputs as sent)', () => {
    for (const route of allRoutes) {
      const op = operation(route);
      if (route.body) {
        expect(documentedSchema(op.requestBody.content['application/json'].schema), `${label(route)} request`).toEqual(
          zodSchema(route.body, 'input'),
        );
      }
      for (const [status, spec] of Object.entries(route.responses)) {
        if (!spec.schema) continue;
        const documented = op.responses[status].content[spec.contentType ?? 'application/json'].schema;
        expect(documentedSchema(documented), `${label(route)} ${status}`).toEqual(zodSchema(spec.schema, 'output'));
      }
    }
  });

  it('names output objects plainly; only differing input forms get an Input component', () => {
    for (const route of allRoutes) {
      for (const [status, spec] of Object.entries(route.responses)) {
        if (!spec.schema) continue;
        const refs = collectRefs(documentedSchemaRefsOnly(operation(route).responses[status]));
        for (const [at, ref] of refs) expect(ref, `${label(route)} ${status} ${at}`).not.toMatch(/Input\d*$/);
      }
    }
    for (const name of Object.keys(doc.components.schemas).filter((n) => n.endsWith('Input'))) {
      const plain = doc.components.schemas[name.slice(0, -'Input'.length)];
      expect(plain, `${name} has an output form`).toBeDefined();
      expect(documentedSchema(doc.components.schemas[name]), name).not.toEqual(documentedSchema(plain));
    }
  });

  it('resolves every $ref to a component schema', () => {
    const refs = collectRefs(doc);
    expect(refs.length).toBeGreaterThan(0);
    for (const [at, ref] of refs) {
      expect(ref, at).toMatch(/^#\/components\/schemas\/[A-Za-z0-9_.-]+$/);
      expect(resolvePointer(doc, ref), `${at} → ${ref}`).toBeTypeOf('object');
    }
    // Named output objects become components rather than inline copies.
    expect(doc.components.schemas.Problem.required).toEqual(['type', 'title', 'status']);
    expect(doc.components.schemas.Tenant).toBeDefined();
  });

  it('describes token exchange as the spec does', () => {
    const route = allRoutes.find((r) => r.operationId === 'exchangeToken')!;
    const op = operation(route);
    expect(openApiPath(route)).toBe('/auth/token-exchange');
    let body = op.requestBody.content['application/json'].schema;
    if (body.$ref) body = resolvePointer(doc, body.$ref);
    expect(body.required.sort()).toEqual(['tenant_external_id', 'user_external_id']);
    expect(body.properties.ttl_seconds).toMatchObject({ type: 'integer', minimum: 60, maximum: 3600, default: 900 });
    expect(body.properties.tenant_external_id).toMatchObject({ type: 'string', maxLength: 255 });
    let token = op.responses['200'].content['application/json'].schema;
    if (token.$ref) token = resolvePointer(doc, token.$ref);
    expect(Object.keys(token.properties).sort()).toEqual(['expires_at', 'object', 'tenant_id', 'token', 'token_type', 'user_id']);
    expect(token.properties.token_type).toMatchObject({ const: 'Bearer' });
  });
});
