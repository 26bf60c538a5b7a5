/** One server-sent event: its `event:` name and its `data:` line, parsed as JSON. */
export interface ServerSentEvent<D> {
  readonly event: string;
  readonly data: D;
}

/**
 * The events of a `text/event-stream` body as they arrive (blocks without an `event:` or a
 * `data:` line, such as keep-alive comments, are skipped); ends when the body ends.
 */
export async function* serverSentEvents<D = Record<string, unknown>>(
  body: ReadableStream<Uint8Array>,
): AsyncGenerator<ServerSentEvent<D>> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = /^event: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1];
      if (event && data) yield { event, data: JSON.parse(data) as D };
    }
  }
}
