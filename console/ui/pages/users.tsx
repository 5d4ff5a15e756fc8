/**
 * The tenant's users, and one's own account. Everyone sees who is in the tenant; admins and
 * owners invite by a one-time link (shown once, to be sent by whatever means they like), change
 * roles and deactivate, within their rights: an admin neither makes nor changes an owner. The
 * account page changes one's password and signs out every session.
 */
import { useState } from 'preact/hooks';
import type { InvitationView, IssuedInvitation, Me, UserRole, UserView } from '../../api.ts';
import { api, isOwner, mayManageUsers } from '../api.ts';
import { CodeBlock, ErrorNote, Loading, ReadOnlyNote } from '../components.tsx';
import { useChange, useLoad, useSession, useTitle } from '../hooks.ts';
import { formatAgo, formatDateTime } from '../time.ts';

const ROLE_NAMES: Record<UserRole, string> = { owner: 'Owner', admin: 'Admin', member: 'Member' };
/** The roles the signed-in user may give: an admin gives no owner's. */
const grantable = (): UserRole[] => (isOwner() ? ['member', 'admin', 'owner'] : ['member', 'admin']);


function InviteForm({ onIssued }: { onIssued: (issued: IssuedInvitation) => void }) {
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<UserRole>('member');
  const { busy, error, run } = useChange();
  const submit = (event: Event) => {
    event.preventDefault();
    void run(async () => {
      onIssued(await api.invite(email.trim(), role));
      setEmail('');
    });
  };
  return (
    <form class="inline-form invite-form" onSubmit={submit} data-testid="invite-form">
      <label class="field grow">Email
        <input type="email" required value={email} onInput={(event) => setEmail(event.currentTarget.value)} data-testid="invite-email" />
      </label>
      <label class="field">Role
        <select value={role} onChange={(event) => setRole(event.currentTarget.value as UserRole)} data-testid="invite-role">
          {grantable().map((one) => <option key={one} value={one}>{ROLE_NAMES[one]}</option>)}
        </select>
      </label>
      <button type="submit" class="primary" disabled={busy} data-testid="invite-submit">{busy ? 'Inviting…' : 'Invite'}</button>
      <ErrorNote error={error} testid="invite-error" />
    </form>
  );
}

function UserRow({ user, me, busy, onChange }: { user: UserView; me: Me; busy: boolean; onChange: (change: { role?: UserRole; active?: boolean }) => void }) {
  // An admin's rights stop at owners; nobody changes themselves here (the API keeps the last owner).
  const manageable = mayManageUsers() && user.id !== me.user.id && (user.role !== 'owner' || isOwner());
  return (
    <tr data-testid="user-row" class={user.active ? '' : 'inactive'}>
      <td>{user.name || '–'}{user.id === me.user.id && <span class="badge">you</span>}</td>
      <td>{user.email}</td>
      <td>
        {manageable ? (
          <select aria-label={`Role of ${user.email}`} value={user.role} disabled={busy} onChange={(event) => onChange({ role: event.currentTarget.value as UserRole })} data-testid="user-role">
            {grantable().map((one) => <option key={one} value={one}>{ROLE_NAMES[one]}</option>)}
          </select>
        ) : ROLE_NAMES[user.role]}
      </td>
      <td>{user.active ? 'Active' : <span class="muted">Deactivated</span>}</td>
      <td class="muted small" title={formatDateTime(Date.parse(user.createdAt))}>{formatAgo(Date.parse(user.createdAt))}</td>
      <td>
        {manageable && (
          <button type="button" class={user.active ? 'small-button danger' : 'small-button'} disabled={busy} onClick={() => onChange({ active: !user.active })} data-testid="user-active">
            {user.active ? 'Deactivate' : 'Reactivate'}
          </button>
        )}
      </td>
    </tr>
  );
}

function Invitations({ invitations, busy, onRevoke }: { invitations: InvitationView[]; busy: boolean; onRevoke: (id: string) => void }) {
  if (invitations.length === 0) return null;
  return (
    <section class="card" data-testid="invitations">
      <h2 class="card-title">Open invitations</h2>
      <ul class="plain-list">
        {invitations.map((one) => (
          <li key={one.id} data-testid="invitation-row">
            {one.email} · {ROLE_NAMES[one.role]} · <span class="muted small">expires {formatDateTime(Date.parse(one.expiresAt))}</span>{' '}
            {(one.role !== 'owner' || isOwner()) && <button type="button" class="small-button danger" disabled={busy} onClick={() => onRevoke(one.id)} data-testid="invitation-revoke">Revoke</button>}
          </li>
        ))}
      </ul>
    </section>
  );
}

