import { type Server, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { CoreDeps } from '../deps.js';
import { ProblemError, problemBody } from '../problems.js';

/**
 * Answers requests that Node's HTTP parser refuses before any handler runs (a request line and
 * headers over the header limit, malformed HTTP, a header timeout) with a problem document, where
 * Node would send a bare status line the client cannot read a reason from.
 */
export function answerClientErrors(server: Server, deps: Pick<CoreDeps, 'config' | 'logger' | 'newId'>): void {
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => {
    const answered = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent ?? false;
    if (error.code === 'ECONNRESET' || !socket.writable || answered) {
      socket.destroy();
      return;
    }
    const problem = parserProblem(error.code);
    const requestId = deps.newId('request');
    const host = socket.localAddress?.includes(':') ? `[${socket.localAddress}]` : socket.localAddress;
    const body = JSON.stringify(
      problemBody(problem, { baseUrl: deps.config.publicUrl ?? `http://${host}:${socket.localPort}`, requestId }),
    );
    deps.logger.info({ request_id: requestId, status: problem.status, code: error.code }, 'request refused by the HTTP parser');
    socket.end(
      [
        `HTTP/1.1 ${problem.status} ${STATUS_CODES[problem.status]}`,
        'Content-Type: application/problem+json',
        `Content-Length: ${Buffer.byteLength(body)}`,
        `X-Request-Id: ${requestId}`,
        'Connection: close',
        '',
        body,
      ].join('\r\n'),
    );
  });
}

function parserProblem(code: string | undefined): ProblemError {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return new ProblemError('request-header-too-large', 431, {
        detail: 'The request line and headers are too large; send long values in a JSON body.',
      });
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return new ProblemError('payload-too-large', 413, { detail: 'The chunk extensions of the request body are too large.' });
    case 'ERR_HTTP_REQUEST_TIMEOUT':
    case 'HPE_HEADER_TIMEOUT':
      return new ProblemError('request-timeout', 408, { detail: 'The request was not received in time.' });
    default:
      return new ProblemError('validation-error', 400, { detail: 'The request is not valid HTTP/1.1.' });
  }
}
