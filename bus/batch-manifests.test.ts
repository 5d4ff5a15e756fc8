/**
 * The storage consumers' manifest index against a real nats-server with JetStream (NATS_URL,
 * default nats://127.0.0.1:4222): unreadable manifests and watches that end.
 */
import { randomBytes } from 'node:crypto';
import { Kvm, type KV } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { capturedLog, escapedErrors, watchFeeds } from '../test/faults.ts';
import { eventually } from '../test/harness.ts';
import { ManifestIndex, type Manifest } from './batch-manifests.ts';

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const HOUR_MS = 60 * 60 * 1000;
let nc: NatsConnection;
const buckets: KV[] = [];
const errors = escapedErrors();

beforeAll(async () => {
  try {
    nc = await connect({ servers: NATS_URL, timeout: 3000 });
  } catch (err) {
    throw new Error(`NATS is not reachable at ${NATS_URL} (start it with deploy/services.sh): ${(err as Error).message}`);
  }
});
afterEach(() => vi.restoreAllMocks());
afterAll(async () => {
  errors.dispose();
  for (const kv of buckets) await kv.destroy();
  await nc?.close();
});

async function freshBucket(): Promise<{ kv: KV; name: string }> {
  const name = `t${randomBytes(4).toString('hex')}_manifests`;
  const kv = await new Kvm(nc).create(name, { history: 1, ttl: HOUR_MS });
  buckets.push(kv);
  return { kv, name };
}

const manifest = (...seqs: number[]): Manifest => ({ token: `tok-${seqs.join('-')}`, seqs, state: 'committed' });
const put = (kv: KV, key: string, value: Manifest) => kv.put(key, JSON.stringify(value));

