/**
 * The relay-webhooks bench's receiver: a node:http server in the runner process (not the
 * target's, so its CPU is not counted as Sluice's) that answers 200 at once, keeps one record
 * per webhook-id, checks the signature of one delivery in `verifyEvery` with the independent
 * standardwebhooks package, and times each submission to its delivery from the payload's
 * `data.receivedAt` (the server's clock at intake, ms; the same clock as ours).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

export interface BenchWebhookReceiver {
  url: string;
  /** Submission id → ms from its intake to its first delivery. */
  delivered: Map<string, number>;
  /** Calls with a webhook-id already received (a redelivery after a lost answer). */
  repeats: number;
  /** Signatures checked, and how many of them failed. */
  checked: number;
  badSignatures: number;
  /** Date.now() of the latest first delivery. */
  lastAt: number;
  /** Sets the signing secret (printed once when the webhook is created). */
  useSecret(secret: string): void;
  /** Resolves when every id has been delivered, or at the deadline with those still missing. */
  waitFor(ids: readonly string[], timeoutMs: number): Promise<string[]>;
  close(): Promise<void>;
}

export async function startBenchWebhookReceiver(verifyEvery = 50): Promise<BenchWebhookReceiver> {
  const seen = new Set<string>();
  let verifier: Webhook | undefined;
  let calls = 0;
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const now = Date.now();
      const body = Buffer.concat(chunks).toString('utf8');
      const id = String(request.headers['webhook-id']);
      if (calls++ % verifyEvery === 0) {
        receiver.checked++;
        try {
          verifier!.verify(body, request.headers as Record<string, string>);
        } catch {
          receiver.badSignatures++;
        }
      }
      if (seen.has(id)) {
        receiver.repeats++;
      } else {
        seen.add(id);
        const { data } = JSON.parse(body) as { data: { submissionId: string; receivedAt: string } };
        receiver.delivered.set(data.submissionId, now - Date.parse(data.receivedAt));
        receiver.lastAt = now;
      }
      response.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));

  const receiver: BenchWebhookReceiver = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    delivered: new Map(),
    repeats: 0,
    checked: 0,
    badSignatures: 0,
    lastAt: 0,
    useSecret(secret) {
      verifier = new Webhook(secret);
    },
    async waitFor(ids, timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      let missing = ids.filter((id) => !receiver.delivered.has(id));
      while (missing.length && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        missing = missing.filter((id) => !receiver.delivered.has(id));
      }
      return missing;
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  return receiver;
}
