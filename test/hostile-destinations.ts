/**
 * SMTP URLs a hostile tenant admin tried against `npm start` (the operator's loopback, the cloud
 * metadata address, the private network, in the spellings that slip past a naive check), with
 * the reason the egress policy gives for each, decided without a lookup. The configuration tests
 * (the admin API) and the attempt tests (the email sender) both refuse every one.
 */

/** [url, the policy's reason]; `port` is a port on this machine the test listens on, or any. */
export function hostileSmtpUrls(port: number): Array<[string, string]> {
  return [
    [`smtp://127.0.0.1:${port}`, '127.0.0.1 is a loopback address'],
    [`smtp://relay:secret@127.0.0.1:${port}`, '127.0.0.1 is a loopback address'],
    ['smtp://169.254.169.254:25', '169.254.169.254 is a link-local address'],
    [`smtp://localhost.:${port}`, 'localhost names this machine'],
    [`smtp://LOCALHOST:${port}`, 'localhost names this machine'],
    [`smtp://mail.localhost:${port}`, 'mail.localhost names this machine'],
    [`smtps://[::ffff:127.0.0.1]:${port}`, '::ffff:7f00:1 is an IPv4-mapped address'],
    [`smtp://[::1]:${port}`, '::1 is a loopback address'],
    [`smtp://[::127.0.0.1]:${port}`, '::7f00:1 is an IPv4-compatible address'],
    ['smtps://[64:ff9b::a9fe:a9fe]:465', '64:ff9b::a9fe:a9fe is a NAT64 address'],
    // An smtp: URL's host is opaque to WHATWG URL; the system resolver reads these as 127.0.0.1.
    [`smtp://2130706433:${port}`, '127.0.0.1 is a loopback address'],
    [`smtp://0x7f.1:${port}`, '127.0.0.1 is a loopback address'],
    [`smtp://0177.0.0.1:${port}`, '127.0.0.1 is a loopback address'],
    [`smtp://127.1:${port}`, '127.0.0.1 is a loopback address'],
    [`smtp://%31%32%37.0.0.1:${port}`, '127.0.0.1 is a loopback address'],
    ['smtp://10.0.0.1:25', '10.0.0.1 is a private address'],
    ['smtp://100.64.0.1:25', '100.64.0.1 is a carrier-grade NAT address'],
    ['smtp://0.0.0.0:25', '0.0.0.0 is an unspecified address'],
  ];
}
