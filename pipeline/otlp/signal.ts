/** The three OTLP signals, each with its export request and transcoder. */
export type Signal = 'traces' | 'logs' | 'metrics';
