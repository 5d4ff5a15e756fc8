/**
 * The egress policy: which addresses are forbidden, and what `check` answers for webhook and
 * SMTP URLs, with an injected resolver (no DNS query leaves the machine).
 */
import { describe, expect, it } from 'vitest';
import { tableResolver } from '../test/egress-doubles.ts';
import { hostileSmtpUrls } from '../test/hostile-destinations.ts';
import { EgressPolicy, isForbiddenAddress, type ResolvedAddress } from './egress.ts';

const FORBIDDEN: Array<[string, string]> = [
  ['127.0.0.1', 'loopback'],
  ['127.255.255.254', 'loopback'],
  ['10.0.0.1', 'private 10/8'],
  ['172.16.0.1', 'private 172.16/12'],
  ['172.31.255.255', 'private 172.16/12'],
  ['192.168.1.1', 'private 192.168/16'],
  ['169.254.169.254', 'link-local (cloud metadata)'],
  ['100.64.0.1', 'CGNAT'],
  ['100.127.255.255', 'CGNAT'],
  ['224.0.0.1', 'multicast'],
  ['239.255.255.250', 'multicast'],
  ['255.255.255.255', 'broadcast'],
  ['0.0.0.0', 'unspecified'],
  ['0.1.2.3', '0/8'],
  ['240.0.0.1', 'reserved 240/4'],
  ['192.0.0.8', 'IETF protocol assignments'],
  ['198.18.0.1', 'benchmarking'],
  ['198.19.255.255', 'benchmarking'],
  ['192.0.2.1', 'documentation'],
  ['198.51.100.1', 'documentation'],
  ['203.0.113.1', 'documentation'],
  ['::', 'unspecified'],
  ['::1', 'loopback'],
  ['fe80::1', 'link-local'],
  ['fc00::1', 'unique-local'],
  ['fd12:3456::1', 'unique-local'],
  ['fec0::1', 'site-local'],
  ['ff02::1', 'multicast'],
  ['::ffff:127.0.0.1', 'IPv4-mapped'],
  ['::ffff:8.8.8.8', 'IPv4-mapped, refused even for a public IPv4'],
  ['::127.0.0.1', 'IPv4-compatible'],
  ['::8.8.8.8', 'IPv4-compatible, refused even for a public IPv4'],
  ['::ffff:0:7f00:1', 'IPv4-translated'],
  ['64:ff9b::a9fe:a9fe', 'NAT64 of 169.254.169.254'],
  ['64:ff9b::808:808', 'NAT64, refused even for a public IPv4'],
  ['64:ff9b:1::a00:1', 'local-use NAT64'],
  ['2002:7f00:1::', '6to4 of 127.0.0.1'],
  ['2002:c000:204::1', '6to4'],
  ['2001::1', 'Teredo'],
  ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'Teredo'],
  ['2001:db8::1', 'documentation'],
  ['3fff::1', 'documentation (RFC 9637)'],
  ['100::1', 'discard-only'],
  ['4000::1', 'outside 2000::/3'],
  ['fe80::1%eth0', 'zone index'],
  ['127.1', 'not canonical (a socket would read it as 127.0.0.1)'],
  ['010.0.0.1', 'leading zero'],
  ['hooks.example.com', 'a name, not an address'],
  ['', 'empty'],
];

const PUBLIC = ['93.184.216.34', '8.8.8.8', '1.1.1.1', '11.0.0.1', '172.32.0.1', '100.128.0.1', '192.169.0.1', '2606:4700::1111', '2a00:1450:4001:80b::200e', '2001:4860:4860::8888'];

describe('isForbiddenAddress', () => {
  it.each(FORBIDDEN)('refuses %s (%s)', (address) => {
    expect(isForbiddenAddress(address)).toBe(true);
  });

  it.each(PUBLIC)('allows the public address %s', (address) => {
    expect(isForbiddenAddress(address)).toBe(false);
  });
});