describe('ManifestIndex', () => {
  it('counts and skips manifests it cannot read, at start and under traffic; nothing escapes', async () => {
    const { kv, name } = await freshBucket();
    const { log, lines, entries } = capturedLog();
    await put(kv, 'S_A.1', manifest(1, 2));
    await kv.put('S_A.2', 'not json{');
    const index = new ManifestIndex(kv, HOUR_MS, { name, log });
    await index.start();
    expect(index.find('S_A', 2, '')?.key).toBe('S_A.1');
    expect(index.status()).toMatchObject({ ok: true, figures: { badValues: 1 } });

    let seq = 10;
    let writing = true;
    const traffic = (async () => {
      while (writing) {
        seq += 2;
        await put(kv, `S_A.${seq}`, manifest(seq, seq + 1));
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    })();
    await eventually(() => index.find('S_A', 13, ''));
    await kv.put('S_A.3', 'not json{');
    await kv.put('S_A.4', JSON.stringify({ token: 'no seqs', state: 'committed' }));
    await put(kv, 'S_A.1', manifest(1, 2));
    await kv.put('S_A.1', JSON.stringify({ token: 'seqs of the wrong kind', seqs: ['1'], state: 'pending' }));
    const before = seq;
    await eventually(() => index.find('S_A', before + 11, ''));
    writing = false;
    await traffic;
    await eventually(() => index.find('S_A', seq + 1, ''));

    // The manifest that became unreadable left the index: its batch may be stored again, never lost.
    expect(index.find('S_A', 1, '')).toBeUndefined();
    expect(index.status()).toMatchObject({ ok: true, figures: { badValues: 4, restarts: 0 } });
    expect(index.status().detail).toBe('4 unreadable manifests skipped (keys in the log)');
    const warned = entries().filter((entry) => entry.msg === 'skipped a stored value that cannot be read');
    expect(warned.map((entry) => entry.recordKey).sort()).toEqual(['S_A.1', 'S_A.2', 'S_A.3', 'S_A.4']);
    expect(lines.join('\n')).not.toMatch(/not json|no seqs|wrong kind/);
    expect(errors.escaped).toEqual([]);
    index.stop();
  });

  it('re-opens a watch whose feed ended, from the last revision: a put and a delete made meanwhile arrive', async () => {
    const { kv, name } = await freshBucket();
    await put(kv, 'S_B.1', manifest(1));
    const feeds = watchFeeds(name);
    const index = new ManifestIndex(kv, HOUR_MS, { name, log: capturedLog().log, watchMinBackoffMs: 10 });
    await index.start();
    await put(kv, 'S_B.2', manifest(2));
    await eventually(() => index.find('S_B', 2, ''));

    const reopen = feeds.holdNextOpen();
    feeds.latest().stop();
    await eventually(() => !index.status().ok);
    expect(index.status().detail).toBe('watch re-opening after: the watch ended by itself');
    await put(kv, 'S_B.3', manifest(3));
    await kv.delete('S_B.1');
    reopen.release();
    await eventually(() => index.find('S_B', 3, '') && !index.find('S_B', 1, ''));
    await eventually(() => index.status().ok);
    expect(index.status().figures).toMatchObject({ restarts: 1, badValues: 0 });

    feeds.latest().stop(new Error('permissions violation'));
    await put(kv, 'S_B.4', manifest(4));
    await eventually(() => index.find('S_B', 4, ''));
    await eventually(() => index.status().ok && index.status().figures!.restarts === 2);
    expect(errors.escaped).toEqual([]);
    index.stop();
  });

  it('finds a message by its stream and sequence among manifests of several streams and sequence ranges; a replaced or deleted manifest is forgotten', async () => {
    const { kv, name } = await freshBucket();
    // A batch whose messages lie far apart (a redelivered one joined fresh ones), and a neighbour.
    await put(kv, 'S_C.1000', manifest(1000, 1030, 5000));
    await put(kv, 'S_C.1031', manifest(1031, 1032));
    await put(kv, 'S_D.1000', manifest(1000));
    const index = new ManifestIndex(kv, HOUR_MS, { name, log: capturedLog().log });
    await index.start();
    expect([1000, 1030, 5000].map((seq) => index.find('S_C', seq, '')?.key)).toEqual(['S_C.1000', 'S_C.1000', 'S_C.1000']);
    expect(index.find('S_C', 1032, '')?.key).toBe('S_C.1031');
    expect(index.find('S_D', 1000, '')?.key).toBe('S_D.1000');
    expect([1029, 1033, 4999, 5001].map((seq) => index.find('S_C', seq, ''))).toEqual([undefined, undefined, undefined, undefined]);
    expect(index.find('S_D', 1030, '')).toBeUndefined();

    index.apply('S_C.1000', { ...manifest(1000, 1030), state: 'pending' });
    expect(index.find('S_C', 5000, '')).toBeUndefined();
    expect(index.find('S_C', 1030, '')?.manifest.state).toBe('pending');
    index.apply('S_C.1000', undefined);
    expect(index.find('S_C', 1000, '')).toBeUndefined();
    expect(index.find('S_C', 1031, '')?.key).toBe('S_C.1031');
    index.stop();
  });

  it('re-opens a watch of one stream\'s manifests that went quiet while manifests of that stream were written', async () => {
    const { kv, name } = await freshBucket();
    await put(kv, 'S_F.1', manifest(1));
    const feeds = watchFeeds(name);
    feeds.muteNextOpen();
    const index = new ManifestIndex(kv, HOUR_MS, { name, stream: 'S_F', log: capturedLog().log, watchMinBackoffMs: 10, watchAuditMs: 300 });
    await index.start();
    expect(index.find('S_F', 1, '')?.key).toBe('S_F.1');
    // Other streams' manifests are none of its business: no reason to re-open.
    await put(kv, 'S_G.1', manifest(1));
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(index.status().figures).toMatchObject({ restarts: 0 });
    await put(kv, 'S_F.2', manifest(2));
    await eventually(() => index.find('S_F', 2, ''), 15_000);
    expect(index.status().figures).toMatchObject({ restarts: 1 });
    index.stop();
  });

  it('tells a batch\'s message from a new one given its sequence (a stream created again, or reset by a crash) by its msgID', async () => {
    const { kv, name } = await freshBucket();
    await put(kv, 'S_E.1', { ...manifest(1, 2, 3), ids: ['gw:1', 'gw:2', ''] });
    // Written by a consumer before msgIDs were kept: by sequence alone, as it was.
    await put(kv, 'S_E.4', manifest(4));
    // ids that do not line up with seqs cannot be trusted: unreadable.
    await put(kv, 'S_E.5', { ...manifest(5, 6), ids: ['gw:5'] });
    const index = new ManifestIndex(kv, HOUR_MS, { name, log: capturedLog().log });
    await index.start();
    expect([index.find('S_E', 1, 'gw:1')?.key, index.find('S_E', 2, 'gw:2')?.key, index.find('S_E', 3, '')?.key]).toEqual(['S_E.1', 'S_E.1', 'S_E.1']);
    expect([index.find('S_E', 1, 'gw-after-reset:1'), index.find('S_E', 2, ''), index.find('S_E', 3, 'gw:3')]).toEqual([undefined, undefined, undefined]);
    expect(index.find('S_E', 4, 'anything')?.key).toBe('S_E.4');
    expect(index.find('S_E', 5, 'gw:5')).toBeUndefined();
    expect(index.status().figures).toMatchObject({ badValues: 1 });
    index.stop();
  });

  it('finds a batch\'s message by its msgID under any sequence (replicas that diverged bring it back under another), among many publishers and batches', async () => {
    const { kv, name } = await freshBucket();
    const index = new ManifestIndex(kv, HOUR_MS, { name, log: capturedLog().log });
    await index.start();
    // Three gateways' messages, interleaved, in batches of 50: their counts cross many runs.
    const ids = Array.from({ length: 600 }, (_, i) => `gw${i % 3}:${Math.floor(i / 3) + 1}`);
    for (let first = 0; first < ids.length; first += 50) {
      const seqs = Array.from({ length: 50 }, (_, i) => first + i + 1);
      index.apply(`S_H.${first + 1}`, { ...manifest(...seqs), ids: ids.slice(first, first + 50) });
    }
    const keyOf = (i: number) => `S_H.${Math.floor(i / 50) * 50 + 1}`;
    expect(ids.every((id, i) => index.find('S_H', i + 1, id)?.key === keyOf(i))).toBe(true);
    // Back under another sequence: the same batch.
    expect(ids.every((id, i) => index.find('S_H', 10_000 + i, id)?.key === keyOf(i))).toBe(true);
    // A new message with an old sequence, another stream, msgIDs of other shapes: none.
    expect([index.find('S_H', 5, 'gw0:201'), index.find('S_H', 5, 'gw3:1'), index.find('S_I', 1, 'gw0:1'), index.find('S_H', 5, 'gw0')]).toEqual([undefined, undefined, undefined, undefined]);
    index.apply('S_H.1000', { ...manifest(1000, 1001), ids: ['no-count', 'gw0:x'] });
    expect([index.find('S_H', 7, 'no-count')?.key, index.find('S_H', 8, 'gw0:x')?.key]).toEqual(['S_H.1000', 'S_H.1000']);
    // A manifest replaced with fewer messages, or deleted, no longer finds what it dropped.
    index.apply('S_H.1', { ...manifest(1, 2), ids: ids.slice(0, 2) });
    expect([index.find('S_H', 900, ids[1]!)?.key, index.find('S_H', 900, ids[2]!)]).toEqual(['S_H.1', undefined]);
    index.apply('S_H.51', undefined);
    expect(index.find('S_H', 51, ids[50]!)).toBeUndefined();
    expect(index.find('S_H', 101, ids[100]!)?.key).toBe('S_H.101');
    index.stop();
  });

  it('finds the committed manifest of a message several name (a retry that did not know of a put that landed)', async () => {
    const { kv, name } = await freshBucket();
    const index = new ManifestIndex(kv, HOUR_MS, { name, log: capturedLog().log });
    await index.start();
    index.apply('S_J.1-a', { ...manifest(1, 2), ids: ['gw:1', 'gw:2'], state: 'pending' });
    index.apply('S_J.1-b', { ...manifest(1, 2, 3), ids: ['gw:1', 'gw:2', 'gw:3'], state: 'committed' });
    index.apply('S_J.3-c', { ...manifest(3), ids: ['gw:3'], state: 'pending' });
    expect(['gw:1', 'gw:2', 'gw:3'].map((id, i) => index.find('S_J', i + 1, id)?.key)).toEqual(['S_J.1-b', 'S_J.1-b', 'S_J.1-b']);
    // Legacy manifests, by sequence, the same.
    index.apply('S_K.1-a', { ...manifest(1), state: 'pending' });
    index.apply('S_K.1-b', manifest(1));
    expect(index.find('S_K', 1, 'gw:1')?.key).toBe('S_K.1-b');
    index.stop();
  });
});
