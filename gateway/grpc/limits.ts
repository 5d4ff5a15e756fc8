/**
 * The gRPC port's limits and how reaching one is reported: every time in a metric, in the log
 * at most once per LOG_EVERY_MS and limit (with the count since the last line), so a flood of
 * refused connections is visible without being a flood of log lines.
 */
import type { Logger } from '../../core/log.ts';
import type { SluiceMetrics } from '../../core/metrics.ts';

export interface GrpcLimits {
  /** Connections open at once; past it new ones are closed at accept. */
  maxConnections: number;
  /** From accept until the client's HTTP/2 preface and SETTINGS. */
  handshakeTimeoutMs: number;
  /** A connection without a call for this long is closed (GOAWAY). */
  idleTimeoutMs: number;
  /** From a call's headers until its whole request message arrived. */
  messageTimeoutMs: number;
  /** Message bytes the calls of one connection may hold at once (a share of the process's budget). */
  maxConnectionBytes: number;
}

export type Limit = 'max_connections' | 'open_files' | 'handshake_timeout' | 'idle_timeout' | 'message_timeout' | 'connection_bytes';

const LOG_EVERY_MS = 10_000;

/** What each limit did, for the log line (idle connections are closed quietly: that is housekeeping). */
const LOG_LINES: Readonly<Record<Exclude<Limit, 'idle_timeout'>, { message: string; setting: keyof GrpcLimits }>> = {
  max_connections: { message: 'gRPC connections refused at accept: the port holds its maximum (SLUICE_GRPC_MAX_CONNECTIONS)', setting: 'maxConnections' },
  open_files: { message: 'gRPC connections not accepted: the process is out of file descriptors (raise ulimit -n, or lower SLUICE_GRPC_MAX_CONNECTIONS)', setting: 'maxConnections' },
  handshake_timeout: { message: 'gRPC connections closed: no HTTP/2 preface in time (SLUICE_GRPC_HANDSHAKE_TIMEOUT_MS)', setting: 'handshakeTimeoutMs' },
  message_timeout: { message: 'gRPC calls ended with DEADLINE_EXCEEDED: the request message did not arrive in time (SLUICE_GRPC_MESSAGE_TIMEOUT_MS)', setting: 'messageTimeoutMs' },
  connection_bytes: { message: 'gRPC calls refused with UNAVAILABLE: their connection holds its share of the in-flight budget', setting: 'maxConnectionBytes' },
};

export class LimitReporter {
  /** Times each limit was reached since its last log line. */
  private readonly unlogged = new Map<Limit, number>();
  /** Limits logged within the last LOG_EVERY_MS: the next line waits for the timer. */
  private readonly quiet = new Map<Limit, NodeJS.Timeout>();

  constructor(
    private readonly metrics: SluiceMetrics,
    private readonly log: Logger,
    private readonly limits: GrpcLimits,
  ) {}

  reached(limit: Limit): void {
    this.metrics.grpcLimited.inc({ limit });
    if (limit === 'idle_timeout') return;
    this.unlogged.set(limit, (this.unlogged.get(limit) ?? 0) + 1);
    if (!this.quiet.has(limit)) this.logLine(limit);
  }

  /** One line for what happened since the last; then quiet for LOG_EVERY_MS. */
  private logLine(limit: Exclude<Limit, 'idle_timeout'>): void {
    const count = this.unlogged.get(limit) ?? 0;
    this.quiet.delete(limit);
    if (count === 0) return;
    this.unlogged.set(limit, 0);
    const { message, setting } = LOG_LINES[limit];
    this.log.warn({ limit, count, [setting]: this.limits[setting] }, message);
    this.quiet.set(limit, setTimeout(() => this.logLine(limit), LOG_EVERY_MS).unref());
  }
}
