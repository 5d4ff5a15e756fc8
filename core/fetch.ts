/** Tools for talking to peers with fetch(): their answers are read bounded, their failures described. */

/** The body as UTF-8, up to `limit` bytes; `overflow` when there was more (the rest is not read: the stream is cancelled). */
export async function readAtMost(response: Response, limit: number): Promise<{ text: string; overflow: boolean }> {
  if (!response.body) return { text: '', overflow: false };
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > limit) {
      await response.body.cancel().catch(() => {});
      return { text: Buffer.concat(chunks).toString('utf8'), overflow: true };
    }
    chunks.push(chunk);
  }
  return { text: Buffer.concat(chunks).toString('utf8'), overflow: false };
}

/** fetch() wraps the socket error (ECONNREFUSED, "other side closed") in its cause: both, in one line. */
export function describeFetchError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const cause = err.cause as { code?: string; message?: string } | undefined;
  if (!cause?.message) return err.message;
  const code = cause.code && !cause.message.includes(cause.code) ? ` [${cause.code}]` : '';
  return `${err.message}: ${cause.message}${code}`;
}
