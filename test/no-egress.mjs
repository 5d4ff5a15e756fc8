/**
 * Loaded with `node --import` into the processes a test starts that could reach out (a relay
 * delivering to the documentation's example addresses): name lookups other than localhost fail as an
 * unknown host would, and a connection to an address off loopback is refused before a packet
 * leaves, so such a test can never really connect to a private or public address.
 */
import dns from 'node:dns';
import net from 'node:net';

const loopback = (host) => host === 'localhost' || /^127\./.test(host) || host === '::1' || /^::ffff:127\./i.test(host);
const unknownHost = (host) => Object.assign(new Error(`getaddrinfo ENOTFOUND ${host} (test/no-egress.mjs)`), { code: 'ENOTFOUND', hostname: host });

const lookup = dns.lookup;
dns.lookup = function (host, options, callback) {
  if (loopback(host)) return lookup.call(this, host, options, callback);
  const done = typeof options === 'function' ? options : callback;
  process.nextTick(() => done(unknownHost(host)));
  return {};
};
const lookupPromise = dns.promises.lookup;
dns.promises.lookup = async (host, options) => {
  if (loopback(host)) return lookupPromise(host, options);
  throw unknownHost(host);
};

const connect = net.Socket.prototype.connect;
net.Socket.prototype.connect = function (...args) {
  const options = typeof args[0] === 'object' && args[0] !== null ? (Array.isArray(args[0]) ? args[0][0] : args[0]) : { port: args[0], host: args[1] };
  const host = options?.host ?? 'localhost';
  if (options?.path === undefined && net.isIP(host) && !loopback(host)) {
    process.nextTick(() => this.destroy(Object.assign(new Error(`connect to ${host} refused (test/no-egress.mjs)`), { code: 'ECONNREFUSED' })));
    return this;
  }
  return connect.apply(this, args);
};
