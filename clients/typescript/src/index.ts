export {
  type AcisClient,
  type AcisClientOptions,
  type CreateConversationBody,
  createAcisClient,
  type SendMessageBody,
  type Token,
  unwrap,
} from './client.js';
export { AcisProblem, type ProblemDocument } from './errors.js';
export { type AgentLine, isTerminal, MessageStream, type PlatformLine, type StreamLine } from './message-stream.js';
export { type Cursor, type Page, type PaginateOptions, paginate } from './pagination.js';
export type { RetryOptions } from './retrying-fetch.js';
export type { components, operations, paths } from './schema.js';
