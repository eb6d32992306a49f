/**
 * The API server's masking of a run: every event the agent produces is masked before it is streamed, stored
 * or folded into the reply, and so is every transcript entry the session store receives. Defence in depth:
 * the agent only ever sees `{{secret:ALIAS}}` placeholders, but should a value of the run reach it anyway (an
 * upstream echoing it, a file), it becomes its placeholder again. Which forms of a value are caught is the
 * one masker's to say (egress-proxy/secret-masking.ts), the same as the egress proxy's.
 */
import { randomUUID } from 'node:crypto';
import { type RunSecret, secretValue } from '../../egress-proxy/secret-binding.js';
import { createMasker, type Masker } from '../../egress-proxy/secret-masking.js';
import type { ConversationSessionStore } from '../sandboxes/session-store.js';

/** What a run's masking needs of a masker: the one masker, or a GrowingMasker over it. */
export type SecretMasker = Pick<Masker, 'maskText' | 'maskValue' | 'pendingLength' | 'empty'>;

/**
 * The masker of a run whose values can grow while it runs (an approval supplied secrets): every
 * value it ever had stays masked, also one an alias no longer resolves to.
 */
export class GrowingMasker implements SecretMasker {
  private readonly known: Array<readonly [string, string]> = [];
  private current: SecretMasker;

  constructor(secrets: ReadonlyMap<string, RunSecret>) {
    this.known.push(...valuesOf(secrets));
    this.current = createMasker(this.known);
  }

  add(secrets: ReadonlyMap<string, RunSecret>): void {
    const seen = new Set(this.known.map(([alias, value]) => `${alias}\u0000${value}`));
    const fresh = valuesOf(secrets).filter(([alias, value]) => !seen.has(`${alias}\u0000${value}`));
    if (fresh.length === 0) return;
    this.known.push(...fresh);
    this.current = createMasker(this.known);
  }

  maskText(text: string): string {
    return this.current.maskText(text);
  }

  maskValue<T>(value: T): T {
    return this.current.maskValue(value);
  }

  pendingLength(text: string): number {
    return this.current.pendingLength(text);
  }

  get empty(): boolean {
    return this.current.empty;
  }
}

function valuesOf(secrets: ReadonlyMap<string, RunSecret>): Array<readonly [string, string]> {
  return [...secrets].map(([alias, secret]) => [alias, secretValue(secret)] as const);
}

type Event = Record<string, unknown>;

/** The delta kinds that carry a growing string, and the field that carries it. */
const DELTA_FIELDS: Record<string, string> = { text_delta: 'text', input_json_delta: 'partial_json', thinking_delta: 'thinking' };

/**
 * Masks a run's stream of agent events. Streamed deltas cut text at arbitrary points, so a value
 * may arrive in pieces: a delta whose tail could begin a value keeps that tail back and sends it
 * with the next delta of the same block (masked together), or, when some other event comes first,
 * as a delta of its own just before it. The text of a block is unchanged; only where it is cut may
 * differ. Every other event is masked whole.
 */
export class EventMasker {
  private readonly pending = new Map<unknown, { text: string; event: Event; field: string }>();

  constructor(private readonly masker: SecretMasker) {}

  /** The events to pass on in place of `event` (none while a delta is held back whole). */
  push(event: Event): Event[] {
    if (this.masker.empty) return [event];
    const delta = streamedDelta(event);
    if (!delta) return [...this.flush(), this.masker.maskValue(event)];
    const held = this.pending.get(delta.index);
    const text = this.masker.maskText((held?.text ?? '') + delta.text);
    const keep = this.masker.pendingLength(text);
    this.pending.delete(delta.index);
    if (keep > 0) this.pending.set(delta.index, { text: text.slice(text.length - keep), event, field: delta.field });
    const out = text.slice(0, text.length - keep);
    return out === '' ? [] : [withDeltaText(this.masker.maskValue(event), delta.field, out)];
  }

  /** Sends what is held back (it turned out not to be a value), e.g. when a block or the run ends. */
  flush(): Event[] {
    const out = [...this.pending.values()].map(({ text, event, field }) => {
      const copy = withDeltaText(this.masker.maskValue(event), field, text);
      // A separate line: it should not repeat the uuid of the delta it was cut from.
      return typeof copy.uuid === 'string' ? { ...copy, uuid: randomUUID() } : copy;
    });
    this.pending.clear();
    return out;
  }
}

function streamedDelta(event: Event): { index: unknown; field: string; text: string } | undefined {
  if (event.type !== 'stream_event') return undefined;
  const inner = event.event as { type?: unknown; index?: unknown; delta?: Record<string, unknown> } | undefined;
  if (inner?.type !== 'content_block_delta' || !inner.delta) return undefined;
  const field = DELTA_FIELDS[String(inner.delta.type)];
  const text = field === undefined ? undefined : inner.delta[field];
  return field !== undefined && typeof text === 'string' ? { index: inner.index, field, text } : undefined;
}

function withDeltaText(event: Event, field: string, text: string): Event {
  const inner = event.event as Record<string, unknown>;
  return { ...event, event: { ...inner, delta: { ...(inner.delta as Event), [field]: text } } };
}

/**
 * A session store whose appended transcript entries are masked like the reply: the transcript is
 * stored (and a resumed session reads it back), so a value the agent came by must not land there.
 */
export function maskedSessionStore(store: ConversationSessionStore, masker: SecretMasker): ConversationSessionStore {
  // Checked per call, not once: a growing masker may gain values mid-run.
  return { load: (key) => store.load(key), append: (key, entries) => store.append(key, masker.maskValue(entries)) };
}
