/**
 * Agent runtimes this deployment can run. `runtime.agent_type` is an open enum in the spec; a
 * conversation may only be created with a type listed here (422 otherwise), since each type needs
 * its own sandbox image and runner.
 */
export const AGENT_TYPES = ['vendor-agent-sdk'] as const;

export type AgentType = (typeof AGENT_TYPES)[number];

export function isKnownAgentType(value: string): value is AgentType {
  return (AGENT_TYPES as readonly string[]).includes(value);
}
