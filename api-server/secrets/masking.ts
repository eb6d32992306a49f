import { randomUUID } from 'node:crypto';
import { placeholderFor } from '../../egress-proxy/placeholder.js';
import type { ConversationSessionStore } from '../sandboxes/session-store.js';

/**
 * Defence in depth: the agent only ever sees `{{secret:ALIAS}}` placeholders, but should a value of
 * the run reach it anyway (an upstream echoing it, a file), every event is scanned before it is
 * streamed, stored or folded into the reply, and each occurrence of a value becomes its placeholder
 * again. A value is looked for as it is and in its JSON-escaped form (how it appears inside JSON
 * text, e.g. a tool's input or a JSON body quoted in a tool result). Other encodings (base64, URL
 * encoding, a value split across lines) are not recognised.
 */
export interface SecretMasker {
  /** The string with every occurrence of a value replaced by its placeholder. */
  maskText(text: string): string;
  /** A copy of a JSON value with every string (keys included) masked; the value itself when nothing matched. */
  maskValue<T>(value: T): T;
  /**
   * The length of the longest tail of `text` that is the beginning of a value (so the rest of the
   * value may follow in the next chunk); 0 when none.
   */
  pendingLength(text: string): number;
  readonly empty: boolean;
}

export function createMasker(secrets: Iterable<readonly [alias: string, value: string]>): SecretMasker {
  const byForm = new Map<string, string>();
  for (const [alias, value] of secrets) {
    if (value === '') continue;
    byForm.set(value, alias);
    const escaped = JSON.stringify(value).slice(1, -1);
    if (!byForm.has(escaped)) byForm.set(escaped, alias);
  }
  // Longest first: where one value contains another, the longer one is replaced whole.
  const forms = [...byForm.keys()].sort((a, b) => b.length - a.length);
  const pattern = forms.length > 0 ? new RegExp(forms.map(escapeRegExp).join('|'), 'g') : undefined;

  const maskText = (text: string): string =>
    pattern ? text.replace(pattern, (found) => placeholderFor(byForm.get(found)!)) : text;

  const maskValue = <T>(value: T): T => {
    if (!pattern) return value;
    if (typeof value === 'string') return maskText(value) as T;
    if (Array.isArray(value)) {
      const items = value.map(maskValue);
      return items.some((item, i) => item !== value[i]) ? (items as T) : value;
    }
    if (value !== null && typeof value === 'object') {
      let changed = false;
      const entries = Object.entries(value).map(([key, item]) => {
        const masked = [maskText(key), maskValue(item)] as const;
        if (masked[0] !== key || masked[1] !== item) changed = true;
        return masked;
      });
      return changed ? (Object.fromEntries(entries) as T) : value;
    }
    return value;
  };

  const pendingLength = (text: string): number => {
    let longest = 0;
    for (const form of forms) {
      // Only a tail shorter than the whole form can still grow into it.
      for (let i = Math.max(0, text.length - form.length + 1); i < text.length - longest; i++) {
        if (text.charCodeAt(i) === form.charCodeAt(0) && form.startsWith(text.slice(i))) {
          longest = text.length - i;
          break;
        }
      }
    }
    return longest;
  };

  return { maskText, maskValue, pendingLength, empty: !pattern };
}

/**
 * The masker of a run whose values can grow while it runs (an approval supplied secrets): every
 * value it ever had stays masked, also one an alias no longer resolves to.
 */
export class GrowingMasker implements SecretMasker {
  private readonly known: Array<readonly [string, string]> = [];
  private current: SecretMasker;

  constructor(secrets: ReadonlyMap<string, string>) {
    this.known.push(...secrets);
    this.current = createMasker(this.known);
  }

  add(secrets: ReadonlyMap<string, string>): void {
    const seen = new Set(this.known.map(([alias, value]) => `${alias}\u0000${value}`));
    const fresh = [...secrets].filter(([alias, value]) => !seen.has(`${alias}\u0000${value}`));
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

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * A session store whose appended transcript entries are masked like the reply: the transcript is
 * stored (and a resumed session reads it back), so a value the agent came by must not land there.
 */
export function maskedSessionStore(store: ConversationSessionStore, masker: SecretMasker): ConversationSessionStore {
  // Checked per call, not once: a growing masker may gain values mid-run.
  return { load: (key) => store.load(key), append: (key, entries) => store.append(key, masker.maskValue(entries)) };
}
