/**
 * The OpenAPI document linted by Redocly's recommended ruleset (the library behind `redocly lint`),
 * plus the rules a host adapter relies on: an operationId and a summary on every operation, every
 * 4xx answer a problem document, and an example on every request body that the route's own schema
 * accepts (so examples cannot drift from what the server validates).
 */
import { createConfig, lintFromString } from '@redocly/openapi-core';
import { describe, expect, it } from 'vitest';
import { API_VERSION } from '../../api-server/app.js';
import { buildOpenApi } from '../../api-server/core/http/openapi.js';
import { allRoutes } from '../../api-server/routes.js';

const document = buildOpenApi(allRoutes, { version: API_VERSION, serverUrl: 'https://acis.acme.test' });

describe('the OpenAPI document', () => {
  it("passes Redocly's recommended rules, with operation summaries and RFC 9457 problem answers required", async () => {
    const config = await createConfig({
      extends: ['recommended'],
      rules: {
        'operation-summary': 'error',
        'operation-operationId': 'error',
        'operation-4xx-response': 'error',
        'operation-4xx-problem-details-rfc7807': 'error',
        // The interface fixes `/tenants/by-external-id/{external_id}` beside `/tenants/{tenant_id}/users`:
        // no id can be `by-external-id` (ids carry a prefix and `_`), so the two never meet.
        'no-ambiguous-paths': 'off',
        // ACIS is not released under a license (package.json: UNLICENSED), so the document names none.
        'info-license': 'off',
      },
    });
    const problems = await lintFromString({ source: JSON.stringify(document), absoluteRef: 'openapi.json', config });
    expect(problems.map((problem) => `${problem.ruleId}: ${problem.message} at ${problem.location[0]?.pointer}`)).toEqual([]);
  });

  it('shows an example for every request body, which the route itself accepts', () => {
    const withBody = allRoutes.filter((route) => route.body);
    expect(withBody.length).toBeGreaterThan(20);
    for (const route of withBody) {
      expect(route.bodyExample, route.operationId).toBeDefined();
      const parsed = route.body.safeParse(route.bodyExample);
      expect(parsed.success, `${route.operationId}: ${JSON.stringify(parsed.error?.issues)}`).toBe(true);
      const path = route.path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
      const media = (document.paths as any)[path][route.method].requestBody.content['application/json'];
      expect(media.example, route.operationId).toEqual(route.bodyExample);
    }
  });
});
