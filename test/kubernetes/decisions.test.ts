import { describe, expect, it } from 'vitest';
import { holdSpec, newSandbox, sandboxName } from '../../api-server/sandboxes/kubernetes/decisions.js';

const AT = '2026-01-01T00:00:00Z';

describe('sandboxName(conversationId)', () => {
  it.each([
    ['con_01JABCDEFGHJKMNPQRSTVWXYZ0', 'con-01jabcdefghjkmnpqrstvwxyz0'],
    ['con_TEST1', 'con-test1'],
  ])('%s → %s (readable, a DNS label)', (id, name) => {
    expect(sandboxName(id)).toBe(name);
  });

  it('hashes ids that lower-casing would merge, or too long for a label', () => {
    const [upper, mixed] = [sandboxName('con_ABC'), sandboxName('con_AbC')];
    expect(upper).toBe('con-abc');
    expect(mixed).toMatch(/^con-h-[0-9a-f]{40}$/);
    expect(sandboxName('con_abc')).not.toBe(mixed);
    expect(sandboxName(`con_${'A'.repeat(58)}`)).toMatch(/^con-h-[0-9a-f]{40}$/);
    for (const name of [upper, mixed]) expect(name.length).toBeLessThanOrEqual(63);
  });
});

describe('newSandbox(request, namespace, now)', () => {
  it('names, labels and specs the conversation’s Sandbox, pooled until a turn ends held', () => {
    const made = newSandbox({ conversationId: 'con_ABC', tenantId: 'tnt_T', agentType: 'vendor-agent-sdk' }, 'acis', Date.parse(AT));
    expect(made.metadata).toEqual({
      name: 'con-abc',
      namespace: 'acis',
      labels: { 'acis.dev/tenant': 'tnt_T', 'acis.dev/conversation': 'con_ABC', 'acis.dev/agent-type': 'vendor-agent-sdk' },
    });
    expect(made.spec).toEqual({
      conversationId: 'con_ABC',
      tenantId: 'tnt_T',
      agentType: 'vendor-agent-sdk',
      mode: 'pooled',
      lastActivityTime: '2026-01-01T00:00:00.000Z',
    });
  });
});

describe('newSandbox(request with requestId, namespace, now)', () => {
  it('annotates the Sandbox with the request that created it', () => {
    const made = newSandbox(
      { conversationId: 'con_ABC', tenantId: 'tnt_T', agentType: 'vendor-agent-sdk', requestId: 'host-trace:1' },
      'acis',
      Date.parse(AT),
    );
    expect(made.metadata.annotations).toEqual({ 'acis.dev/request-id': 'host-trace:1' });
  });
});

describe('holdSpec(now, idleTtlSeconds, maxConcurrentWarm)', () => {
  it('slides shutdownTime to now + TTL and records the activity and the tenant’s cap', () => {
    expect(holdSpec(Date.parse(AT), 300, 4)).toEqual({
      mode: 'warm',
      shutdownTime: '2026-01-01T00:05:00.000Z',
      lastActivityTime: '2026-01-01T00:00:00.000Z',
      maxConcurrentWarm: 4,
    });
  });
});
