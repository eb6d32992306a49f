import { z } from 'zod';
import { canonicalJson } from '../canonical-json.js';
import { type AnyRoute, documentedResponses } from './route.js';

type JsonSchema = Record<string, unknown>;

/**
 * The OpenAPI 3.1 document, generated from the same route definitions and zod schemas that
 * validate requests, so it covers exactly the routes that exist. Schemas with a `meta({id})` become
 * named components; an input form that differs from the output form of the same id gets `Input`.
 */
export function buildOpenApi(routes: AnyRoute[], info: { version: string; serverUrl?: string }): JsonSchema {
  const components: Record<string, JsonSchema> = {};
  const convert = schemaConverter(components);

  // Output forms claim the plain names first, whatever the route order; differing inputs get `Input`.
  for (const route of routes) {
    for (const spec of Object.values(route.responses)) if (spec.schema) convert(spec.schema, 'output');
  }

  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const path = route.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
    paths[path] ??= {};
    paths[path][route.method] = operation(route, convert);
  }

  components.Problem = PROBLEM_SCHEMA;
  return {
    openapi: '3.1.0',
    info: {
      title: 'ACIS: Agent Conversation Integration Service',
      version: info.version,
      description: 'Multi-tenant agent conversations for host products. Errors are RFC 9457 problem documents.',
    },
    ...(info.serverUrl && { servers: [{ url: info.serverUrl }] }),
    paths,
    components: {
      schemas: components,
      securitySchemes: {
        bearer: {
          type: 'http',
          scheme: 'bearer',
          description: 'An integration service key (sk_int_...) or a platform JWT from token exchange',
        },
        adminToken: { type: 'http', scheme: 'bearer', description: 'ACIS_ADMIN_TOKEN' },
      },
    },
  };
}

/** Converts a zod schema to JSON Schema whose named parts (`meta({id})`) it stores in `components`, referenced from there. */
type SchemaConverter = (schema: z.ZodType, io: 'input' | 'output') => JsonSchema;

function schemaConverter(components: Record<string, JsonSchema>): SchemaConverter {
  return (schema, io) => {
    const raw = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as JsonSchema;
    const defs = (raw.$defs ?? {}) as Record<string, JsonSchema>;
    const names = new Map<string, string>(Object.keys(defs).map((name) => [name, name]));
    const rewrite = (value: JsonSchema): JsonSchema =>
      JSON.parse(
        JSON.stringify(value).replace(/"#\/\$defs\/([^"]+)"/g, (_, name: string) =>
          JSON.stringify(`#/components/schemas/${names.get(name) ?? name}`),
        ),
      ) as JsonSchema;
    // A name already holding a different schema moves this one to the next free variant. Compare
    // the rewritten form (stored components carry component refs, not $defs refs), and settle to a
    // fixpoint: renaming one def changes every def that references it.
    let renamed = true;
    while (renamed) {
      renamed = false;
      for (const [name, def] of Object.entries(defs)) {
        const current = names.get(name) ?? name;
        const existing = components[current];
        if (existing && canonicalJson(existing) !== canonicalJson(rewrite(def))) {
          names.set(name, nextVariant(name, current, io));
          renamed = true;
        }
      }
    }
    for (const [name, def] of Object.entries(defs)) components[names.get(name) ?? name] = rewrite(def);
    const { $schema: _schema, $defs: _defs, ...rest } = raw;
    return rewrite(rest);
  };
}

/** A route's operation object. Its schemas are converted in a fixed order (parameters, responses, body): component names depend on it. */
function operation(route: AnyRoute, convert: SchemaConverter): Record<string, unknown> {
  const parameters = operationParameters(route, convert);
  const responses = operationResponses(route, convert);
  return {
    operationId: route.operationId,
    summary: route.summary,
    tags: [route.tag],
    security: route.auth === 'signature' ? [] : [{ [route.auth === 'admin' ? 'adminToken' : 'bearer']: [] }],
    ...(parameters.length > 0 && { parameters }),
    ...(route.body && {
      requestBody: {
        required: true,
        content: {
          'application/json': {
            schema: convert(route.body, 'input'),
            ...(route.bodyExample !== undefined && { example: route.bodyExample }),
          },
        },
      },
    }),
    responses,
  };
}

function operationParameters(route: AnyRoute, convert: SchemaConverter): Array<Record<string, unknown>> {
  const parameters = [
    ...objectProperties(route.params, 'input').map(([name, schema]) => ({
      name,
      in: 'path',
      required: true,
      schema: convert(schema, 'input'),
    })),
    ...objectProperties(route.query, 'input').map(([name, schema, required]) => ({
      name,
      in: 'query',
      required,
      schema: convert(schema, 'input'),
    })),
  ];
  if (route.idempotent) {
    parameters.push({
      name: 'Idempotency-Key',
      in: 'header',
      required: false,
      schema: { type: 'string', maxLength: 255 },
    });
  }
  return parameters;
}

/** Every documented status; errors are problem documents. */
function operationResponses(route: AnyRoute, convert: SchemaConverter): Record<string, unknown> {
  const responses: Record<string, unknown> = {};
  for (const [status, spec] of Object.entries(documentedResponses(route))) {
    const numeric = Number(status);
    if (numeric >= 400) {
      responses[status] = {
        description: spec.description,
        content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
      };
    } else {
      responses[status] = {
        description: spec.description,
        ...(spec.schema && { content: { [spec.contentType ?? 'application/json']: { schema: convert(spec.schema, 'output') } } }),
      };
    }
  }
  return responses;
}

/** `Tenant` → `TenantInput` → `TenantInput2` … (outputs, which should never differ: `Tenant2` …). */
function nextVariant(name: string, current: string, io: 'input' | 'output'): string {
  const base = io === 'input' ? `${name}Input` : name;
  if (current === name && io === 'input') return base;
  const n = current === base ? 1 : Number(current.slice(base.length));
  return `${base}${n + 1}`;
}

/** [name, schema, required] of each property of an object schema (path and query parameters). */
function objectProperties(schema: z.ZodType | undefined, io: 'input'): [string, z.ZodType, boolean][] {
  if (!schema) return [];
  let inner: z.ZodType = schema;
  // Unwrap refinements (zod 4 keeps them on the object itself) to reach the shape.
  while (!(inner instanceof z.ZodObject)) {
    const def = (inner as { _zod?: { def?: { innerType?: z.ZodType; in?: z.ZodType } } })._zod?.def;
    const next = def?.innerType ?? def?.in;
    if (!next) return [];
    inner = next;
  }
  return Object.entries(inner.shape as Record<string, z.ZodType>).map(([name, property]) => [
    name,
    property,
    io === 'input' ? !property.safeParse(undefined).success : true,
  ]);
}

const PROBLEM_SCHEMA: JsonSchema = {
  type: 'object',
  description: 'RFC 9457 problem details',
  required: ['type', 'title', 'status'],
  properties: {
    type: { type: 'string', format: 'uri-reference', description: '{base_url}/problems/{slug}' },
    title: { type: 'string' },
    status: { type: 'integer', format: 'int32' },
    detail: { type: 'string' },
    instance: { type: 'string', format: 'uri-reference' },
    request_id: { type: 'string' },
    conflicting_resource_id: { type: 'string' },
    errors: {
      type: 'array',
      items: {
        type: 'object',
        required: ['pointer', 'message'],
        properties: { pointer: { type: 'string' }, message: { type: 'string' } },
      },
    },
  },
};
