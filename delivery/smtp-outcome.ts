/**
 * What an SMTP attempt's result stands for (delivery/channel.ts's AttemptOutcome), in our own
 * words. The server's reply decides: 5xx permanent (but 503, a session-state reply), 4xx
 * transient, no reply (refused connection, timeout, TLS failure) transient, a refused login
 * permanent (but a 4xx one, such as 454), an address the egress policy refused permanent.
 *
 * The error names the reply code, the enhanced status code (RFC 3463) and the command, and
 * describes them from the RFCs' tables; it never repeats the server's text. The attempt's error
 * is shown to the tenant, who may have aimed the transport at something that is not a mail
 * server (`Invalid greeting. response=SSH-2.0-OpenSSH_9.6p1` would make it a banner grabber).
 */
import type { NodemailerError, SMTPPoolSentMessageInfo } from 'nodemailer';
import { clip, type AttemptOutcome } from './channel.ts';
import { refusedOutcome, type EgressRefusal } from './egress.ts';

/** A connection the egress policy refused, as the pool's socket provider fails it. */
export class EgressRefusedError extends Error {
  readonly code = 'EEGRESS';

  constructor(readonly refusal: EgressRefusal) {
    super(`the egress policy refused the SMTP server: ${refusal.reason}`);
  }
}

/** RFC 5321 4.2.3 and RFC 4954's replies, in words. */
const REPLY_MEANINGS: Record<number, string> = {
  421: 'service not available, closing the channel',
  432: 'a password transition is needed',
  450: 'mailbox unavailable',
  451: 'local error in processing',
  452: 'insufficient system storage',
  454: 'temporary authentication failure',
  455: 'unable to accommodate parameters',
  500: 'syntax error, command unrecognised',
  501: 'syntax error in parameters',
  502: 'command not implemented',
  503: 'bad sequence of commands',
  504: 'command parameter not implemented',
  530: 'authentication required',
  534: 'authentication mechanism too weak',
  535: 'authentication credentials invalid',
  538: 'encryption required for the authentication mechanism',
  550: 'mailbox unavailable',
  551: 'user not local',
  552: 'exceeded storage allocation',
  553: 'mailbox name not allowed',
  554: 'transaction failed',
  555: 'MAIL FROM or RCPT TO parameters not recognised',
};

/** RFC 3463's subjects: the middle number of an enhanced status code. */
const STATUS_SUBJECTS = ['other or undefined', 'addressing', 'mailbox', 'mail system', 'network and routing', 'mail delivery protocol', 'message content or media', 'security or policy'];

/** The commands nodemailer names a failure by: its own labels, never the server's. */
const COMMANDS = /^(CONN|EHLO|HELO|LHLO|STARTTLS|AUTH [A-Z0-9-]+|MAIL FROM|RCPT TO|DATA|RSET)$/;

/** Failures before any reply: the server or the path to it, worth another try later. */
const CONNECTION_FAILURES: Record<string, string> = {
  ECONNECTION: 'the connection closed unexpectedly',
  ETIMEDOUT: 'no answer in time',
  ESOCKET: 'a socket error',
  EDNS: 'the host name lookup failed',
  ETLS: 'TLS failed',
  EPROXY: 'the proxy failed',
  EMAXLIMIT: 'the connection reached its message limit',
  ECONNREFUSED: 'the connection was refused',
  ECONNRESET: 'the connection was reset',
  EPIPE: 'the connection broke',
  EHOSTUNREACH: 'the host is unreachable',
  ENETUNREACH: 'the network is unreachable',
  ENOTFOUND: 'the host name does not resolve',
  EAI_AGAIN: 'the host name lookup failed for now',
};
/** nodemailer's timeoutType of an ETIMEDOUT. */
const TIMEOUTS: Record<string, string> = {
  CONNECT_TIMEOUT: 'no connection in time',
  GREETING_TIMEOUT: 'no greeting in time',
  UPGRADE_TIMEOUT: 'the TLS handshake took too long',
  SOCKET_TIMEOUT: 'the server went silent',
};
/** Failures the same message and settings would meet again. */
const SETTLED_FAILURES: Record<string, string> = {
  EENVELOPE: 'the envelope was refused',
  EMESSAGE: 'the message was refused',
  EMAXRECIPIENTS: 'the message names more than one recipient',
  ECONFIG: 'the transport settings are invalid',
};

/** The reply code at the start of an SMTP reply, if there is one. */
function replyCode(response: string | undefined): number | undefined {
  const match = /^(\d{3})\b/.exec(response ?? '');
  return match ? Number(match[1]) : undefined;
}

