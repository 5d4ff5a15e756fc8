/**
 * Delivery's face: what the relay and the console use of it. Delivery is a service of its own
 * (jobs, a queue, workers, channel senders, the attempt history, the development inbox); the
 * modules above it import this file only (test/layers.ts), so what they depend on is listed
 * here. The composition root (bin/) builds the parts themselves.
 */
export { DELIVERY_CHANNELS, JOB_STATES, jobIdOf, type DeliveryChannel, type DeliveryJob, type JobKind, type JobState } from './job.ts';
export type { DeliveryQueue } from './queue.ts';
export type { AttemptLog } from './attempt-log.ts';
export { DeliveryHistory, type AttemptView, type JobView } from './history.ts';
export type { RenderedMessage } from './channel.ts';
export type { JobResolver, Resolved } from './worker.ts';
export { isFromInDomains, isPlainEmailAddress, parseMailbox, type SmtpSettings } from './email.ts';
export type { WhatsAppSettings } from './whatsapp.ts';
export { INBOX_LIMITS, MAX_INBOX_PAGE, type DevelopmentInbox, type InboxMessage } from './inbox.ts';