export function UsersPage() {
  useTitle('Users');
  const me = useSession();
  const users = useLoad(() => api.users(), []);
  const invitations = useLoad(() => (mayManageUsers() ? api.invitations() : Promise.resolve({ invitations: [] })), []);
  const [issued, setIssued] = useState<IssuedInvitation | undefined>();
  const { busy, error, run } = useChange();
  const change = (user: UserView, what: { role?: UserRole; active?: boolean }) => run(async () => {
    await api.changeUser(user.id, what);
    users.reload();
  });
  return (
    <>
      <div class="page-head"><h1>Users</h1></div>
      {!mayManageUsers() && <ReadOnlyNote />}
      {mayManageUsers() && (
        <section class="card">
          <h2 class="card-title">Invite someone</h2>
          <p class="muted small">They get a link that works once, for 7 days: send it to them yourself. They choose their name and password.</p>
          <InviteForm onIssued={(next) => { setIssued(next); invitations.reload(); }} />
        </section>
      )}
      {issued && (
        <section class="callout" data-testid="invitation-link" aria-live="polite">
          <div class="callout-head">
            <h2>Invitation for {issued.invitation.email}</h2>
            <button type="button" class="small-button" onClick={() => setIssued(undefined)} data-testid="callout-close">Done</button>
          </div>
          <p><strong>Copy it now: it is shown this once.</strong> It works once, until {formatDateTime(Date.parse(issued.invitation.expiresAt))}.</p>
          <CodeBlock text={issued.link} testid="invitation-url" copyTestid="invitation-copy" />
        </section>
      )}
      <ErrorNote error={error || users.error || invitations.error} />
      {users.loading && !users.data && <Loading what="Loading users" />}
      {users.data && (
        <div class="table-wrap">
          <table class="table" data-testid="users-table">
            <thead><tr><th>Name</th><th>Email</th><th>Role</th><th>Status</th><th>Since</th><th><span class="visually-hidden">Actions</span></th></tr></thead>
            <tbody>
              {users.data.users.map((user) => <UserRow key={user.id} user={user} me={me} busy={busy} onChange={(what) => change(user, what)} />)}
            </tbody>
          </table>
        </div>
      )}
      {invitations.data && <Invitations invitations={invitations.data.invitations} busy={busy} onRevoke={(id) => run(async () => { await api.revokeInvitation(id); invitations.reload(); })} />}
    </>
  );
}

export function AccountPage({ onSignedIn, onSignedOut }: { onSignedIn: (me: Me) => void; onSignedOut: () => void }) {
  useTitle('Your account');
  const me = useSession();
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const [done, setDone] = useState('');
  const { busy, error, run } = useChange();
  const changePassword = (event: Event) => {
    event.preventDefault();
    void run(async () => {
      onSignedIn(await api.changePassword(current, next));
      setCurrent('');
      setNext('');
      setDone('Your password is changed. Every other session of yours has ended.');
    });
  };
  const everywhere = () => run(async () => {
    await api.signOutEverywhere();
    onSignedOut();
  });
  return (
    <>
      <div class="page-head"><h1>Your account</h1></div>
      <section class="card">
        <dl class="fields">
          <dt>Name</dt><dd>{me.user.name || '–'}</dd>
          <dt>Email</dt><dd>{me.user.email}</dd>
          <dt>Tenant</dt><dd>{me.tenant.name}</dd>
          <dt>Role</dt><dd>{ROLE_NAMES[me.user.role]}</dd>
        </dl>
      </section>
      <ErrorNote error={error} testid="account-error" />
      {done && <p class="note" role="status" data-testid="account-done">{done}</p>}
      <form class="card account-form" onSubmit={changePassword} data-testid="password-form">
        <h2 class="card-title">Change your password</h2>
        <label class="field">Current password
          <input type="password" required autoComplete="current-password" value={current} onInput={(event) => setCurrent(event.currentTarget.value)} data-testid="password-current" />
        </label>
        <label class="field">New password
          <input type="password" required minLength={12} autoComplete="new-password" value={next} onInput={(event) => setNext(event.currentTarget.value)} data-testid="password-new" aria-describedby="new-password-hint" />
          <span id="new-password-hint" class="muted small">At least 12 characters. Your other sessions end.</span>
        </label>
        <button type="submit" class="primary" disabled={busy} data-testid="password-submit">Change password</button>
      </form>
      <section class="card">
        <h2 class="card-title">Sessions</h2>
        <p>Signed in on another computer, or lost one? This ends every session of yours, this one too.</p>
        <button type="button" class="danger" disabled={busy} onClick={everywhere} data-testid="sign-out-everywhere">Sign out everywhere</button>
      </section>
    </>
  );
}
