/**
 * Signing in (POST /api/session), and the first run: the owner opens the link `npm start` printed,
 * whose `#token=…` never reaches the server's logs (a fragment is not sent), and claims the
 * console with a name, an email and a password (POST /api/first-run). An invitation's link works
 * the same way: the invited person chooses a name and a password (POST /api/invitation/accept).
 */
import { useState } from 'preact/hooks';
import type { Me } from '../../api.ts';
import { ApiFailure, api, problem } from '../api.ts';
import { useLoad } from '../hooks.ts';
import { ErrorNote } from '../components.tsx';
import { useTitle } from '../hooks.ts';
import type { Place } from '../router.tsx';

type SignedIn = (me: Me, next: string) => void;

/**
 * A form's submit: busy while `run` runs, its failure explained on the form (then it can be
 * sent again). `run` answers 'again' when the form stays for another submit.
 */
function useSubmit(run: () => Promise<void | 'again'>, explain: (err: unknown) => string) {
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError('');
    try {
      if ((await run()) === 'again') setBusy(false);
    } catch (err) {
      setError(explain(err));
      setBusy(false);
    }
  };
  return { error, busy, submit };
}

/** Only a path of this console is a place to go back to after signing in. */
function safeNext(next: string | null): string {
  return next && next.startsWith('/') && !next.startsWith('//') && !next.startsWith('/\\') ? next : '/';
}

function signInProblem(err: unknown): string {
  if (err instanceof ApiFailure && err.status === 401) return 'Wrong email or password.';
  if (err instanceof ApiFailure && err.status === 429) return 'Too many attempts. Wait a minute and try again.';
  return problem(err);
}

interface TenantChoice { id: string; name: string }

/** The tenants a 409 offers when the email and password open accounts in several. */
function tenantsOffered(err: unknown): TenantChoice[] | undefined {
  if (!(err instanceof ApiFailure) || err.status !== 409 || !Array.isArray(err.body.tenants)) return undefined;
  const tenants = err.body.tenants.filter((t): t is TenantChoice => typeof t?.id === 'string' && typeof t?.name === 'string');
  return tenants.length > 1 ? tenants : undefined;
}

export function SignInPage({ place, onSignedIn }: { place: Place; onSignedIn: SignedIn }) {
  useTitle('Sign in');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  // Filled when the email and password open accounts in several tenants: the user picks one.
  const [tenants, setTenants] = useState<TenantChoice[]>([]);
  const [tenantId, setTenantId] = useState('');
  const { error, busy, submit } = useSubmit(async () => {
    try {
      onSignedIn(await api.signIn({ email, password, ...(tenantId ? { tenantId } : {}) }), safeNext(place.query.get('next')));
    } catch (err) {
      const offered = tenantsOffered(err);
      if (!offered) throw err;
      setTenants(offered);
      setTenantId(offered[0]!.id);
      return 'again';
    }
  }, signInProblem);
  // A changed email or password makes the choice stale: the server offers it again if it still applies.
  const forgetTenants = () => { setTenants([]); setTenantId(''); };
  return (
    <main class="auth">
      <form class="auth-card" onSubmit={submit} data-testid="sign-in-form">
        <h1>Sign in to Sluice</h1>
        <ErrorNote error={error} testid="sign-in-error" />
        <label class="field">Email
          <input type="email" autoComplete="username" required value={email} onInput={(event) => { setEmail(event.currentTarget.value); forgetTenants(); }} data-testid="sign-in-email" autoFocus />
        </label>
        <label class="field">Password
          <input type="password" autoComplete="current-password" required value={password} onInput={(event) => { setPassword(event.currentTarget.value); forgetTenants(); }} data-testid="sign-in-password" />
        </label>
        {tenants.length > 0 && <p role="status" data-testid="sign-in-tenant-note">Your email has accounts in several tenants. Choose the one to sign in to.</p>}
        {tenants.length > 0 && (
          <label class="field">Tenant
            <select value={tenantId} onChange={(event) => setTenantId(event.currentTarget.value)} data-testid="sign-in-tenant">
              {tenants.map((tenant) => <option key={tenant.id} value={tenant.id}>{tenant.name}</option>)}
            </select>
          </label>
        )}
        <button type="submit" class="primary" disabled={busy} data-testid="sign-in-submit">{busy ? 'Signing in…' : 'Sign in'}</button>
      </form>
    </main>
  );
}

