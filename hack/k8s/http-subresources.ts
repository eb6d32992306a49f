/**
 * Subresources: status (GET/PUT/PATCH), scale (autoscaling/v1 Scale through the CRD's paths), and
 * pods' log (from the kubelet's provider), binding and eviction; serviceaccounts' token (reviews.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { badRequest, notFound } from './errors.js';
import type { HttpDeps, Route } from './http-types.js';
import { parseBody, patchOptionsOf, readBody, readObject, send, writeOptionsOf } from './http-io.js';
import type { DeleteOptions } from './objects.js';
import { jsonPatch, mergePatch } from './patch.js';
import type { ResourceType } from './resources.js';
import { tokenRequest } from './reviews.js';
import { getScale, updateScale } from './scale.js';
import type { KubeObject } from './store.js';

export async function serveSubresource(
  deps: HttpDeps,
  request: IncomingMessage,
  response: ServerResponse,
  route: Route,
  type: ResourceType,
  query: URLSearchParams,
): Promise<void> {
  const objects = deps.objects;
  const { namespace, name, subresource } = route;
  const method = request.method ?? 'GET';
  const unknownSubresource = () => notFound({ group: type.group, resource: `${type.resource}/${subresource}`, kind: type.kind }, name!);
  if (subresource === 'status' && type.status) {
    if (method === 'GET') return send(response, 200, objects.get(type, namespace, name!));
    const body = await readBody(request);
    if (method === 'PUT')
      return send(
        response,
        200,
        objects.update(type, namespace, name!, parseBody(body), { ...writeOptionsOf(query, request), subresource: 'status' }),
      );
    if (method === 'PATCH') {
      const contentType = request.headers['content-type'] ?? 'application/json';
      return send(
        response,
        200,
        objects.patch(type, namespace, name!, contentType, body, { ...patchOptionsOf(query, contentType, request), subresource: 'status' }),
      );
    }
  }
  if (subresource === 'scale' && type.scale) {
    if (method === 'GET') return send(response, 200, getScale(objects, type, namespace, name!));
    const body = await readBody(request);
    const contentType = (request.headers['content-type'] ?? 'application/json').split(';')[0]!;
    if (method === 'PUT')
      return send(
        response,
        200,
        updateScale(objects, type, namespace, name!, () => parseBody(body), writeOptionsOf(query, request)),
      );
    if (method === 'PATCH') {
      const patch = JSON.parse(body) as unknown;
      return send(
        response,
        200,
        updateScale(
          objects,
          type,
          namespace,
          name!,
          (current) =>
            (contentType === 'application/json-patch+json' ? jsonPatch(current, patch) : mergePatch(current, patch)) as KubeObject,
          writeOptionsOf(query, request),
        ),
      );
    }
  }
  if (type.log && subresource === 'log' && method === 'GET') {
    objects.get(type, namespace, name!);
    const provider = deps.podLogs.provider;
    if (!provider) throw badRequest(`container in pod "${name}" is waiting to start: ContainerCreating`);
    const tail = query.get('tailLines');
    const text = provider(namespace!, name!, query.get('container') ?? undefined, tail === null ? undefined : Number(tail));
    response.writeHead(200, { 'Content-Type': 'text/plain' });
    return void response.end(text);
  }
  if (type.log && subresource === 'binding' && method === 'POST') {
    const body = parseBody(await readBody(request)) as KubeObject & { target?: { name?: string } };
    if (!body.target?.name) throw badRequest('a binding needs target.name');
    objects.bind(namespace!, name!, body.target.name);
    return send(response, 201, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', code: 201 });
  }
  if (type.log && subresource === 'eviction' && method === 'POST') {
    const body = parseBody(await readBody(request)) as KubeObject & { deleteOptions?: DeleteOptions };
    objects.delete(type, namespace, name!, body.deleteOptions ?? {});
    return send(response, 201, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', code: 201 });
  }
  if (type.token && subresource === 'token' && method === 'POST')
    return send(response, 201, tokenRequest(deps.authenticator, namespace!, name!, await readObject(request)));
  throw unknownSubresource();
}
