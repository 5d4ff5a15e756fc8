/**
 * A self-signed certificate for one host name, made with the openssl command for a test's TLS
 * peer (a webhook receiver, an SMTP server), so a test can check the name a client verifies.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

/** PEM texts of a certificate and its private key. */
export interface TestCertificate {
  cert: string;
  key: string;
}

/** An EC certificate for `hostName` (its CN and only SAN), valid two days. */
export async function makeCertificate(hostName: string): Promise<TestCertificate> {
  const dir = await mkdtemp(join(tmpdir(), 'sluice-test-tls-'));
  try {
    await promisify(execFile)('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
      '-subj', `/CN=${hostName}`, '-addext', `subjectAltName=DNS:${hostName}`, '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')]);
    const [cert, key] = await Promise.all([readFile(join(dir, 'cert.pem'), 'utf8'), readFile(join(dir, 'key.pem'), 'utf8')]);
    return { cert, key };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
