/** Where a send names vaulted values, by pointer; what a placeholder is, is egress-proxy/placeholder.ts's to say. */
import { placeholdersIn } from '../../egress-proxy/placeholder.js';

export interface SecretReference {
  alias: string;
  /** JSON pointer to the string holding the placeholder, within the request body. */
  pointer: string;
}

/**
 * Every placeholder in the parts of a send the agent is given: `content`, any string anywhere in
 * `parts`, and the values of `env`. `bodyPointer` locates the message in the request body
 * (`/initial_message` on create and upsert).
 */
export function findSecretReferences(
  message: { content: string; parts?: unknown[] | undefined; env?: Record<string, string> | undefined },
  bodyPointer = '',
): SecretReference[] {
  const found: SecretReference[] = [];
  const visit = (value: unknown, pointer: string): void => {
    if (typeof value === 'string') {
      for (const alias of placeholdersIn(value)) found.push({ alias, pointer });
    } else if (Array.isArray(value)) {
      value.forEach((item, index) => {
        visit(item, `${pointer}/${index}`);
      });
    } else if (value !== null && typeof value === 'object') {
      for (const [key, item] of Object.entries(value)) visit(item, `${pointer}/${escapePointer(key)}`);
    }
  };
  visit(message.content, `${bodyPointer}/content`);
  if (message.parts) visit(message.parts, `${bodyPointer}/parts`);
  if (message.env) visit(message.env, `${bodyPointer}/env`);
  return found;
}

/** RFC 6901: `~` and `/` inside a key. */
function escapePointer(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1');
}