describe('EgressPolicy.check', () => {
  it('resolves a public name at the time of the call and returns its first address', async () => {
    const { resolve, lookups } = tableResolver({ 'hooks.example.com': ['93.184.216.34', '2606:4700::1111'] });
    const policy = new EgressPolicy({ resolve });
    const verdict = await policy.check('https://Hooks.Example.com./in?x=1', 'webhook');
    expect(verdict).toMatchObject({ ok: true, address: '93.184.216.34', family: 4 });
    expect(verdict.ok && verdict.url.href).toBe('https://hooks.example.com./in?x=1');
    await policy.check('https://hooks.example.com/in', 'webhook');
    expect(lookups).toEqual(['hooks.example.com', 'hooks.example.com']);
  });

  it('refuses a name if any of its addresses is forbidden, naming it', async () => {
    const { resolve } = tableResolver({ 'mixed.example': ['93.184.216.34', '10.1.2.3'], 'mapped.example': ['::ffff:127.0.0.1'], 'junk.example': ['not-an-address'] });
    const policy = new EgressPolicy({ resolve });
    expect(await policy.check('http://mixed.example/', 'webhook')).toEqual({ ok: false, reason: 'mixed.example resolves to 10.1.2.3, a private address' });
    expect(await policy.check('http://mapped.example/', 'webhook')).toEqual({ ok: false, reason: 'mapped.example resolves to ::ffff:127.0.0.1, an IPv4-mapped address' });
    expect(await policy.check('http://junk.example/', 'webhook')).toMatchObject({ ok: false, reason: expect.stringContaining('not a plain IP address') });
  });

  it('decides IP literals without a lookup, whatever their spelling', async () => {
    const { resolve, lookups } = tableResolver({});
    const policy = new EgressPolicy({ resolve });
    // WHATWG URL normalises decimal, hex, octal and short IPv4 spellings to 127.0.0.1.
    for (const url of ['http://127.0.0.1/', 'http://2130706433/', 'http://0x7f000001/', 'http://0x7f.1/', 'http://0177.0.0.1/', 'http://127.1/', 'http://127.0.0.1./']) {
      expect(await policy.check(url, 'webhook'), url).toEqual({ ok: false, reason: '127.0.0.1 is a loopback address' });
    }
    for (const url of ['http://[::1]/', 'http://[::127.0.0.1]/', 'http://[::ffff:10.0.0.1]/', 'http://[64:ff9b::a9fe:a9fe]/', 'http://[2002:7f00:1::]/', 'http://[fe80::1]/', 'http://169.254.169.254/', 'http://[0:0:0:0:0:ffff:7f00:1]/']) {
      expect(await policy.check(url, 'webhook'), url).toMatchObject({ ok: false });
    }
    expect(await policy.check('http://[::127.0.0.1]/', 'webhook')).toEqual({ ok: false, reason: '::7f00:1 is an IPv4-compatible address' });
    expect(await policy.check('https://93.184.216.34:8443/x', 'webhook')).toMatchObject({ ok: true, address: '93.184.216.34', family: 4 });
    expect(await policy.check('https://[2606:4700::1111]/x', 'webhook')).toMatchObject({ ok: true, address: '2606:4700::1111', family: 6 });
    expect(lookups).toEqual([]);
  });

  it('refuses localhost names without asking the resolver', async () => {
    const { resolve, lookups } = tableResolver({ localhost: ['93.184.216.34'], 'app.localhost': ['93.184.216.34'] });
    const policy = new EgressPolicy({ resolve });
    for (const url of ['http://localhost/', 'http://localhost./', 'http://LOCALHOST:8080/', 'http://app.localhost/', 'http://app.localhost./', 'http://localhost../']) {
      expect(await policy.check(url, 'webhook'), url).toMatchObject({ ok: false, reason: expect.stringMatching(/names this machine$/) });
    }
    expect(lookups).toEqual([]);
  });

  it('refuses other schemes, credentials and what is not a URL', async () => {
    const policy = new EgressPolicy({ resolve: tableResolver({ 'hooks.example.com': ['93.184.216.34'] }).resolve });
    expect(await policy.check('ftp://hooks.example.com/', 'webhook')).toEqual({ ok: false, reason: 'ftp: is not http or https' });
    expect(await policy.check('file:///etc/passwd', 'webhook')).toEqual({ ok: false, reason: 'file: is not http or https' });
    expect(await policy.check('https://user:pw@hooks.example.com/', 'webhook')).toEqual({ ok: false, reason: 'the URL carries credentials' });
    expect(await policy.check('https://user@hooks.example.com/', 'webhook')).toEqual({ ok: false, reason: 'the URL carries credentials' });
    expect(await policy.check('hooks.example.com/x', 'webhook')).toEqual({ ok: false, reason: 'not a URL' });
  });

  it('fails closed when the lookup fails, answers nothing or does not answer in time', async () => {
    const never = () => new Promise<ResolvedAddress[]>(() => {});
    const policy = new EgressPolicy({ resolve: tableResolver({ 'empty.example': [], 'broken.example': Object.assign(new Error('boom'), { code: 'EAI_AGAIN' }) }).resolve });
    expect(await policy.check('http://nowhere.example/', 'webhook')).toEqual({ ok: false, unresolved: true, reason: 'lookup of nowhere.example failed: ENOTFOUND' });
    expect(await policy.check('http://broken.example/', 'webhook')).toEqual({ ok: false, unresolved: true, reason: 'lookup of broken.example failed: EAI_AGAIN' });
    expect(await policy.check('http://empty.example/', 'webhook')).toEqual({ ok: false, unresolved: true, reason: 'lookup of empty.example failed: no addresses' });
    const slow = new EgressPolicy({ resolve: never, lookupTimeoutMs: 50 });
    expect(await slow.check('http://slow.example/', 'webhook')).toEqual({ ok: false, unresolved: true, reason: 'lookup of slow.example failed: no answer within 50 ms' });
  });

  it('lets the allow list open CIDRs, single addresses and exact host names, and nothing more', async () => {
    const { resolve } = tableResolver({ 'hooks.corp.internal': ['10.1.2.3'], 'other.corp.internal': ['10.1.2.4'] });
    const policy = new EgressPolicy({ allow: ['127.0.0.0/8', '::1/128', '192.168.7.7', 'Hooks.Corp.Internal.'], resolve });
    expect(await policy.check('http://127.0.0.1:9000/', 'webhook')).toMatchObject({ ok: true, address: '127.0.0.1' });
    expect(await policy.check('http://[::1]:9000/', 'webhook')).toMatchObject({ ok: true, address: '::1', family: 6 });
    expect(await policy.check('http://192.168.7.7/', 'webhook')).toMatchObject({ ok: true });
    expect(await policy.check('http://192.168.7.8/', 'webhook')).toMatchObject({ ok: false });
    expect(await policy.check('http://hooks.corp.internal/', 'webhook')).toMatchObject({ ok: true, address: '10.1.2.3' });
    expect(await policy.check('http://other.corp.internal/', 'webhook')).toMatchObject({ ok: false });
    // IPv4 in an IPv6 spelling is refused outright: 127.0.0.0/8 does not open ::ffff:127.0.0.1.
    expect(await policy.check('http://[::ffff:127.0.0.1]/', 'webhook')).toMatchObject({ ok: false });
    expect(await policy.check('http://localhost/', 'webhook')).toMatchObject({ ok: false });
  });

  it('refuses a bad allow list entry when the policy is made', () => {
    expect(() => new EgressPolicy({ allow: ['10.0.0.0/33'] })).toThrow('10.0.0.0/33 is not a CIDR');
    expect(() => new EgressPolicy({ allow: ['hooks.example.com:443'] })).toThrow('neither a CIDR nor a host name');
  });

  it('looks names up with the system resolver by default', async () => {
    // localhost is answered from the hosts file, without a DNS query.
    const verdict = await new EgressPolicy({ allow: ['localhost'] }).check('http://localhost:1/', 'webhook');
    expect(verdict).toMatchObject({ ok: true, address: expect.stringMatching(/^(127\.\d+\.\d+\.\d+|::1)$/) });
  });
});