/** The server took the message; a recipient it refused anyway decides like a failure would. */
export function sentOutcome(info: SMTPPoolSentMessageInfo): AttemptOutcome {
  if (info.rejected.length > 0) {
    const refusal = info.rejectedErrors?.[0];
    return (refusal && failureOutcome(refusal)) ?? { kind: 'permanent', error: 'the server refused the recipient', providerStatus: 'smtp rejected' };
  }
  const response = info.response ?? '';
  // Postfix and most relays: "queued as ID"; Exim: "id=ID". An identifier, not the reply's text.
  const queueId = /\bqueued as\s+([\w.@<>-]+)/i.exec(response)?.[1] ?? /\bid=([\w.@<>-]+)/i.exec(response)?.[1];
  const providerId = info.serverMessageId ?? queueId;
  return { kind: 'delivered', providerStatus: `smtp ${replyCode(response) ?? 250}`, ...(providerId ? { providerId: clip(providerId, 200) } : {}) };
}

/** The outcome a nodemailer error stands for, or undefined when it is not one we know. */
export function failureOutcome(err: NodemailerError): AttemptOutcome | undefined {
  if (err instanceof EgressRefusedError) return refusedOutcome(err.refusal);
  // One recipient per message: its refusal is the answer, whatever DATA got after it.
  const replied = err.rejectedErrors?.find((refusal) => refusal.responseCode) ?? err;
  const code = replied.responseCode ?? replyCode(replied.response);
  if (code !== undefined && code >= 400) {
    const providerStatus = `smtp ${code}`;
    const error = describeReply(code, replied);
    // 503 is "bad sequence of commands": the session's state, not the message (nodemailer's
    // isPermanentResponseCode agrees). A 4xx login failure (454) is the server's trouble too.
    const permanent = code >= 500 && code !== 503;
    return { kind: permanent ? 'permanent' : 'transient', error, providerStatus };
  }
  const kind = err.code ?? '';
  if (kind === 'EPROTOCOL') return { kind: 'transient', error: notSmtp(err.command), providerStatus: 'smtp protocol' };
  // The system's code (ECONNREFUSED under nodemailer's ESOCKET) says more than nodemailer's.
  const connection = CONNECTION_FAILURES[err.originalCode ?? ''] ?? CONNECTION_FAILURES[kind];
  if (connection) return { kind: 'transient', error: `smtp connection: ${describeConnection(err, connection)}`, providerStatus: 'smtp connection' };
  // A login the server refused without a reply code, or credentials it needs and we lack.
  if (kind === 'EAUTH') return { kind: 'permanent', error: 'smtp auth: the login failed', providerStatus: 'smtp auth' };
  if (kind === 'ENOAUTH') return { kind: 'permanent', error: 'smtp auth: the server needs a login the SMTP URL does not give', providerStatus: 'smtp auth' };
  const settled = SETTLED_FAILURES[kind];
  if (settled) return { kind: 'permanent', error: `smtp ${kind}: ${settled}`, providerStatus: 'smtp refused' };
  return undefined;
}

/** `smtp 550 5.1.1 at RCPT TO: mailbox unavailable (permanent failure, addressing status)`. */
function describeReply(code: number, replied: NodemailerError): string {
  const enhanced = /^\d{3}[ -]([245])\.(\d{1,3})\.(\d{1,3})\b/.exec(replied.response ?? '');
  const command = replied.command && COMMANDS.test(replied.command) ? ` at ${replied.command}` : '';
  const meaning = REPLY_MEANINGS[code] ?? (code >= 500 ? 'a permanent negative reply' : 'a transient negative reply');
  if (!enhanced) return `smtp ${code}${command}: ${meaning}`;
  const [, kind, subject, detail] = enhanced;
  const failure = kind === '5' ? 'permanent failure' : kind === '4' ? 'persistent transient failure' : 'success';
  const about = STATUS_SUBJECTS[Number(subject)] ?? 'unknown';
  return `smtp ${code} ${kind}.${subject}.${detail}${command}: ${meaning} (${failure}, ${about} status)`;
}

/** What a reply that is not SMTP was an answer to. */
function notSmtp(command: string | undefined): string {
  if (command === 'CONN') return "the server's greeting is not SMTP";
  return command && COMMANDS.test(command) ? `the server's reply to ${command} is not SMTP` : "the server's reply is not SMTP";
}

/** The failure, and the system's or TLS's code for it (DEPTH_ZERO_SELF_SIGNED_CERT): codes are ours to show, messages may quote the peer. */
function describeConnection(err: NodemailerError, description: string): string {
  const timeout = err.code === 'ETIMEDOUT' ? TIMEOUTS[(err as { timeoutType?: string }).timeoutType ?? ''] : undefined;
  const codes = [err.code, err.originalCode].filter((code): code is string => typeof code === 'string' && /^[A-Z][A-Z0-9_]*$/.test(code));
  return `${timeout ?? description} (${[...new Set(codes)].join(', ')})`;
}