/** A password being chosen, with the rule it must meet. */
function NewPassword({ value, onInput, testid }: { value: string; onInput: (value: string) => void; testid: string }) {
  return (
    <label class="field">Password
      <input type="password" required minLength={12} autoComplete="new-password" value={value} onInput={(event) => onInput(event.currentTarget.value)} data-testid={testid} aria-describedby={`${testid}-hint`} />
      <span id={`${testid}-hint`} class="muted small">At least 12 characters.</span>
    </label>
  );
}

export function FirstRunPage({ onSignedIn }: { onSignedIn: SignedIn }) {
  useTitle('Set up the console');
  const [token] = useState(() => new URLSearchParams(location.hash.slice(1)).get('token') ?? '');
  const [name, setName] = useState('');
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  // Sources first: the new owner's next step is a source and its API key. The token leaves the URL.
  const { error, busy, submit } = useSubmit(
    async () => onSignedIn(await api.firstRun({ token, name, email, password }), '/sources'),
    (err) => (err instanceof ApiFailure && (err.status === 401 || err.status === 403) ? 'This link has been used or has expired. If the console is set up already, sign in.' : problem(err)),
  );
  if (!token) {
    return (
      <main class="auth">
        <section class="auth-card" data-testid="first-run-no-token">
          <h1>Set up the console</h1>
          <p>Open the link Sluice printed when it started for the first time: it ends with <code>#token=…</code>.</p>
          <p>Already set up? <a href="/sign-in">Sign in</a>.</p>
        </section>
      </main>
    );
  }
  return (
    <main class="auth">
      <form class="auth-card" onSubmit={submit} data-testid="first-run-form">
        <h1>Set up the console</h1>
        <p class="muted">You become the owner of this Sluice.</p>
        <ErrorNote error={error} testid="first-run-error" />
        <label class="field">Your name
          <input required autoComplete="name" value={name} onInput={(event) => setName(event.currentTarget.value)} data-testid="first-run-name" autoFocus />
        </label>
        <label class="field">Email
          <input type="email" required autoComplete="username" value={email} onInput={(event) => setEmail(event.currentTarget.value)} data-testid="first-run-email" />
        </label>
        <NewPassword value={password} onInput={setPassword} testid="first-run-password" />
        <button type="submit" class="primary" disabled={busy} data-testid="first-run-submit">{busy ? 'Setting up…' : 'Create owner account'}</button>
      </form>
    </main>
  );
}

const ROLE_WORDS = { owner: 'an owner', admin: 'an admin', member: 'a member' } as const;

export function InvitePage({ onSignedIn }: { onSignedIn: SignedIn }) {
  useTitle('Join Sluice');
  const [token] = useState(() => new URLSearchParams(location.hash.slice(1)).get('token') ?? '');
  const offer = useLoad(() => (token ? api.invitation(token) : Promise.reject(new ApiFailure(404, 'no token'))), [token]);
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const { error, busy, submit } = useSubmit(
    async () => onSignedIn(await api.acceptInvitation(token, name, password), '/'),
    (err) => (err instanceof ApiFailure && err.status === 404 ? 'This invitation has been used, revoked or has expired. Ask for a new one.' : problem(err)),
  );
  if (offer.loading && !offer.data) return <main class="boot"><p role="status">Loading…</p></main>;
  if (!offer.data) {
    return (
      <main class="auth">
        <section class="auth-card" data-testid="invite-invalid">
          <h1>Join Sluice</h1>
          <p>This invitation link is not valid any more: it has been used, revoked or has expired. Ask whoever invited you for a new one.</p>
          <p>Have an account? <a href="/sign-in">Sign in</a>.</p>
        </section>
      </main>
    );
  }
  const { email, role, tenant } = offer.data;
  return (
    <main class="auth">
      <form class="auth-card" onSubmit={submit} data-testid="invite-accept-form">
        <h1>Join {tenant}</h1>
        <p class="muted" data-testid="invite-offer">You are invited as {ROLE_WORDS[role]}, with the email {email}.</p>
        <ErrorNote error={error} testid="invite-accept-error" />
        <label class="field">Your name
          <input required autoComplete="name" value={name} onInput={(event) => setName(event.currentTarget.value)} data-testid="invite-name" autoFocus />
        </label>
        <input type="email" hidden autoComplete="username" value={email} readOnly />
        <NewPassword value={password} onInput={setPassword} testid="invite-password" />
        <button type="submit" class="primary" disabled={busy} data-testid="invite-accept">{busy ? 'Joining…' : 'Join'}</button>
      </form>
    </main>
  );
}
