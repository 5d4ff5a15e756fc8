/**
 * The relay's keys, all derived (HKDF-SHA256) from one 32-byte master key: one seals stored
 * secrets (CAPTCHA and webhook secrets, AES-256-GCM), one signs admin sessions (HS256).
 *
 * The master key comes from SLUICE_RELAY_MASTER_KEY (base64). Embedded, without it, one is
 * generated once into <dataDir>/relay-master.key (mode 0600). In cluster mode every gateway
 * needs the same key, so it must be configured: the state store holds only ciphertext.
 */
import { hkdfSync, randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SecretBox } from '../core/secret-box.ts';

export interface RelayKeys {
  /** Seals and opens stored secrets. */
  secrets: SecretBox;
  /** HS256 key of admin session tokens. */
  sessionKey: Uint8Array;
}

export function deriveRelayKeys(master: Buffer): RelayKeys {
  if (master.length !== 32) throw new Error('the relay master key must be 32 bytes (base64 of 32 random bytes)');
  const derive = (info: string) => Buffer.from(hkdfSync('sha256', master, Buffer.alloc(0), info, 32));
  return { secrets: new SecretBox(derive('sluice relay secrets v1')), sessionKey: new Uint8Array(derive('sluice relay sessions v1')) };
}

/** The configured master key, or the data dir's own (created on first use). */
export async function loadMasterKey(configured: string, dataDir: string): Promise<Buffer> {
  if (configured) return Buffer.from(configured, 'base64');
  const file = join(dataDir, 'relay-master.key');
  try {
    return Buffer.from((await readFile(file, 'utf8')).trim(), 'base64');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const key = randomBytes(32);
  // wx: two processes racing to create it cannot both win.
  await writeFile(file, key.toString('base64') + '\n', { mode: 0o600, flag: 'wx' }).catch(async (err) => {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  });
  return Buffer.from((await readFile(file, 'utf8')).trim(), 'base64');
}