describe('EgressPolicy.checkConfiguredUrl', () => {
  it('refuses what check refuses, but stores a name that does not resolve yet (delivery checks again)', async () => {
    const policy = new EgressPolicy({ resolve: tableResolver({ 'internal.example': ['10.1.2.3'], 'hooks.example.com': ['93.184.216.34'] }).resolve });
    expect(await policy.checkConfiguredUrl('https://hooks.example.com/x', 'webhook')).toEqual({ ok: true });
    expect(await policy.checkConfiguredUrl('https://not-yet.example/x', 'webhook')).toEqual({ ok: true });
    expect(await policy.checkConfiguredUrl('https://internal.example/x', 'webhook')).toEqual({ ok: false, reason: 'internal.example resolves to 10.1.2.3, a private address' });
    expect(await policy.checkConfiguredUrl('http://[::1]/x', 'webhook')).toEqual({ ok: false, reason: '::1 is a loopback address' });
    expect(await policy.checkConfiguredUrl('https://a:b@hooks.example.com/x', 'webhook')).toEqual({ ok: false, reason: 'the URL carries credentials' });
  });
});

describe('EgressPolicy: SMTP servers', () => {
  it.each(hostileSmtpUrls(2525))('refuses %s without a lookup: %s', async (url, reason) => {
    const { resolve, lookups } = tableResolver({});
    const policy = new EgressPolicy({ resolve });
    expect(await policy.check(url, 'smtp')).toEqual({ ok: false, reason });
    expect(await policy.checkConfiguredUrl(url, 'smtp')).toEqual({ ok: false, reason });
    expect(lookups).toEqual([]);
  });

  it('takes credentials in an SMTP URL, and gives the host name TLS verifies, as a special URL spells it', async () => {
    const { resolve } = tableResolver({ 'mail.example.com': ['93.184.216.34'], 'internal.example': ['10.1.2.3'] });
    const policy = new EgressPolicy({ resolve });
    expect(await policy.check('smtp://relay:p%40ss@Mail.Example.COM.:587', 'smtp')).toMatchObject({ ok: true, address: '93.184.216.34', family: 4, host: 'mail.example.com' });
    expect(await policy.check('smtps://93.184.216.34', 'smtp')).toMatchObject({ ok: true, address: '93.184.216.34', host: '93.184.216.34' });
    expect(await policy.check('smtp://internal.example:25', 'smtp')).toEqual({ ok: false, reason: 'internal.example resolves to 10.1.2.3, a private address' });
  });

  it('keeps each destination to its schemes', async () => {
    const policy = new EgressPolicy({ resolve: tableResolver({ 'mail.example.com': ['93.184.216.34'] }).resolve });
    expect(await policy.check('https://mail.example.com/', 'smtp')).toEqual({ ok: false, reason: 'https: is not smtp or smtps' });
    expect(await policy.check('smtp://mail.example.com/', 'webhook')).toEqual({ ok: false, reason: 'smtp: is not http or https' });
    expect(await policy.check('smtp:///', 'smtp')).toEqual({ ok: false, reason: 'the URL has no host' });
  });

  it('lets the same allow list open an SMTP server on the private network', async () => {
    const policy = new EgressPolicy({ allow: ['10.0.0.0/8', 'smtp.corp.internal'], resolve: tableResolver({ 'smtp.corp.internal': ['192.168.1.25'] }).resolve });
    expect(await policy.check('smtp://10.0.0.1:25', 'smtp')).toMatchObject({ ok: true, address: '10.0.0.1' });
    expect(await policy.check('smtp://smtp.corp.internal:25', 'smtp')).toMatchObject({ ok: true, address: '192.168.1.25' });
    expect(await policy.check('smtp://127.0.0.1:25', 'smtp')).toMatchObject({ ok: false });
  });
});
