/**
 * A client of the console API as the browser app is one: the console's Origin on every call,
 * the session cookie it was given, and the CSRF token on writes. Tests use it to sign in and to
 * make the calls a page would make, and to make the ones a page never would (other origins,
 * no token, another tenant's ids).
 */
import type { Me } from '../console/api.ts';

export interface ConsoleCall {
  method?: string;
  body?: unknown;
  /** Headers to send instead of the client's own (Origin, Cookie, X-CSRF-Token). */
  headers?: Record<string, string | undefined>;
}

export class ConsoleClient {
  cookie = '';
  csrfToken = '';

  constructor(readonly baseUrl: string) {}

  get origin(): string {
    return new URL(this.baseUrl).origin;
  }

  /** Claims the console with the first owner's one-time link. */
  async firstRun(link: string, fields: { name: string; email: string; password: string }): Promise<Me> {
    const token = new URL(link).hash.replace(/^#token=/, '');
    return this.signedIn(await this.call('/api/first-run', { method: 'POST', body: { token, ...fields } }));
  }

  async signIn(email: string, password: string, headers: ConsoleCall['headers'] = {}): Promise<Me> {
    return this.signedIn(await this.call('/api/session', { method: 'POST', body: { email, password }, headers }));
  }

  /** Accepts an invitation's link with a name and password of one's own: signed in as the new user. */
  async acceptInvitation(link: string, fields: { name: string; password: string }, headers: ConsoleCall['headers'] = {}): Promise<Me> {
    const token = new URL(link).hash.replace(/^#token=/, '');
    return this.signedIn(await this.call('/api/invitation/accept', { method: 'POST', body: { token, ...fields }, headers }));
  }

  /** Takes the session of an answer that started one (a new password's). */
  async adopt(response: Response): Promise<Me> {
    return this.signedIn(response);
  }

  /** The answer's JSON, throwing with the status and message unless it is 2xx. */
  async json<T = unknown>(path: string, options: ConsoleCall = {}): Promise<T> {
    const response = await this.call(path, options);
    const text = await response.text();
    if (!response.ok) throw new Error(`${response.status} ${text}`);
    return (text ? JSON.parse(text) : undefined) as T;
  }

  call(path: string, { method = 'GET', body, headers = {} }: ConsoleCall = {}): Promise<Response> {
    const own: Record<string, string | undefined> = {
      origin: this.origin,
      cookie: this.cookie || undefined,
      'x-csrf-token': method === 'GET' ? undefined : this.csrfToken || undefined,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    };
    const sent = Object.fromEntries(Object.entries({ ...own, ...headers }).filter((entry): entry is [string, string] => entry[1] !== undefined));
    return fetch(this.baseUrl + path, { method, headers: sent, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
  }

  private async signedIn(response: Response): Promise<Me> {
    const text = await response.text();
    if (!response.ok) throw new Error(`${response.status} ${text}`);
    this.cookie = (response.headers.get('set-cookie') ?? '').split(';')[0]!;
    const me = JSON.parse(text) as Me;
    this.csrfToken = me.csrfToken;
    return me;
  }
}
